import CLoop
import Glibc

/// The event loop's descriptors in one epoll set, registered when they
/// change rather than handed to the kernel at every wake-up as poll(2) does:
/// with a wake-up per notification, poll's setting up and tearing down of a
/// wait on every descriptor was most of the loop's kernel time.
/// Level-triggered, like poll, and with poll's event bits (EPOLLIN is
/// POLLIN, EPOLLHUP is POLLHUP…). Loop-confined.
final class EpollSet {
    private let fd: Int32
    /// What epoll holds, per descriptor.
    private var registered: [Int32: UInt32] = [:]
    /// Descriptors epoll refuses (a regular file, /dev/null as stdin): poll
    /// calls them always ready, and so does this.
    private var alwaysReady: [Int32: UInt32] = [:]
    private var events = [epoll_event](repeating: epoll_event(), count: 16)

    init() {
        fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(fd >= 0, "epoll_create1 failed: errno \(errno)")
    }

    deinit { close(fd) }

    /// Makes the set hold exactly `wanted` (descriptor → poll events).
    func update(_ wanted: [Int32: UInt32]) {
        for descriptor in registered.keys where wanted[descriptor] == nil { forget(descriptor) }
        for descriptor in alwaysReady.keys where wanted[descriptor] == nil { alwaysReady[descriptor] = nil }
        for (descriptor, events) in wanted where registered[descriptor] != events && alwaysReady[descriptor] != events {
            register(descriptor, events)
        }
    }

    /// Drops what the set holds for a descriptor: one added or removed may
    /// reuse the number of one closed meanwhile, which the kernel took out of
    /// the set by itself. The next `update` registers it again if wanted.
    func forget(_ descriptor: Int32) {
        _ = epoll_ctl(fd, EPOLL_CTL_DEL, descriptor, nil)
        registered[descriptor] = nil
        alwaysReady[descriptor] = nil
    }

    private func register(_ descriptor: Int32, _ wanted: UInt32) {
        var event = epoll_event()
        event.events = wanted
        event.data.fd = descriptor
        var result = epoll_ctl(fd, registered[descriptor] == nil ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, descriptor, &event)
        if result < 0 && errno == EEXIST {
            result = epoll_ctl(fd, EPOLL_CTL_MOD, descriptor, &event)
        } else if result < 0 && errno == ENOENT {
            result = epoll_ctl(fd, EPOLL_CTL_ADD, descriptor, &event)
        }
        if result == 0 {
            registered[descriptor] = wanted
        } else if errno == EPERM {
            registered[descriptor] = nil
            alwaysReady[descriptor] = wanted
        }
        // EBADF: closed already, and its watch about to be removed.
    }

    /// Waits up to `timeout` ms (-1: without limit) and calls `ready` with
    /// each ready descriptor and its events, once per descriptor. `ready`
    /// may add and remove descriptors (not `update`).
    func wait(timeout: Int32, _ ready: (Int32, Int16) -> Void) {
        let count = epoll_wait(fd, &events, Int32(events.count), alwaysReady.isEmpty ? timeout : 0)
        if count < 0 && errno != EINTR { fatalError("epoll_wait failed: errno \(errno)") }
        for index in 0..<max(0, Int(count)) {
            ready(events[index].data.fd, Int16(truncatingIfNeeded: events[index].events))
        }
        // Iterating even an empty dictionary costs: this runs at every wake-up.
        if alwaysReady.isEmpty { return }
        for (descriptor, events) in alwaysReady { ready(descriptor, Int16(truncatingIfNeeded: events)) }
    }
}
