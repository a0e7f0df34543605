import BlueZ
import DBus
import Loop

// Tests await replies; birdctl itself never does (its commands run on the
// event loop's callbacks), so these live here and birdctl links no Swift
// Concurrency runtime.

extension Connection {
    /// Sends a method call and waits for its reply.
    public func call(_ message: Message, timeout: Duration = .seconds(25)) async throws(DBusError) -> Message {
        let result = await withCheckedContinuation { continuation in
            call(message, timeout: timeout) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Builds and calls in one step, checking the reply is a method return.
    public func call(
        destination: String, path: ObjectPath, interface: String, member: String,
        arguments: [DBusValue] = [], timeout: Duration = .seconds(25)
    ) async throws(DBusError) -> [DBusValue] {
        let message = try Message.methodCall(
            destination: destination, path: path, interface: interface, member: member, arguments: arguments)
        return try await call(message, timeout: timeout).arguments()
    }
}

extension BlueZClient {
    /// Performs a request and waits for its outcome.
    public func perform<Output>(_ request: BlueZRequest<Output>) async throws(BlueZError) -> Output {
        let result = await withCheckedContinuation { continuation in
            perform(request) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// The tree as it is now, from any thread.
    public func snapshot() async -> ObjectTree {
        await withCheckedContinuation { continuation in
            connection.loop.execute { [self] in continuation.resume(returning: tree) }
        }
    }
}

extension EventLoop {
    /// Runs `body` on the loop and waits for it: its value, or its error thrown here.
    @discardableResult
    public func runAndWait<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            execute {
                do {
                    continuation.resume(returning: try body())
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
