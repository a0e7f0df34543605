import Glibc

/// One thread waits until another opens the gate; once open it stays open.
/// What DispatchSemaphore did here, without libdispatch: birdctl uses no
/// queue, and linking it in only for this ran its start-up in every command.
public final class ThreadGate: @unchecked Sendable {
    // pthread objects must not move: allocated, never stored inline in Swift.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var opened = false  // guarded by mutex

    public init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func open() {
        pthread_mutex_lock(mutex)
        opened = true
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Whether `open` was called.
    public var isOpen: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return opened
    }

    public func wait() {
        pthread_mutex_lock(mutex)
        while !opened { pthread_cond_wait(condition, mutex) }
        pthread_mutex_unlock(mutex)
    }
}
