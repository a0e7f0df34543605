import FakeBlueZSupport
import TestProcesses
import DBus

// What several of this target's suites share: a pair of connections on a
// private bus, signals to await, calls run on a loop.

/// Two real connections on a private dbus-daemon: one exports an echo
/// method, the other sends values through the bus and compares what returns.
final class EchoPair: @unchecked Sendable {
    let bus: PrivateBus
    let server: Connection
    let client: Connection

    init() async throws {
        bus = try await PrivateBus.started()
        server = try bus.connect()
        client = try bus.connect()
        server.export("/echo", [
            ExportedInterface("org.birdctl.Test", methods: [
                "Echo": { call in call.arguments },
                "Fail": { _ throws(DBusError) in
                    throw DBusError("org.birdctl.Test.Error.Custom", "it went wrong: ünïcode")
                },
            ])
        ])
    }

    func echo(_ values: [DBusValue]) async throws -> [DBusValue] {
        try await client.call(
            destination: server.uniqueName, path: "/echo", interface: "org.birdctl.Test", member: "Echo",
            arguments: values)
    }

    deinit {
        client.close()
        server.close()
        bus.stop()
    }
}

/// Collects signals delivered on a connection's loop for a test to await.
final class SignalInbox: @unchecked Sendable {
    private let stream: AsyncStream<Message>
    private let continuation: AsyncStream<Message>.Continuation
    private var iterator: AsyncStream<Message>.Iterator

    init() {
        (stream, continuation) = AsyncStream.makeStream()
        iterator = stream.makeAsyncIterator()
    }

    var handler: Connection.SignalHandler { { [continuation] in continuation.yield($0) } }

    /// The next signal; nil if none came within `timeout` (the inbox is
    /// then finished: a test that waits for a signal fails, never hangs).
    func next(within timeout: Duration = .seconds(10)) async -> Message? {
        let deadline = finishing(continuation, after: timeout)
        defer { deadline.cancel() }
        return await iterator.next()
    }
}
