import Glibc
import Synchronization

/// Wall-clock timestamps for output lines. Formatted digit by digit: a
/// `watch` prints one per notification, and string interpolation of padded
/// numbers cost more than the rest of the line.
public enum Timestamp {
    /// `2026-11-22T03:44:09.123Z` (UTC), for JSON.
    public static func iso8601() -> String {
        var text: [UInt8] = []
        text.reserveCapacity(24)
        utcSecond.append(now(), to: &text)
        text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }

    /// `03:44:09.123` (local time), for people.
    public static func clock() -> String {
        var text: [UInt8] = []
        appendClock(to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// The same, appended to a line being built (a `watch` line per notification).
    public static func appendClock(to line: inout [UInt8]) {
        localSecond.append(now(), to: &line)
    }

    private static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }

    /// `YYYY-MM-DDTHH:MM:SS.` in UTC.
    private static let utcSecond = SecondText { seconds in
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var text = Digits(capacity: 20)
        text.append(parts.tm_year + 1900, width: 4, then: "-")
        text.append(parts.tm_mon + 1, width: 2, then: "-")
        text.append(parts.tm_mday, width: 2, then: "T")
        text.appendSeconds(parts)
        return text.bytes
    }

    /// `HH:MM:SS.` in local time.
    private static let localSecond = SecondText { seconds in
        var parts = tm()
        localtime_r(&seconds, &parts)
        var text = Digits(capacity: 9)
        text.appendSeconds(parts)
        return text.bytes
    }

    /// A timestamp's text up to the milliseconds, made once a second:
    /// localtime_r/gmtime_r and the digits are most of its cost, and a line
    /// or a gateway message is made per reading.
    private final class SecondText: Sendable {
        private let format: @Sendable (inout time_t) -> [UInt8]
        private let last = Mutex<(second: time_t, text: [UInt8])?>(nil)

        init(_ format: @escaping @Sendable (inout time_t) -> [UInt8]) { self.format = format }

        func append(_ time: timespec, to line: inout [UInt8]) {
            last.withLock { last in
                if let cached = last, cached.second == time.tv_sec {
                    line += cached.text
                    return
                }
                var seconds = time.tv_sec
                let text = format(&seconds)
                last = (time.tv_sec, text)
                line += text
            }
            let milliseconds = Int(time.tv_nsec / 1_000_000)
            line.append(UInt8(48 + milliseconds / 100))
            line.append(UInt8(48 + milliseconds / 10 % 10))
            line.append(UInt8(48 + milliseconds % 10))
        }
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
    }
}
