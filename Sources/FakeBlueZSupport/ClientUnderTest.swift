import BlueZ
import DBus
import TestProcesses

/// A BlueZClient on its own connection to a fake's bus, with its events
/// recorded for a test to wait on.
public final class ClientUnderTest: @unchecked Sendable {
    public let connection: Connection
    public let client: BlueZClient
    private let continuation: AsyncStream<BlueZEvent>.Continuation
    private var iterator: AsyncStream<BlueZEvent>.Iterator

    /// `focus`: load only the device at this address (`BlueZClient.focus`);
    /// `scope`, if given, says what to load instead.
    public init(_ fake: FakeBlueZ, focus: String? = nil, scope: BlueZClient.Scope? = nil, start: Bool = true) throws {
        connection = try fake.bus.connect()
        let (stream, continuation) = AsyncStream<BlueZEvent>.makeStream()
        self.continuation = continuation
        iterator = stream.makeAsyncIterator()
        let scope = scope ?? focus.map { .device(address: $0) } ?? .everything
        client = BlueZClient(connection: connection, scope: scope) { continuation.yield($0) }
        if start { client.start() }
    }

    deinit { connection.close() }

    /// The next event that satisfies `predicate`, skipping others; throws if
    /// none comes within `timeout` (the recorder is unusable afterwards).
    @discardableResult
    public func next(
        within timeout: Duration = .seconds(10), where predicate: (BlueZEvent) -> Bool = { _ in true }
    ) async throws -> BlueZEvent {
        let deadline = finishing(continuation, after: timeout)
        defer { deadline.cancel() }
        while let event = await iterator.next() {
            if predicate(event) { return event }
        }
        throw TestSetupError("no matching event within \(timeout)")
    }

    /// Waits for the tree to be loaded.
    public func ready() async throws {
        try await next { $0 == .ready }
    }

    public func perform<Output>(_ request: BlueZRequest<Output>) async throws(BlueZError) -> Output {
        try await client.perform(request)
    }
}
