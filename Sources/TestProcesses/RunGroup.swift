import CTestSupport
import Foundation
import Glibc

/// The process group of this run's children, led by a watchdog that ends
/// them all when the test process ends — however it ends: a crash, SIGKILL,
/// Ctrl-C, or a test that failed before it stopped its children.
///
/// The watchdog is a shell reading a pipe whose other end only the test
/// process holds (closed on exec, so no child has it): when the test
/// process is gone, the kernel closes that end, the read sees end of file,
/// and the shell kills its process group, which every child joins when it
/// is spawned (before exec, so its own children are in it too, unless they
/// make a session of their own as `script` does). This needs no help from
/// the child and survives a credential change (`setpriv`), unlike
/// PR_SET_PDEATHSIG, which also fires when the *thread* that started the
/// child ends.
///
/// One thread reaps the group's children (waitpid on the group): no thread
/// per child, and no SIGCHLD handler to share with anyone else.
final class RunGroup: @unchecked Sendable {
    /// The group's id: the watchdog's pid.
    let id: Int32
    private let lock = NSLock()
    private var running: [Int32: ExitStatus] = [:]
    /// Ends the reaper saw before `spawn` had recorded the child.
    private var early: [Int32: ExitStatus.Value] = [:]
    /// Our end of the watchdog's pipe, never closed: it closes when we end.
    private let lifeline: Int32

    private static let lock = NSLock()
    nonisolated(unsafe) private static var current: RunGroup?

    static func shared() throws -> RunGroup {
        try lock.withLock {
            if let current { return current }
            let group = try RunGroup()
            current = group
            return group
        }
    }

    private init() throws {
        let (read, write) = try makePipe()
        defer { close(read) }
        // `read` ends at end of file; the group is then killed, the watchdog with it.
        let script = "while read -r _; do :; done; kill -KILL 0"
        let argv = ["/bin/sh", "-c", script, "birdctl-test-watchdog"].flatMap { Array($0.utf8CString) }
        let envp = ["PATH=/usr/bin:/bin"].flatMap { Array($0.utf8CString) }
        let pid = test_support_spawn("/bin/sh", argv, argv.count, envp, envp.count, read, -1, -1, 0)
        guard pid > 0 else {
            close(write)
            throw TestSetupError("cannot start the run's watchdog: errno \(-pid)")
        }
        (id, lifeline) = (pid, write)
        Thread.detachNewThread { [self] in reap() }
    }

    /// Spawns a child (through `start`, which returns its pid or -errno) and
    /// records where its end goes.
    func spawn(_ exit: ExitStatus, _ start: () -> Int32) -> Int32 {
        lock.withLock {
            // Under the lock, so the reaper cannot see the end before the record.
            let pid = start()
            guard pid > 0 else { return pid }
            if let ended = early.removeValue(forKey: pid) {
                exit.finish(ended)
            } else {
                running[pid] = exit
            }
            return pid
        }
    }

    private func reap() {
        while true {
            var status: Int32 = 0
            var signaled: Int32 = 0
            let pid = test_support_wait_group(id, &status, &signaled)
            // ECHILD: the watchdog itself is gone, and every child with it.
            guard pid > 0 else { return }
            let ended = ExitStatus.Value(status: status, signaled: signaled != 0)
            let exit = lock.withLock {
                let exit = running.removeValue(forKey: pid)
                if exit == nil && pid != id { early[pid] = ended }
                return exit
            }
            exit?.finish(ended)
        }
    }
}
