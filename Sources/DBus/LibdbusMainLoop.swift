import CDBus
import Glibc
import Loop
import Synchronization

/// libdbus's main-loop integration on an `EventLoop`: its watches become
/// the loop's watched descriptors, its timeouts loop timers, and its wake-up requests wake
/// the loop. Loop-confined; owned by its `Connection`, which outlives it.
final class LibdbusMainLoop {
    private let raw: OpaquePointer
    private let loop: EventLoop
    private var watches: [OpaquePointer: EventLoop.IOWatch] = [:]
    /// Live libdbus timeouts, with the loop timer of the armed ones.
    private var timeouts: [OpaquePointer: EventLoop.TimerID?] = [:]

    init(raw: OpaquePointer, loop: EventLoop) {
        self.raw = raw
        self.loop = loop
    }

    /// Hands libdbus its callbacks. C function pointers capture nothing: each
    /// finds this object again through the context pointer (`from`).
    func install() {
        let context = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_set_watch_functions(
            raw,
            { watch, context in LibdbusMainLoop.from(context).add(watch!) },
            { watch, context in LibdbusMainLoop.from(context).remove(watch!) },
            { watch, context in LibdbusMainLoop.from(context).toggle(watch!) },
            context, nil)
        dbus_connection_set_timeout_functions(
            raw,
            { timeout, context in LibdbusMainLoop.from(context).arm(timeout!) },
            { timeout, context in LibdbusMainLoop.from(context).remove(timeout: timeout!) },
            { timeout, context in _ = LibdbusMainLoop.from(context).arm(timeout!) },
            context, nil)
        dbus_connection_set_wakeup_main_function(raw, { context in LibdbusMainLoop.from(context).wakeUp() }, context, nil)
        dbus_connection_set_dispatch_status_function(
            raw,
            { _, status, context in
                if status == DBUS_DISPATCH_DATA_REMAINS { LibdbusMainLoop.from(context).hasQueued.store(true, ordering: .releasing) }
            },
            context, nil)
    }

    /// Whether libdbus has queued messages since the last call; clears the
    /// mark. libdbus says when its dispatch status turns to "data remains",
    /// so a wake-up for something else (a notification on AcquireNotify's
    /// socket, a timer) does not take its lock to ask (see
    /// docs/performance.md, 'Wake-ups').
    func takeQueuedMark() -> Bool {
        // A plain load first: the exchange is a locked instruction, and most wake-ups find nothing.
        hasQueued.load(ordering: .relaxed) && hasQueued.exchange(false, ordering: .acquiringAndReleasing)
    }

    /// Starts true: messages may have been queued before `install`.
    private let hasQueued = Atomic<Bool>(true)

    /// libdbus asks for a wake-up when it has queued a message to send or to
    /// dispatch. On the loop's own thread there is nothing to wake: the loop
    /// dispatches and updates its epoll set (write watch included) before it
    /// sleeps again. Waking it anyway cost an eventfd write and read per
    /// notification.
    private func wakeUp() {
        if !loop.isInLoop { loop.wakeUp() }
    }

    private static func from(_ context: UnsafeMutableRawPointer?) -> LibdbusMainLoop {
        Unmanaged<LibdbusMainLoop>.fromOpaque(context!).takeUnretainedValue()
    }

    private func add(_ watch: OpaquePointer) -> dbus_bool_t {
        let flags = dbus_watch_get_flags(watch)
        var events: Int16 = 0
        if flags & DBUS_WATCH_READABLE.rawValue != 0 { events |= Int16(POLLIN) }
        if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { events |= Int16(POLLOUT) }
        let enabled = dbus_watch_get_enabled(watch) != 0
        let ioWatch = EventLoop.IOWatch(fd: dbus_watch_get_unix_fd(watch), events: events, isEnabled: enabled) { revents in
            var condition: UInt32 = 0
            if revents & Int16(POLLIN) != 0 { condition |= DBUS_WATCH_READABLE.rawValue }
            if revents & Int16(POLLOUT) != 0 { condition |= DBUS_WATCH_WRITABLE.rawValue }
            if revents & Int16(POLLERR) != 0 { condition |= DBUS_WATCH_ERROR.rawValue }
            if revents & Int16(POLLHUP) != 0 { condition |= DBUS_WATCH_HANGUP.rawValue }
            dbus_watch_handle(watch, condition)
        }
        watches[watch] = ioWatch
        loop.addWatch(ioWatch)
        return 1
    }

    private func remove(_ watch: OpaquePointer) {
        if let ioWatch = watches.removeValue(forKey: watch) { loop.removeWatch(ioWatch) }
    }

    private func toggle(_ watch: OpaquePointer) {
        if let ioWatch = watches[watch] { loop.setEnabled(ioWatch, dbus_watch_get_enabled(watch) != 0) }
    }

    /// (Re)arms a libdbus timeout as a loop timer while it is enabled.
    private func arm(_ timeout: OpaquePointer) -> dbus_bool_t {
        if let timer = timeouts[timeout] ?? nil { loop.cancel(timer) }
        timeouts[timeout] = .some(nil)
        guard dbus_timeout_get_enabled(timeout) != 0 else { return 1 }
        let interval = Duration.milliseconds(dbus_timeout_get_interval(timeout))
        timeouts[timeout] = loop.schedule(after: interval) { [unowned self] in
            timeouts[timeout] = .some(nil)
            dbus_timeout_handle(timeout)
            // libdbus timeouts repeat until removed (then the key is gone) or disabled.
            if case .some(.none) = timeouts[timeout], dbus_timeout_get_enabled(timeout) != 0 {
                _ = arm(timeout)
            }
        }
        return 1
    }

    private func remove(timeout: OpaquePointer) {
        if let timer = timeouts.removeValue(forKey: timeout) ?? nil { loop.cancel(timer) }
    }
}
