import Loop
import Glibc
import Testing

@Suite("The monotonic clock")
struct MonotonicInstantTests {
    @Test func arithmeticAndOrder() {
        let start = MonotonicInstant.now
        let later = start + .milliseconds(1500)
        #expect(later - start == .milliseconds(1500))
        #expect(start.duration(to: later) == .milliseconds(1500))
        #expect(later.duration(to: start) == .milliseconds(-1500))
        #expect(start < later && later - .milliseconds(1500) == start)
        #expect(start + .nanoseconds(1) > start)
    }

    /// A deadline a thousand years away is "never", not an overflow trap.
    @Test func hugeDurationsSaturate() {
        let start = MonotonicInstant.now
        let far = start + .seconds(Int64.max)
        #expect(far > start + .seconds(1_000_000_000))
        #expect(far + .seconds(1) == far)
        #expect(start - .seconds(Int64.max) < start)
    }

    @Test func followsTheClock() throws {
        let before = MonotonicInstant.now
        var pause = timespec(tv_sec: 0, tv_nsec: 20_000_000)
        nanosleep(&pause, nil)
        let elapsed = MonotonicInstant.now - before
        // At least the pause (the kernel's promise); how much more depends on the machine's load.
        #expect(elapsed >= .milliseconds(20))
    }
}
