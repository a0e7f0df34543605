import Glibc

/// The loop's thread contract, checked in a debug build.
///
/// A loop-bound object (a driver, a client, a connection's internals…) is
/// marked `@unchecked Sendable` because of a contract, not a lock: its state
/// is touched only on its loop's thread, and other threads reach it through
/// `execute`. Its entry points call `assertInLoop()`, which in a debug build
/// traps when that contract is broken and in a release build is nothing at
/// all (inlined, empty: this is the hot path).
///
/// While the loop does not run — before its thread starts, or after it
/// ended, when `execute` runs work where it is posted — there is no loop
/// thread to be on, and the owner's thread is the only one: that passes.
extension EventLoop {
    @inlinable @inline(__always)
    public func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        checkInLoop(file: file, line: line)
        #endif
    }

    #if DEBUG
    @usableFromInline
    func checkInLoop(file: StaticString, line: UInt) {
        let thread = loopThread.load(ordering: .acquiring)
        guard thread != 0, !hasEnded.load(ordering: .acquiring) else { return }
        precondition(
            pthread_self() == thread, "a loop-bound object was touched off its event loop's thread",
            file: file, line: line)
    }
    #endif
}
