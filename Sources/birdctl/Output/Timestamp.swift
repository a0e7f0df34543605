import Glibc

/// Wall-clock timestamps for output lines.
enum Timestamp {
    /// `2026-11-22T03:44:09.123Z` (UTC), for JSON.
    static func iso8601() -> String {
        let (parts, milliseconds) = now(local: false)
        return "\(parts.tm_year + 1900)-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday))T"
            + "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec)).\(pad(milliseconds, 3))Z"
    }

    /// `03:44:09.123` (local time), for people.
    static func clock() -> String {
        let (parts, milliseconds) = now(local: true)
        return "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec)).\(pad(milliseconds, 3))"
    }

    private static func now(local: Bool) -> (tm, Int32) {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        var seconds = time.tv_sec
        var parts = tm()
        if local { localtime_r(&seconds, &parts) } else { gmtime_r(&seconds, &parts) }
        return (parts, Int32(time.tv_nsec / 1_000_000))
    }

    private static func pad(_ value: Int32, _ width: Int = 2) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
