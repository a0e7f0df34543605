import Foundation
import Loop
import Glibc
import Testing

/// The loop's descriptors live in an epoll set, registered as they change;
/// these are the cases where epoll and poll differ.
@Suite("Event loop: watched descriptors")
struct EventLoopTests {
    private func pipeDescriptors() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        return (fds[0], fds[1])
    }

    @Test func aRegularFileIsReadableAsPollSaysThoughEpollRefusesIt() async {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let path = "/tmp/birdctl-eventloop-\(getpid())"
        let file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(file); unlink(path) }
        #expect(write(file, "robin\n", 6) == 6)
        let called = await onLoop(loop) { ready in
            nonisolated(unsafe) var token: AnyObject?
            token = loop.watchReadable(file) {
                if let token { loop.unwatch(token) }
                ready()
            }
        }
        #expect(called, "a regular file's watch was never called")
    }

    @Test func aDescriptorClosedUnderItsWatchAndItsNumberReusedIsWatchedAgain() async {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let first = pipeDescriptors()
        let second = pipeDescriptors()
        defer { close(first.read); close(second.read); close(second.write) }
        // Registered in epoll (the loop goes round between the two steps);
        // then the number is made to name another pipe (dup2 closes the first
        // one's end, and the kernel drops it from the epoll set by itself),
        // unwatched and watched again.
        let stale = TokenBox()
        _ = await onLoop(loop) { ready in
            stale.token = loop.watchReadable(first.read) {}
            ready()
        }
        let called = await onLoop(loop) { ready in
            close(first.write)
            _ = dup2(second.read, first.read)
            loop.unwatch(stale.token!)
            nonisolated(unsafe) var token: AnyObject?
            token = loop.watchReadable(first.read) {
                if let token { loop.unwatch(token) }
                ready()
            }
            _ = write(second.write, "x", 1)
        }
        #expect(called, "the descriptor watched again was never reported readable")
    }

    @Test func twoWatchesOnOneDescriptorAreBothCalled() async {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let fds = pipeDescriptors()
        defer { close(fds.read); close(fds.write) }
        let bothCalled = await onLoop(loop) { ready in
            nonisolated(unsafe) var tokens: [AnyObject] = []
            nonisolated(unsafe) var calls = 0
            for _ in 0..<2 {
                tokens.append(loop.watchReadable(fds.read) {
                    calls += 1
                    if calls == 2 {
                        tokens.forEach(loop.unwatch)
                        ready()
                    }
                })
            }
            _ = write(fds.write, "x", 1)
        }
        #expect(bothCalled, "one of two watches on a readable descriptor was not called")
    }

    @Test func aWatchRemovedByAnEarlierHandlerInTheSameRoundIsNotCalled() async {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let first = pipeDescriptors()
        let second = pipeDescriptors()
        defer { [first.read, first.write, second.read, second.write].forEach { close($0) } }
        // Both readable before the loop waits: one round reports both, and
        // whichever handler runs first removes the other's watch.
        let calls = OrderBox()
        let done = await onLoop(loop) { ready in
            nonisolated(unsafe) var tokens: [AnyObject] = []
            for fd in [first.read, second.read] {
                tokens.append(loop.watchReadable(fd) {
                    calls.fired.append(Int(fd))
                    tokens.forEach(loop.unwatch)
                    tokens.removeAll()
                    loop.schedule(after: .milliseconds(50), ready)
                })
            }
            _ = write(first.write, "x", 1)
            _ = write(second.write, "x", 1)
        }
        #expect(done)
        #expect(calls.fired.count == 1, "a watch removed by the handler before it was still called")
    }

    @Test func anEdgeTriggeredWatchIsCalledAgainForDataAfterItDrained() async {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let fds = pipeDescriptors()
        defer { close(fds.read); close(fds.write) }
        _ = fcntl(fds.read, F_SETFL, O_NONBLOCK)
        let calledThrice = await onLoop(loop) { ready in
            nonisolated(unsafe) var token: AnyObject?
            nonisolated(unsafe) var calls = 0
            token = loop.watchReadable(fds.read, drains: true) { _ in
                var byte: UInt8 = 0
                while read(fds.read, &byte, 1) == 1 {}
                calls += 1
                // More after each drain: from the loop (a timer) and, the
                // last time, written in the handler itself after it drained.
                if calls == 1 { loop.schedule(after: .milliseconds(10)) { _ = write(fds.write, "y", 1) } }
                if calls == 2 { _ = write(fds.write, "z", 1) }
                if calls == 3, let token {
                    loop.unwatch(token)
                    ready()
                }
            }
            _ = write(fds.write, "x", 1)
        }
        #expect(calledThrice, "an edge-triggered watch missed data that came after it drained")
    }
}

