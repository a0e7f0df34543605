import Synchronization
import Threads

/// Work posted to a loop from any thread.
final class EventLoopInbox: Sendable {
    private let queue = Locked<[@Sendable () -> Void]>([])
    /// Set with each post: the loop looks here at every wake-up (each
    /// notification) and takes the lock only when there is work.
    private let hasWork = Atomic<Bool>(false)

    func post(_ work: @escaping @Sendable () -> Void) {
        queue.withLock { queue in
            queue.append(work)
            hasWork.store(true, ordering: .releasing)
        }
    }

    /// Everything posted so far, in order; the inbox is empty afterwards.
    func takeAll() -> [@Sendable () -> Void] {
        // A post after this look wakes the loop, which then looks again.
        guard hasWork.load(ordering: .acquiring) else { return [] }
        return queue.withLock { queue in
            hasWork.store(false, ordering: .releasing)
            defer { queue.removeAll() }
            return queue
        }
    }
}
