import DBus
import Foundation
import TestProcesses

/// A `dbus-daemon` of our own with the system-bus role, for one test.
public final class PrivateBus: @unchecked Sendable {
    public let address: String
    private let process: ChildProcess

    /// Starts a daemon with `config` (a bus configuration in fixtures/) on a
    /// thread of its own: waiting for its address must not hold one of Swift
    /// Concurrency's pool threads (see `offThePool`).
    public static func started(config: String = "test-bus.conf") async throws -> PrivateBus {
        try await offThePool { try PrivateBus(config: config) }
    }

    private init(config: String) throws {
        process = try ChildProcess(
            "/usr/bin/dbus-daemon",
            [
                "--config-file=\(fixturesDirectory.appendingPathComponent(config).path)",
                "--nofork", "--nopidfile", "--print-address=1",
            ],
            stdout: .pipe)
        let line = process.stdout.flatMap { readLine(from: $0) }
        // It prints nothing more.
        try? process.stdout?.close()
        guard let line, line.hasPrefix("unix:") else {
            process.kill()
            throw TestSetupError("dbus-daemon did not print its address within 30 s")
        }
        address = line
    }

    /// A client connection (our own D-Bus layer) to this bus.
    public func connect() throws -> Connection {
        try Connection.connect(address: address)
    }

    /// Ends the daemon (its end is reaped in the background).
    public func stop() {
        process.kill()
    }

    deinit { stop() }
}