/// Timers keep their earliest deadline rather than looking through all of
/// them at every wake-up; these are the cases where that could go wrong.
@Suite("Event loop: timers")
struct EventLoopTimerTests {
    @Test func timersFireInDeadlineOrderWhicheverWasScheduledFirst() async {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let order = OrderBox()
        let done = await onLoop(loop) { ready in
            loop.schedule(after: .milliseconds(60)) { order.fired.append(3); ready() }
            loop.schedule(after: .milliseconds(40)) { order.fired.append(2) }
            loop.schedule(after: .milliseconds(20)) { order.fired.append(1) }
        }
        #expect(done)
        #expect(order.fired == [1, 2, 3])
    }

    @Test func cancellingTheSoonestTimerLeavesTheNextOnTimeAndTheCancelledSilent() async {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let order = OrderBox()
        let started = MonotonicInstant.now
        let done = await onLoop(loop) { ready in
            let soonest = loop.schedule(after: .milliseconds(20)) { order.fired.append(1) }
            loop.schedule(after: .milliseconds(80)) {
                order.fired.append(2)
                order.elapsed = started.duration(to: .now)
                ready()
            }
            loop.cancel(soonest)
            // Scheduled after the cancel, while the earliest deadline is being looked for again.
            loop.schedule(after: .milliseconds(40)) { order.fired.append(3) }
        }
        #expect(done)
        #expect(order.fired == [3, 2])
        #expect(order.elapsed >= .milliseconds(80), "the later timer fired early")
    }
}

/// birdctl runs its loop on the main thread: work posted before it runs,
/// from elsewhere while it runs, and a timer, all on the calling thread.
@Suite("Event loop: on the caller's thread")
struct EventLoopOnCallersThreadTests {
    @Test(.timeLimit(.minutes(1))) func runsPostedWorkAndTimersHereUntilStopped() {
        let loop = EventLoop()
        let seen = ThreadsSeen()
        let here = pthread_self()
        loop.execute { seen.append(pthread_self(), "posted before it ran", loop.isInLoop) }
        loop.execute {
            loop.schedule(after: .milliseconds(20)) {
                seen.append(pthread_self(), "timer", loop.isInLoop)
                // From another thread, as libmosquitto's would: the loop is woken for it.
                Thread.detachNewThread {
                    loop.execute { seen.append(pthread_self(), "posted from a thread", loop.isInLoop); loop.stop() }
                }
            }
        }
        loop.runOnCurrentThread()
        #expect(seen.labels == ["posted before it ran", "timer", "posted from a thread"])
        #expect(seen.threads.allSatisfy { pthread_equal($0, here) != 0 })
        #expect(seen.inLoop == [true, true, true])
        // Ended: work now runs at once where it is posted.
        loop.execute { seen.append(pthread_self(), "after it ended", loop.isInLoop) }
        #expect(seen.labels.last == "after it ended")
    }
}

private final class ThreadsSeen: @unchecked Sendable {
    var threads: [pthread_t] = []
    var labels: [String] = []
    var inLoop: [Bool] = []
    func append(_ thread: pthread_t, _ label: String, _ isInLoop: Bool) {
        threads.append(thread)
        labels.append(label)
        inLoop.append(isInLoop)
    }
}

private final class OrderBox: @unchecked Sendable {
    var fired: [Int] = []
    var elapsed: Duration = .zero
}

/// A watch's token, kept between two turns of the loop.
private final class TokenBox: @unchecked Sendable {
    var token: AnyObject?
}
