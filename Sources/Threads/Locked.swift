import Glibc

/// A value shared between threads behind a pthread mutex. Not
/// Synchronization.Mutex: ThreadSanitizer cannot see its futex and reports
/// every hand-over through it as a race.
public final class Locked<Value>: @unchecked Sendable {
    // A pthread mutex must not move: allocated, never stored inline in Swift.
    @usableFromInline let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    @usableFromInline var value: Value

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Inlinable: the MQTT publisher takes the lock for every reading, and
    /// called across the module boundary it ran unspecialized (see
    /// docs/performance.md, 'The MQTT gateway').
    @inlinable
    public func withLock<Result>(_ body: (inout Value) throws(Never) -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&value)
    }
}
