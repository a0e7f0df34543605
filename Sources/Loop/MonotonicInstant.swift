import Glibc

/// A point in time on CLOCK_BOOTTIME, the clock ContinuousClock reads on
/// Linux (it keeps counting while the machine sleeps). birdctl has its own
/// because ContinuousClock lives in the Swift Concurrency runtime, which
/// nothing else in birdctl needs: using it linked that runtime in, and a
/// `read` mapped its code (see docs/performance.md, 'What a read maps').
public struct MonotonicInstant: Comparable, Hashable, Sendable {
    /// Nanoseconds since boot: 292 years fit.
    private let nanoseconds: Int64

    public static var now: MonotonicInstant {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return MonotonicInstant(nanoseconds: Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec))
    }

    public static func + (instant: MonotonicInstant, duration: Duration) -> MonotonicInstant {
        MonotonicInstant(nanoseconds: instant.nanoseconds.addingSaturated(nanoseconds(of: duration)))
    }

    public static func - (instant: MonotonicInstant, duration: Duration) -> MonotonicInstant {
        instant + (.zero - duration)
    }

    public static func - (later: MonotonicInstant, earlier: MonotonicInstant) -> Duration {
        .nanoseconds(later.nanoseconds &- earlier.nanoseconds)
    }

    public func duration(to other: MonotonicInstant) -> Duration { other - self }

    public static func < (a: MonotonicInstant, b: MonotonicInstant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// Whole nanoseconds, saturating: a timeout of a thousand years is "never", not a crash.
    private static func nanoseconds(of duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return whole.addingSaturated(attoseconds / 1_000_000_000)
    }
}

extension Int64 {
    fileprivate func addingSaturated(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other < 0 ? .min : .max) : sum
    }
}
