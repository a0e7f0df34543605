import CMalloc
import DBus

/// Gives back to the kernel what a burst freed. glibc keeps freed memory in
/// its heap for reuse and returns only a free top of the heap by itself: after
/// a crowd of strangers has come and gone (BlueZ's device objects, their
/// machines), a long-running watch would hold the peak's pages for good
/// (`StrangerFloodTests`; the figures are in docs/performance.md, 'Memory
/// after a crowd of strangers'). Checked every ten seconds, trimmed only
/// when over a mebibyte lies free: an idle command wakes six times a minute
/// for a few microseconds.
enum FreedMemory {
    static let interval = Duration.seconds(10)
    static let worthReturning = 1 << 20

    /// From now on, on `loop`, every `interval`.
    static func returnPeriodically(on loop: EventLoop) {
        _ = loop.schedule(after: interval) {
            if mallinfo2().fordblks > worthReturning { malloc_trim(0) }
            returnPeriodically(on: loop)
        }
    }
}
