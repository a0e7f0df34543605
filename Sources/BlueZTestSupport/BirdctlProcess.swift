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

    private let process = Process()
    private let stdoutPipe = Pipe()
    private let stderrPipe = Pipe()
    private let lock = NSLock()
    private var pending = Data()
    private var stderrData = Data()
    private var stdoutClosed = false
    private let lines: AsyncStream<String>
    private let linesContinuation: AsyncStream<String>.Continuation
    private var iterator: AsyncStream<String>.Iterator
    private let exited: AsyncStream<Int32>
    private let exitedContinuation: AsyncStream<Int32>.Continuation

    private let stdinPipe: Pipe?

    /// `withStdin`: keep a pipe to birdctl's stdin for `send` (else /dev/null).
    public init(_ arguments: [String], environment: [String: String], withStdin: Bool = false) throws {
        stdinPipe = withStdin ? Pipe() : nil
        (lines, linesContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        iterator = lines.makeAsyncIterator()
        (exited, exitedContinuation) = AsyncStream.makeStream()
        process.executableURL = Self.executable
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        merged.merge(environment) { $1 }
        merged["NO_COLOR"] = "1"
        process.environment = merged
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        process.standardInput = stdinPipe ?? FileHandle.nullDevice
        stdoutPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            self?.received(handle.availableData)
        }
        stderrPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            self?.receivedError(handle.availableData)
        }
        process.terminationHandler = { [exitedContinuation] process in
            exitedContinuation.yield(process.terminationStatus)
            exitedContinuation.finish()
        }
        try process.run()
    }

    /// Runs birdctl to completion (killing it after `timeout`).
    public static func run(
        _ arguments: [String], environment: [String: String], timeout: Duration = .seconds(30)
    ) async throws -> Finished {
        let process = try BirdctlProcess(arguments, environment: environment)
        return try await process.finish(within: timeout)
    }

    private func received(_ data: Data) {
        guard !data.isEmpty else {
            lock.withLock {
                if !pending.isEmpty { linesContinuation.yield(String(decoding: pending, as: UTF8.self)) }
                pending.removeAll()
            }
            linesContinuation.finish()
            return
        }
        lock.withLock {
            pending.append(data)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                linesContinuation.yield(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                pending.removeSubrange(pending.startIndex...newline)
            }
        }
    }

    private func receivedError(_ data: Data) {
        lock.withLock { stderrData.append(data) }
    }

    /// After the exit: takes what is left in both pipes (EOF callbacks are not
    /// reliable for a process that exits at once) and ends the line stream.
    private func drain() {
        stdoutPipe.fileHandleForReading.readabilityHandler = nil
        stderrPipe.fileHandleForReading.readabilityHandler = nil
        let closed = lock.withLock { stdoutClosed }
        if !closed, let rest = try? stdoutPipe.fileHandleForReading.readToEnd() { received(rest) }
        received(Data())
        if let rest = try? stderrPipe.fileHandleForReading.readToEnd() { receivedError(rest) }
    }

    /// What birdctl has written to stderr so far.
    public var stderr: String { lock.withLock { String(decoding: stderrData, as: UTF8.self) } }

    /// The next stdout line; nil at end of output. Throws after `timeout`.
    public func nextLine(within timeout: Duration = .seconds(10)) async throws -> String? {
        let watchdog = Task { [self] in
            try await Task.sleep(for: timeout)
            lock.withLock { timedOut = true }
            linesContinuation.finish()
        }
        defer { watchdog.cancel() }
        if let line = await iterator.next() { return line }
        if lock.withLock({ timedOut }) {
            throw TestSetupError("no line from birdctl within \(timeout); stderr:\n\(stderr)")
        }
        return nil
    }
    private var timedOut = false

    /// Writes a line to birdctl's stdin.
    public func send(_ line: String) {
        stdinPipe?.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Sends a signal (SIGINT for Ctrl-C).
    public func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Closes our end of stdout, as `head -1` does after its line.
    public func closeStdout() {
        lock.withLock { stdoutClosed = true }
        stdoutPipe.fileHandleForReading.readabilityHandler = nil
        try? stdoutPipe.fileHandleForReading.close()
        linesContinuation.finish()
    }

    /// Waits for the exit; kills birdctl and throws if it takes longer than `timeout`.
    public func waitForExit(within timeout: Duration = .seconds(30)) async throws -> Int32 {
        let watchdog = Task { [self] in
            try await Task.sleep(for: timeout)
            lock.withLock { timedOut = true }
            kill(process.processIdentifier, SIGKILL)
        }
        defer { watchdog.cancel() }
        var statuses = exited.makeAsyncIterator()
        guard let status = await statuses.next() else { throw TestSetupError("birdctl exit not seen") }
        if lock.withLock({ timedOut }) {
            throw TestSetupError("birdctl did not exit within \(timeout); stderr:\n\(stderr)")
        }
        drain()
        return status
    }

    /// Waits for the exit and everything birdctl printed.
    public func finish(within timeout: Duration = .seconds(30)) async throws -> Finished {
        let status = try await waitForExit(within: timeout)
        var rest: [String] = []
        while let line = await iterator.next() { rest.append(line) }
        return Finished(status: status, stdout: rest, stderr: stderr)
    }
}
