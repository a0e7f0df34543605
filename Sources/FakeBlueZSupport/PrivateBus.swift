import DBus
import Foundation
import TestProcesses

/// A `dbus-daemon` of our own with the system-bus role, for one test.
public final class PrivateBus: @unchecked Sendable {
    public let address: String
    private let process: ChildProcess

    /// `config`: a bus configuration in fixtures/.
    public init(config: String = "test-bus.conf") throws {
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
