import Glibc
import Synchronization
import Testing
import Threads

@Suite("Locked and startThread")
struct LockedTests {
    /// Four threads add 50,000 each through the lock: none is lost. Without
    /// the lock the read-modify-writes race and lose some (and
    /// ThreadSanitizer, which `make sanitize` runs this under, reports it).
    @Test func updatesFromManyThreadsAreNotLost() {
        let total = Locked(0)
        let handles = (0..<4).map { _ in
            startThread {
                for _ in 0..<50_000 { total.withLock { $0 += 1 } }
            }
        }
        for handle in handles { pthread_join(handle, nil) }
        #expect(total.withLock { $0 } == 200_000)
    }

    /// The body runs once, on a thread of its own, which the caller joins.
    @Test func aStartedThreadRunsItsBodyElsewhereOnce() {
        let runs = Atomic<Int>(0)
        let here = pthread_self()
        let ranElsewhere = Atomic<Bool>(false)
        let handle = startThread {
            runs.add(1, ordering: .relaxed)
            ranElsewhere.store(pthread_equal(pthread_self(), here) == 0, ordering: .relaxed)
        }
        pthread_join(handle, nil)
        let count = runs.load(ordering: .relaxed), elsewhere = ranElsewhere.load(ordering: .relaxed)
        #expect(count == 1)
        #expect(elsewhere)
    }
}
