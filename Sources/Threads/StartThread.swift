import Glibc

/// Runs `body` on a new POSIX thread and returns its handle, for the caller
/// to join or detach. Not Foundation's Thread: birdctl links no Foundation.
public func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var handle = pthread_t()
    let result = pthread_create(&handle, nil, { context in
        Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().body()
        return nil
    }, context)
    precondition(result == 0, "pthread_create failed: \(result)")
    return handle
}

/// The closure handed through pthread_create's one pointer of context.
private final class ThreadBody {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
