import Glibc

/// Work posted to a loop from any thread. A pthread mutex rather than
/// Synchronization.Mutex: ThreadSanitizer cannot see Mutex's futex, and
/// reported every hand-over through it as a race.
final class EventLoopInbox: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var queue: [@Sendable () -> Void] = []

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func post(_ work: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        queue.append(work)
        pthread_mutex_unlock(mutex)
    }

    /// Everything posted so far, in order; the inbox is empty afterwards.
    func takeAll() -> [@Sendable () -> Void] {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        let work = queue
        queue.removeAll()
        return work
    }
}
