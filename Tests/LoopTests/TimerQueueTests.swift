import Glibc
@testable import Loop
import Synchronization
import Testing

/// The loop's timers in deadline order (a heap with cancelled entries left
/// in until they reach the top), and the loop firing many of them.
@Suite("Event loop: the timer queue")
struct TimerQueueTests {
    private static let start = MonotonicInstant.now

    private func entry(_ milliseconds: Int, id: UInt64) -> TimerQueue.Entry {
        TimerQueue.Entry(deadline: Self.start + .milliseconds(milliseconds), id: id)
    }

    private func drained(_ queue: inout TimerQueue) -> [UInt64] {
        var ids: [UInt64] = []
        while queue.first != nil { ids.append(queue.removeFirst().id) }
        return ids
    }

    @Test func entriesComeOutByDeadlineThenByAge() {
        var generator = SystemRandomNumberGenerator()
        let deadlines = (0..<500).map { _ in Int.random(in: 0..<50, using: &generator) }
        var queue = TimerQueue()
        for (id, deadline) in deadlines.enumerated() { queue.insert(entry(deadline, id: UInt64(id))) }
        let expected = deadlines.enumerated().sorted { ($0.element, $0.offset) < ($1.element, $1.offset) }.map { UInt64($0.offset) }
        #expect(drained(&queue) == expected)
    }

    @Test func aRebuildKeepsOnlyTheLiveOnesInOrder() {
        var queue = TimerQueue()
        for id in 0..<300 { queue.insert(entry((id * 7919) % 300, id: UInt64(id))) }
        queue.rebuild { $0.id % 3 != 0 }
        #expect(queue.count == 200)
        let ids = drained(&queue)
        #expect(ids.allSatisfy { $0 % 3 != 0 })
        #expect(ids == ids.sorted { (($0 * 7919) % 300, $0) < (($1 * 7919) % 300, $1) })
    }

    /// Many timers at shuffled deadlines, a third cancelled (some by another
    /// timer's handler, as a bird's watchdog cancels its own on a notification):
    /// the others fire in deadline order, the cancelled never. (A deadline is
    /// the instant of scheduling plus the delay, and scheduling 300 takes a
    /// while under a sanitizer: the order is checked against each timer's
    /// window, from just before its scheduling to just after, plus its delay.)
    @Test func theLoopFiresManyTimersInOrderAndNoneItCancelled() async {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let fired = FiredBox()
        let count = 300
        let delays = (0..<count).map { ($0 * 37) % count }  // a permutation of 0..<300 ms
        let done = await onLoop(loop) { ready in
            var ids: [EventLoop.TimerID] = []
            for (index, delay) in delays.enumerated() {
                let before = MonotonicInstant.now
                ids.append(loop.schedule(after: .milliseconds(delay)) {
                    fired.order.append(index)
                    // Each timer at a multiple of 6 ms cancels the one
                    // scheduled right after it (if that one is still to come).
                    if delay % 6 == 0, index + 1 < count { loop.cancel(ids[index + 1]) }
                })
                fired.windows.append((before + .milliseconds(delay), MonotonicInstant.now + .milliseconds(delay)))
            }
            for index in stride(from: 0, to: count, by: 3) { loop.cancel(ids[index]) }
            loop.schedule(after: .milliseconds(count + 50)) { ready() }
        }
        #expect(done)
        let order = fired.order, windows = fired.windows
        #expect(order.allSatisfy { $0 % 3 != 0 }, "a cancelled timer fired")
        for (earlier, later) in zip(order, order.dropFirst()) {
            #expect(!(windows[later].latest < windows[earlier].earliest), "\(later) fired after \(earlier): \(order)")
        }
        let position = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($0.element, $0.offset) })
        // A timer a handler cancelled never fires after it; one that did not
        // fire (and was not cancelled up front) was cancelled by such a handler.
        for index in order where delays[index] % 6 == 0 && index + 1 < count {
            if let next = position[index + 1] { #expect(next < position[index]!, "\(index + 1) fired after its cancel") }
        }
        for index in 0..<count where index % 3 != 0 && position[index] == nil {
            #expect(index > 0 && position[index - 1] != nil && delays[index - 1] % 6 == 0, "\(index) never fired")
        }
    }

    /// A handler that schedules a timer with no delay: the new one waits for
    /// the next wake-up, so a descriptor that became ready meanwhile is served.
    @Test func aTimerRescheduledWithNoDelayDoesNotStarveADescriptor() async {
        let loop = EventLoop.started()
        defer { loop.stop() }
        var pair: [Int32] = [0, 0]
        #expect(pipe(&pair) == 0)
        let (reading, writing) = (pair[0], pair[1])
        defer { close(reading); close(writing) }
        let fired = FiredBox()
        let served = await onLoop(loop) { ready in
            func again() {
                fired.order.append(0)
                if fired.order.count < 100_000 { loop.schedule(after: .zero) { again() } }
            }
            loop.schedule(after: .zero) { again() }
            nonisolated(unsafe) var token: AnyObject?
            token = loop.watchReadable(reading) {
                if let token { loop.unwatch(token) }
                fired.whenServed.store(fired.order.count, ordering: .releasing)  // the timers go on after this
                ready()
            }
            _ = write(writing, "x", 1)
        }
        #expect(served)
        #expect(fired.whenServed.load(ordering: .acquiring) < 100_000, "the descriptor waited for every timer")
    }
}

private final class FiredBox: @unchecked Sendable {
    var order: [Int] = []
    var windows: [(earliest: MonotonicInstant, latest: MonotonicInstant)] = []
    /// Read off the loop while its timers go on: ThreadSanitizer does not
    /// see the continuation's resume (libdispatch is not instrumented) as ordering it.
    let whenServed = Atomic<Int>(.max)
}
