import Loop
import Synchronization

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
    let once = Once()
    let called = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        loop.execute {
            loop.schedule(after: .seconds(5)) { if once.first() { continuation.resume(returning: false) } }
            body { if once.first() { continuation.resume(returning: true) } }
        }
    }
    // The resume alone orders nothing for ThreadSanitizer when it lands before
    // the task suspends; this acquire pairs with first()'s release.
    once.settle()
    return called
}

/// True the first time only.
final class Once: Sendable {
    private let done = Atomic<Bool>(false)
    func first() -> Bool { !done.exchange(true, ordering: .acquiringAndReleasing) }
    func settle() { _ = done.load(ordering: .acquiring) }
}
