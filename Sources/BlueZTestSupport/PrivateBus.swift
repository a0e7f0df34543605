import DBus
import Foundation

/// Where the repository's fixtures live, wherever it is cloned.
public let fixturesDirectory: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("fixtures")

public struct TestSetupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A `dbus-daemon` of our own with the system-bus role, for one test.
public final class PrivateBus: @unchecked Sendable {
    public let address: String
    private let process: Process

    /// `config`: a bus configuration in fixtures/.
    public init(config: String = "test-bus.conf") throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = [
            "--config-file=\(fixturesDirectory.appendingPathComponent(config).path)",
            "--nofork", "--nopidfile", "--print-address=1",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = readLine(from: output.fileHandleForReading)
        // It prints nothing more; closed now because Foundation's Process keeps its pipes.
        try? output.fileHandleForReading.close()
        guard let line, line.hasPrefix("unix:") else {
            process.terminate()
            throw TestSetupError("dbus-daemon did not print its address")
        }
        address = line
    }

    /// A client connection (our own D-Bus layer) to this bus.
    public func connect() throws -> Connection {
        try Connection.connect(address: address)
    }

    /// Ends the daemon. SIGKILL because children inherit the test process's
    /// blocked SIGTERM; no wait because Foundation's waitUntilExit hangs off
    /// the main thread (the exit is reaped in the background).
    public func stop() {
        kill(process.processIdentifier, SIGKILL)
    }

    deinit { stop() }
}

/// Reads one line from a pipe, blocking (used at start-up only).
func readLine(from handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    while true {
        let chunk = handle.nextChunk(upTo: 1)
        guard let byte = chunk.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}
