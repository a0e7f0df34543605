import Glibc
import Synchronization

/// Work posted to a loop from any thread. A pthread mutex rather than
/// Synchronization.Mutex: ThreadSanitizer cannot see Mutex's futex, and
/// reported every hand-over through it as a race.
final class EventLoopInbox: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var queue: [@Sendable () -> Void] = []
    /// Set with each post: the loop looks here at every wake-up (each
    /// notification) and takes the lock only when there is work.
    private let hasWork = Atomic<Bool>(false)

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func post(_ work: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        queue.append(work)
        hasWork.store(true, ordering: .releasing)
        pthread_mutex_unlock(mutex)
    }

    /// Everything posted so far, in order; the inbox is empty afterwards.
    func takeAll() -> [@Sendable () -> Void] {
        // A post after this look wakes the loop, which then looks again.
        guard hasWork.load(ordering: .acquiring) else { return [] }
        pthread_mutex_lock(mutex)
        hasWork.store(false, ordering: .releasing)
        defer { pthread_mutex_unlock(mutex) }
        let work = queue
        queue.removeAll()
        return work
    }
}
