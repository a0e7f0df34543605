import BlueZTestSupport
@testable import DBus
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

    @Test func aRegularFileIsReadableAsPollSaysThoughEpollRefusesIt() async throws {
        let pair = try EchoPair()
        let loop = pair.client.loop
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

    @Test func aDescriptorClosedUnderItsWatchAndItsNumberReusedIsWatchedAgain() async throws {
        let pair = try EchoPair()
        let loop = pair.client.loop
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

    @Test func twoWatchesOnOneDescriptorAreBothCalled() async throws {
        let pair = try EchoPair()
        let loop = pair.client.loop
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
}

/// A watch's token, kept between two turns of the loop.
private final class TokenBox: @unchecked Sendable {
    var token: AnyObject?
}
