import CTestSupport
import Foundation
import Glibc

/// A program the tests start: dbus-daemon, the fake BlueZ, birdctl,
/// mosquitto and its clients. The one way the test support starts a child
/// and waits for it.
///
/// Started with posix_spawn, not Foundation's `Process` (whose `run` lists
/// /proc/self/fd and over-reads it when the test process holds many
/// descriptors: swift-corelibs-foundation #5472). Each child holds only the
/// descriptors given to it, runs with no signal blocked, and joins the run's
/// process group, which the run's watchdog kills when the test process ends
/// however it ends (see `RunGroup`).
public final class ChildProcess: @unchecked Sendable {
    /// What the child reads on stdin.
    public enum Input: Sendable {
        case null
        /// A pipe whose writing end is `stdin`.
        case pipe
    }

    /// Where the child's stdout or stderr goes.
    public enum Output: Sendable {
        case null
        /// A pipe whose reading end is `stdout` (or `stderr`).
        case pipe
        /// A file, created or emptied.
        case file(URL)
    }

    public let pid: Int32
    /// Our ends of the pipes asked for.
    public let stdin: FileHandle?
    public let stdout: FileHandle?
    public let stderr: FileHandle?
    private let exit: ExitStatus

    /// Starts `executable`. `environment` is added to the test process's own.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        stdin: Input = .null, stdout: Output = .null, stderr: Output = .null
    ) throws {
        let group = try RunGroup.shared()
        var theirs: [Int32] = []
        defer { for fd in theirs { close(fd) } }
        func open(_ output: Output) throws -> (child: Int32, ours: FileHandle?) {
            switch output {
            case .null: return (-1, nil)
            case .pipe:
                let (read, write) = try makePipe()
                theirs.append(write)
                return (write, FileHandle(fileDescriptor: read, closeOnDealloc: true))
            case .file(let url):
                let fd = Glibc.open(url.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard fd >= 0 else { throw TestSetupError("cannot open \(url.path): errno \(errno)") }
                theirs.append(fd)
                return (fd, nil)
            }
        }
        var input: (child: Int32, ours: FileHandle?) = (-1, nil)
        if case .pipe = stdin {
            let (read, write) = try makePipe()
            theirs.append(read)
            input = (read, FileHandle(fileDescriptor: write, closeOnDealloc: true))
        }
        let output = try open(stdout)
        let error = try open(stderr)
        var merged = ProcessInfo.processInfo.environment
        merged.merge(environment) { $1 }
        let argv = ([executable] + arguments).flatMap { Array($0.utf8CString) }
        let envp = merged.map { "\($0.key)=\($0.value)" }.flatMap { Array($0.utf8CString) }
        exit = ExitStatus()
        let pid = group.spawn(exit) {
            test_support_spawn(
                executable, argv, argv.count, envp, envp.count, input.child, output.child, error.child, group.id)
        }
        guard pid > 0 else { throw TestSetupError("cannot start \(executable): errno \(-pid)") }
        self.pid = pid
        (self.stdin, self.stdout, self.stderr) = (input.ours, output.ours, error.ours)
    }

    /// Sends a signal (nothing once the child has been reaped: its pid may be another's).
    public func signal(_ signal: Int32) {
        exit.whileRunning { Glibc.kill(pid, signal) }
    }

    /// SIGKILL, without waiting.
    public func kill() { signal(SIGKILL) }

    /// Its exit code, or the signal that ended it (as Foundation's
    /// `terminationStatus`); nil while it runs.
    public var status: Int32? { exit.current?.status }

    /// Whether a signal ended it (nil while it runs).
    public var signaled: Bool? { exit.current?.signaled }

    /// Blocks until it ends: its status, or nil if `timeout` passed first.
    public func wait(within timeout: Duration? = nil) -> Int32? {
        exit.wait(within: timeout)
    }

    /// Awaits its end: its status; nil if it had not ended within `timeout`
    /// (it is then killed). An end the reaper saw before the deadline counts,
    /// however late the test process gets to run.
    public func exited(within timeout: Duration = .seconds(30)) async -> Int32? {
        let watchdog = Task { [self] () -> Bool in
            guard (try? await Task.sleep(for: timeout)) != nil, self.status == nil else { return false }
            kill()
            return true
        }
        let ended = await exit.value()
        watchdog.cancel()
        return await watchdog.value ? nil : ended
    }

    /// Runs a program to its end; its status and stdout.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:]
    ) throws -> (status: Int32, stdout: String) {
        let child = try ChildProcess(executable, arguments, environment: environment, stdout: .pipe)
        // Helpers end by themselves (mosquitto_sub -W, openssl): a minute is a hang.
        let output = child.stdout?.readToEnd(within: .seconds(60))
        try? child.stdout?.close()
        guard let output, let status = child.wait(within: .seconds(10)) else {
            child.kill()
            throw TestSetupError("\(executable) \(arguments.joined(separator: " ")) did not end within a minute")
        }
        return (status, String(decoding: output, as: UTF8.self))
    }
}

/// A pipe whose ends are closed on exec (a child gets only what is dup'ed to it).
func makePipe() throws -> (read: Int32, write: Int32) {
    var fds: [Int32] = [-1, -1]
    let result = test_support_pipe(&fds)
    guard result == 0 else { throw TestSetupError("pipe: errno \(-result)") }
    return (fds[0], fds[1])
}

/// A child's end as the reaper saw it, waited for by threads and tasks.
final class ExitStatus: @unchecked Sendable {
    struct Value { var status: Int32, signaled: Bool }
    private let condition = NSCondition()
    private var value: Value?
    private var waiters: [CheckedContinuation<Int32, Never>] = []

    var current: Value? { condition.withLock { value } }

    /// Runs `body` unless the child has been reaped (the reaper takes the lock to record it).
    func whileRunning(_ body: () -> Void) {
        condition.withLock { if value == nil { body() } }
    }

    func finish(_ ended: Value) {
        let resumed = condition.withLock {
            value = ended
            condition.broadcast()
            defer { waiters.removeAll() }
            return waiters
        }
        for waiter in resumed { waiter.resume(returning: ended.status) }
    }

    func wait(within timeout: Duration?) -> Int32? {
        let deadline = timeout.map { Date().addingTimeInterval($0.timeInterval) }
        condition.lock()
        defer { condition.unlock() }
        while value == nil {
            if let deadline {
                if !condition.wait(until: deadline) { break }
            } else {
                condition.wait()
            }
        }
        return value?.status
    }

    func value() async -> Int32 {
        await withCheckedContinuation { continuation in
            condition.lock()
            if let value {
                condition.unlock()
                continuation.resume(returning: value.status)
            } else {
                waiters.append(continuation)
                condition.unlock()
            }
        }
    }
}
