import Loop

extension EventLoop {
    /// A loop running on a thread of its own, as a connection's does.
    static func started() -> EventLoop {
        let loop = EventLoop()
        loop.start()
        return loop
    }
}

/// Calls `body` on the loop and waits for `ready` to be called there; false
/// if it was not within 5 s.
func onLoop(_ loop: EventLoop, _ body: @escaping @Sendable (_ ready: @escaping @Sendable () -> Void) -> Void) async -> Bool {
    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let once = Once()
        loop.execute {
            loop.schedule(after: .seconds(5)) { if once.first() { continuation.resume(returning: false) } }
            body { if once.first() { continuation.resume(returning: true) } }
        }
    }
}

/// True the first time only.
final class Once: @unchecked Sendable {
    private var done = false
    func first() -> Bool {
        defer { done = true }
        return !done
    }
}
