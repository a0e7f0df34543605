import Glibc
import Loop
import Testing

/// A loop-bound object's state is touched only on its loop's thread; in a
/// debug build the loop's entry points (`schedule`, `cancel`, watches…) and
/// the objects' own (`assertInLoop()`) trap when that is broken. Each case
/// runs in a child process, which the trap ends. Exit tests came with Swift
/// 6.2: Debian 13's Swift 6.0 (`make build-swift60`) builds the suite empty.
@Suite("Event loop: loop-bound objects")
struct LoopBoundTests {
    #if compiler(>=6.2)
    #if DEBUG
    @Test func schedulingATimerFromAnotherThreadWhileTheLoopRunsTraps() async {
        await #expect(processExitsWith: .failure) {
            let loop = EventLoop.started()
            loop.schedule(after: .seconds(1)) {}
        }
    }

    @Test func anObjectsOwnCheckOffTheLoopTraps() async {
        await #expect(processExitsWith: .failure) {
            let loop = EventLoop.started()
            loop.assertInLoop()
        }
    }
    #endif

    /// The same calls made the right way end well: through `execute`, on the
    /// loop; and before the loop runs, when the owner's thread is the only one.
    @Test(.timeLimit(.minutes(1))) func theSameCallsOnTheLoopOrBeforeItRunsPass() async {
        await #expect(processExitsWith: .success) {
            let waiting = EventLoop()
            waiting.schedule(after: .seconds(1)) {}
            waiting.assertInLoop()
            let loop = EventLoop.started()
            loop.execute {
                loop.assertInLoop()
                loop.schedule(after: .milliseconds(1)) { exit(0) }
            }
            while true { pause() }
        }
    }
    #endif
}
