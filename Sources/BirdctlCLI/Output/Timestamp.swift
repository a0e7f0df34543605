import Glibc
import Synchronization

/// Wall-clock timestamps for output lines. Formatted digit by digit: a
/// `watch` prints one per notification, and string interpolation of padded
/// numbers cost more than the rest of the line.
enum Timestamp {
    /// `2026-11-22T03:44:09.123Z` (UTC), for JSON.
    static func iso8601() -> String {
        let (parts, milliseconds) = now(local: false)
        var text = Digits(capacity: 24)
        text.append(parts.tm_year + 1900, width: 4, then: "-")
        text.append(parts.tm_mon + 1, width: 2, then: "-")
        text.append(parts.tm_mday, width: 2, then: "T")
        text.appendSeconds(parts)
        text.append(milliseconds, width: 3, then: "Z")
        return text.string
    }

    /// `03:44:09.123` (local time), for people.
    static func clock() -> String {
        var text: [UInt8] = []
        appendClock(to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// The same, appended to a line being built (a `watch` line per notification).
    static func appendClock(to line: inout [UInt8]) {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        // localtime_r is most of the cost: once a second.
        lastSecond.withLock { last in
            if let cached = last, cached.second == time.tv_sec {
                line += cached.text
                return
            }
            var seconds = time.tv_sec
            var parts = tm()
            localtime_r(&seconds, &parts)
            var text = Digits(capacity: 9)
            text.appendSeconds(parts)
            last = (time.tv_sec, text.bytes)
            line += text.bytes
        }
        let milliseconds = Int(time.tv_nsec / 1_000_000)
        line.append(UInt8(48 + milliseconds / 100))
        line.append(UInt8(48 + milliseconds / 10 % 10))
        line.append(UInt8(48 + milliseconds % 10))
    }

    /// The local `HH:MM:SS.` of the last second formatted.
    private static let lastSecond = Mutex<(second: Int, text: [UInt8])?>(nil)

    private static func now(local: Bool) -> (tm, Int32) {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        var seconds = time.tv_sec
        var parts = tm()
        if local { localtime_r(&seconds, &parts) } else { gmtime_r(&seconds, &parts) }
        return (parts, Int32(time.tv_nsec / 1_000_000))
    }

    /// ASCII being built: zero-padded numbers and separators.
    private struct Digits {
        var bytes: [UInt8] = []

        init(capacity: Int) { bytes.reserveCapacity(capacity) }

        mutating func append(_ value: Int32, width: Int, then separator: Unicode.Scalar? = nil) {
            var divisor: Int32 = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor > 0 {
                bytes.append(UInt8(48 + (value / divisor) % 10))
                divisor /= 10
            }
            if let separator { bytes.append(UInt8(ascii: separator)) }
        }

        /// `HH:MM:SS.` (the milliseconds follow).
        mutating func appendSeconds(_ parts: tm) {
            append(parts.tm_hour, width: 2, then: ":")
            append(parts.tm_min, width: 2, then: ":")
            append(parts.tm_sec, width: 2, then: ".")
        }

        var string: String { String(decoding: bytes, as: UTF8.self) }
    }
}
