import CTestSupport
import Foundation

/// Where the repository's fixtures live, wherever it is cloned.
public let fixturesDirectory: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("fixtures")

public struct TestSetupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A loopback port nothing listens on, from the kernel (bind to port 0).
public func freeLoopbackPort() throws -> Int {
    let port = test_support_free_loopback_port()
    guard port > 0 else { throw TestSetupError("no free port: errno \(-port)") }
    return Int(port)
}

/// Checks `condition` every `pause` until it holds or `timeout` has passed;
/// whether it held. For what sends no event to wait on (a fake's call log,
/// what a child wrote to stderr); a deadline, never a timed assertion.
public func poll(
    within timeout: Duration = .seconds(10), every pause: Duration = .milliseconds(10),
    until condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return true }
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: pause)
    }
}

extension Duration {
    /// As Foundation's seconds.
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// Runs blocking work (starting a child and reading its first line, waiting
/// for a child's end) on a thread of its own. Swift Concurrency has as many
/// pool threads as cores, two here: tests that block them stall every other
/// test's awaits, and their deadlines pass while nothing ran (seen under
/// ThreadSanitizer, where each start is slow).
@discardableResult
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// Finishes `continuation`'s stream once `timeout` has passed, so that a wait
/// for its next element ends (with nil) instead of waiting for ever. Cancel
/// the task the returned handle holds when the wait is over.
public func finishing<Element>(
    _ continuation: AsyncStream<Element>.Continuation, after timeout: Duration
) -> Task<Void, Never> {
    Task {
        guard (try? await Task.sleep(for: timeout)) != nil else { return }
        continuation.finish()
    }
}
