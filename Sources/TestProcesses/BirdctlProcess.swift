import Foundation
import Glibc

/// The built `birdctl` binary run against a fake BlueZ, its stdout read line
/// by line as it comes, its stderr kept, its exit awaited.
public final class BirdctlProcess: @unchecked Sendable {
    /// `birdctl` sits next to the test bundle in the build directory.
    public static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("birdctl")
    }

    public struct Finished: Sendable {
        public var status: Int32
        public var stdout: [String]
        public var stderr: String
    }

    private let process: ChildProcess
    /// birdctl's private memory now (RssAnon + RssShmem from /proc), in KiB.
    public var privateMemoryKiB: Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").reduce(0) { total, line in
            guard line.hasPrefix("RssAnon:") || line.hasPrefix("RssShmem:") else { return total }
            return total + (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0)
        }
    }
    private let lock = NSLock()
    private var pending = Data()
    private var stderrData = Data()
    /// stdout's lines not yet taken (from `taken` on), whether stdout has
    /// ended, and the one `nextLine` waiting for a line, if any.
    private var queued: [String] = []
    private var taken = 0
    private var ended = false
    private var waiting: (id: Int, continuation: CheckedContinuation<LineOutcome, Never>)?
    private var waits = 0
    private enum LineOutcome { case line(String), end, timedOut }

    private var closeAfterLines: Int?
    /// When it was started, and how long a test may go on reading it.
    private let started = ContinuousClock.now
    private let readableFor: Duration
    private var stdoutDone = false
    private var stderrDone = false
    private let readersDone = NSCondition()

    /// `withStdin`: keep a pipe to birdctl's stdin for `send` (else /dev/null).
    /// `closeAfterLines`: close our end of stdout after that many lines, as
    /// `| head -N` does (the reader thread closes it, so nothing else races it).
    /// `asUser`: run as this user and group (and no other group), through
    /// setpriv; the tests run as root. `executable`: another program read
    /// the same way (a `mosquitto_sub`). `readableFor`: how long after its
    /// start `nextLine` may still wait; past it every wait fails. Each wait
    /// has its own deadline, but a test looping until some line comes, while
    /// other lines keep coming, would otherwise wait for ever (a watch
    /// streams for as long as it runs); the default leaves room for the
    /// longest test under AddressSanitizer.
    public init(
        _ arguments: [String], environment: [String: String], withStdin: Bool = false, closeAfterLines: Int? = nil,
        asUser user: (name: String, group: String)? = nil, executable: URL = BirdctlProcess.executable,
        readableFor: Duration = .seconds(600)
    ) throws {
        self.closeAfterLines = closeAfterLines
        self.readableFor = readableFor
        var environment = environment
        environment["NO_COLOR"] = "1"
        if let user {
            process = try ChildProcess(
                "/usr/bin/setpriv",
                ["--reuid=\(user.name)", "--regid=\(user.group)", "--clear-groups", "--", executable.path] + arguments,
                environment: environment, stdin: withStdin ? .pipe : .null, stdout: .pipe, stderr: .pipe)
        } else {
            process = try ChildProcess(
                executable.path, arguments, environment: environment, stdin: withStdin ? .pipe : .null,
                stdout: .pipe, stderr: .pipe)
        }
        // Blocking reads on threads of their own: FileHandle's readability
        // handlers (dispatch sources) were seen to crash libdispatch under load
        // when many pipes open and close.
        Thread.detachNewThread { [self] in readStdout() }
        Thread.detachNewThread { [self] in readStderr() }
    }

    private func readStdout() {
        guard let handle = process.stdout else { return }
        var lines = 0
        while true {
            let data = handle.nextChunk()
            if data.isEmpty { break }
            lines += received(data)
            if let limit = closeAfterLines, lines >= limit { break }
        }
        // Closed here, as soon as the reader is done, so descriptors do not
        // pile up while the test goes on.
        try? handle.close()
        received(Data())
        finishedReading(stdout: true)
    }

    private func readStderr() {
        guard let handle = process.stderr else { return }
        while true {
            let data = handle.nextChunk()
            if data.isEmpty { break }
            receivedError(data)
        }
        try? handle.close()
        finishedReading(stdout: false)
    }

    private func finishedReading(stdout: Bool) {
        readersDone.lock()
        if stdout { stdoutDone = true } else { stderrDone = true }
        readersDone.broadcast()
        readersDone.unlock()
    }

    /// Runs birdctl to completion (killing it after `timeout`).
    public static func run(
        _ arguments: [String], environment: [String: String], timeout: Duration = .seconds(30),
        asUser user: (name: String, group: String)? = nil
    ) async throws -> Finished {
        let process = try BirdctlProcess(arguments, environment: environment, asUser: user)
        return try await process.finish(within: timeout)
    }

    @discardableResult
    private func received(_ data: Data) -> Int {
        guard !data.isEmpty else {
            lock.withLock {
                if !pending.isEmpty { queued.append(String(decoding: pending, as: UTF8.self)) }
                pending.removeAll()
                ended = true
                handOver()
            }
            return 0
        }
        return lock.withLock {
            var count = 0
            pending.append(data)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                queued.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                pending.removeSubrange(pending.startIndex...newline)
                count += 1
            }
            handOver()
            return count
        }
    }

    /// The oldest line not yet taken (under the lock).
    private func takeLine() -> String? {
        guard taken < queued.count else { return nil }
        defer {
            taken += 1
            if taken == queued.count { queued.removeAll(keepingCapacity: true); taken = 0 }
        }
        return queued[taken]
    }

    /// Gives the waiting `nextLine` a line, or the end (under the lock).
    private func handOver() {
        guard let waiter = waiting else { return }
        if let line = takeLine() {
            waiting = nil
            waiter.continuation.resume(returning: .line(line))
        } else if ended {
            waiting = nil
            waiter.continuation.resume(returning: .end)
        }
    }

    private func receivedError(_ data: Data) {
        lock.withLock { stderrData.append(data) }
    }

    /// After the exit: waits (briefly) until both readers reached EOF, so
    /// the caller sees everything birdctl wrote.
    private func drain() {
        readersDone.lock()
        let deadline = Date().addingTimeInterval(5)
        while !(stdoutDone && stderrDone) && readersDone.wait(until: deadline) {}
        readersDone.unlock()
    }

    /// What birdctl has written to stderr so far.
    public var stderr: String { lock.withLock { String(decoding: stderrData, as: UTF8.self) } }

    /// Whether stderr comes to contain `text` within `timeout`. stderr is read
    /// apart from stdout, so a stdout line does not mean what birdctl wrote
    /// to stderr before it has arrived yet.
    public func stderr(contains text: String, within timeout: Duration = .seconds(10)) async -> Bool {
        await poll(within: timeout) { stderr.contains(text) }
    }

    /// The next stdout line; nil at end of output. Throws after `timeout`.
    /// A line that came before the deadline is returned even if the test
    /// process only gets to run after it (the deadline is the line's, not the
    /// test thread's: a stalled test process must not turn lines into timeouts).
    public func nextLine(within timeout: Duration = .seconds(10)) async throws -> String? {
        let left = started + readableFor - ContinuousClock.now
        guard left > .zero else {
            throw TestSetupError("still waiting for birdctl's lines \(readableFor) after its start: a wait that never ends; stderr:\n\(stderr)")
        }
        let timeout = min(timeout, left)
        var timer: Task<Void, Never>?
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<LineOutcome, Never>) in
            let id: Int? = lock.withLock {
                precondition(waiting == nil, "one nextLine at a time: a second would leave the first waiting for ever")
                waits += 1
                waiting = (waits, continuation)
                handOver()
                return waiting == nil ? nil : waits
            }
            guard let id else { return }
            timer = Task { [self] in
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                lock.withLock {
                    guard let waiter = waiting, waiter.id == id else { return }
                    waiting = nil
                    waiter.continuation.resume(returning: .timedOut)
                }
            }
        }
        timer?.cancel()
        switch outcome {
        case .line(let line): return line
        case .end: return nil
        case .timedOut: throw TestSetupError("no line from birdctl within \(timeout); stderr:\n\(stderr)")
        }
    }

    /// Writes a line to birdctl's stdin.
    /// Skips lines until one contains `text`.
    public func line(containing text: String, within timeout: Duration = .seconds(10)) async throws -> String {
        while let line = try await nextLine(within: timeout) {
            if line.contains(text) { return line }
        }
        throw TestSetupError("birdctl's output ended before a line with '\(text)'; stderr:\n\(stderr)")
    }

    public func send(_ line: String) {
        process.stdin?.write(Data((line + "\n").utf8))
    }

    /// Sends a signal (SIGINT for Ctrl-C).
    public func signal(_ signal: Int32) {
        process.signal(signal)
    }

    /// Waits for the exit; kills birdctl and throws if it takes longer than `timeout`.
    /// An exit the reaper saw before the deadline counts, however late the
    /// test process gets to run.
    public func waitForExit(within timeout: Duration = .seconds(30)) async throws -> Int32 {
        guard let status = await process.exited(within: timeout) else {
            throw TestSetupError("birdctl did not exit within \(timeout); stderr:\n\(stderr)")
        }
        _ = try? await offThePool { [self] in drain() }
        try? process.stdin?.close()
        return status
    }

    /// Waits for the exit and everything birdctl printed.
    public func finish(within timeout: Duration = .seconds(30)) async throws -> Finished {
        let status = try await waitForExit(within: timeout)
        var rest: [String] = []
        while let line = lock.withLock({ takeLine() }) { rest.append(line) }
        return Finished(status: status, stdout: rest, stderr: stderr)
    }
}
