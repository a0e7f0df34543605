import Dispatch
import Foundation
import Glibc
import Testing

/// The test support's reads from child processes go on when a signal
/// interrupts them (Foundation's own reads trap on EINTR).
@Suite("Test support: reads a signal interrupts")
struct InterruptedReadTests {
    /// What the reading thread tells the test.
    final class Reader: @unchecked Sendable {
        let lock = NSLock()
        var thread: pthread_t?
        var data: Data?
        let started = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
    }

    @Test func aReadInterruptedByASignalIsRetried() throws {
        // A handler without SA_RESTART, so that read(2) fails with EINTR.
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        action.sa_flags = 0
        var previous = sigaction()
        #expect(sigaction(SIGUSR1, &action, &previous) == 0)
        defer { sigaction(SIGUSR1, &previous, nil) }

        let pipe = Pipe()
        let reader = Reader()
        Thread.detachNewThread {
            var unblocked = sigset_t()
            sigemptyset(&unblocked)
            sigaddset(&unblocked, SIGUSR1)
            pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
            reader.lock.withLock { reader.thread = pthread_self() }
            reader.started.signal()
            let data = pipe.fileHandleForReading.nextChunk()
            reader.lock.withLock { reader.data = data }
            reader.finished.signal()
        }
        reader.started.wait()
        Thread.sleep(forTimeInterval: 0.2)  // blocked in read(2) by now
        let thread = try #require(reader.lock.withLock { reader.thread })
        for _ in 0..<3 {
            #expect(pthread_kill(thread, SIGUSR1) == 0)
            Thread.sleep(forTimeInterval: 0.05)
        }
        // Interrupted three times, the read is still waiting for the bytes.
        #expect(reader.lock.withLock { reader.data } == nil)
        pipe.fileHandleForWriting.write(Data("after the signals".utf8))
        #expect(reader.finished.wait(timeout: .now() + 10) == .success)
        #expect(reader.lock.withLock { reader.data } == Data("after the signals".utf8))
    }
}
