import CDBus
import Glibc
import Synchronization

/// One thread that blocks in `epoll_wait(2)` on file descriptors and timers and runs
/// everything that touches a connection. Work from other threads is posted to
/// it and wakes it through an eventfd, so an idle loop uses no CPU at all.
///
/// Everything but `execute`, `stop` and `isInLoop` must be called on the loop.
public final class EventLoop: @unchecked Sendable {
    public struct TimerID: Hashable, Sendable { let raw: UInt64 }

    /// A file descriptor the loop watches while `isEnabled` is true (poll's
    /// event bits, which epoll shares).
    final class IOWatch {
        let fd: Int32
        let events: Int16
        fileprivate(set) var isEnabled: Bool
        let handler: (_ revents: Int16) -> Void
        init(fd: Int32, events: Int16, isEnabled: Bool = true, handler: @escaping (Int16) -> Void) {
            self.fd = fd
            self.events = events
            self.isEnabled = isEnabled
            self.handler = handler
        }
    }

    private struct Timer {
        var deadline: MonotonicInstant
        var handler: () -> Void
    }

    private let wakeFD: Int32
    private let inbox = EventLoopInbox()
    private let loopThread = Atomic<UInt>(0)
    private let stopRequested = Atomic<Bool>(false)
    private let hasEnded = Atomic<Bool>(false)
    private var threadHandle: pthread_t?

    // Loop-confined state.
    private var watches: [IOWatch] = []
    private let epoll = EpollSet()
    /// The set of watches or one's enabling changed since epoll was told.
    private var watchesChanged = true
    private var timers: [UInt64: Timer] = [:]
    private var nextTimerID: UInt64 = 1
    /// Run before every wait, in the order added: the connection dispatches
    /// queued messages, then e.g. an output buffer is flushed once per batch.
    private var beforePollHooks: [() -> Void] = []

    init() {
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(wakeFD >= 0, "eventfd failed: errno \(errno)")
    }

    deinit { close(wakeFD) }

    /// True on the loop's own thread.
    public var isInLoop: Bool { pthread_self() == loopThread.load(ordering: .acquiring) }

    /// Runs `work` on the loop: at once if already there, else soon after.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        // After the loop has ended there is no thread to hand over to; the
        // work then finds its connection closed and fails at once.
        if isInLoop || hasEnded.load(ordering: .acquiring) {
            work()
            return
        }
        inbox.post(work)
        wakeUp()
    }

    func wakeUp() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: Timers (loop only)

    /// Calls `handler` on the loop once, after `delay`.
    @discardableResult
    public func schedule(after delay: Duration, _ handler: @escaping () -> Void) -> TimerID {
        let id = nextTimerID
        nextTimerID += 1
        timers[id] = Timer(deadline: .now + delay, handler: handler)
        return TimerID(raw: id)
    }

    public func cancel(_ timer: TimerID) {
        timers[timer.raw] = nil
    }

    /// Adds work to run before each wait, after pending messages are dispatched (loop only).
    public func addBeforePollHook(_ hook: @escaping () -> Void) {
        beforePollHooks.append(hook)
    }

    // MARK: Watches (loop only, or before the thread starts)

    func addWatch(_ watch: IOWatch) {
        epoll.forget(watch.fd)
        watches.append(watch)
        watchesChanged = true
    }

    func removeWatch(_ watch: IOWatch) {
        watches.removeAll { $0 === watch }
        epoll.forget(watch.fd)
        watchesChanged = true
    }

    func setEnabled(_ watch: IOWatch, _ enabled: Bool) {
        guard watch.isEnabled != enabled else { return }
        watch.isEnabled = enabled
        watchesChanged = true
    }

    /// Calls `handler` on the loop whenever `fd` is readable, until `removeWatch`.
    @discardableResult
    public func watchReadable(_ fd: Int32, _ handler: @escaping () -> Void) -> AnyObject {
        watchReadable(fd, revents: { _ in handler() })
    }

    /// Like `watchReadable`, with the ready events (POLLHUP: the other end closed).
    @discardableResult
    public func watchReadable(_ fd: Int32, revents handler: @escaping (Int16) -> Void) -> AnyObject {
        let watch = IOWatch(fd: fd, events: Int16(POLLIN), handler: handler)
        addWatch(watch)
        return watch
    }

    public func unwatch(_ token: AnyObject) {
        if let watch = token as? IOWatch { removeWatch(watch) }
    }

    // MARK: Running

    /// Starts the loop on a new thread.
    func start() {
        let context = Unmanaged.passRetained(self).toOpaque()
        var handle = pthread_t()
        let result = pthread_create(&handle, nil, { context in
            let loop = Unmanaged<EventLoop>.fromOpaque(context!).takeRetainedValue()
            loop.run()
            return nil
        }, context)
        precondition(result == 0, "pthread_create failed: \(result)")
        threadHandle = handle
        loopThread.store(UInt(handle), ordering: .releasing)
    }

    /// Asks the loop to finish its current iteration and end; waits for it
    /// unless called from the loop itself.
    func stop() {
        stopRequested.store(true, ordering: .releasing)
        wakeUp()
        if !isInLoop, let handle = threadHandle {
            pthread_join(handle, nil)
            threadHandle = nil
            runInbox()
        } else if let handle = threadHandle {
            pthread_detach(handle)
            threadHandle = nil
        }
    }

    /// CPU time the loop thread has used (for checking that idle means idle).
    func threadCPUTime() -> Duration {
        guard let handle = threadHandle else { return .zero }
        var clock = clockid_t()
        guard pthread_getcpuclockid(handle, &clock) == 0 else { return .zero }
        var time = timespec()
        clock_gettime(clock, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }

    private func run() {
        loopThread.store(UInt(pthread_self()), ordering: .releasing)
        var watched: [IOWatch] = []
        var ready: [(fd: Int32, events: Int16)] = []
        while !stopRequested.load(ordering: .acquiring) {
            runInbox()
            for hook in beforePollHooks { hook() }

            // The enabled watches, as epoll is told them: rebuilt only when they
            // change, not at every wake-up (one per notification when streaming).
            if watchesChanged {
                watchesChanged = false
                epoll.update(interest())
                watched.removeAll(keepingCapacity: true)
                for watch in watches where watch.isEnabled { watched.append(watch) }
            }
            ready.removeAll(keepingCapacity: true)
            epoll.wait(timeout: waitTimeoutMilliseconds()) { ready.append(($0, $1)) }

            for (fd, _) in ready where fd == wakeFD {
                var count: UInt64 = 0
                _ = read(wakeFD, &count, 8)
            }
            for watch in watched {
                // Two watches may share a descriptor (libdbus: reading and writing).
                var revents: Int16 = 0
                for (fd, events) in ready where fd == watch.fd { revents |= events }
                revents &= watch.events | Int16(POLLERR | POLLHUP)
                // A watch removed by an earlier handler in this round is skipped.
                if revents != 0, watch.isEnabled, watches.contains(where: { $0 === watch }) {
                    watch.handler(revents)
                }
            }
            fireDueTimers()
        }
        hasEnded.store(true, ordering: .releasing)
        runInbox()
        // Drop the handlers: they may hold the objects that own this loop.
        timers.removeAll()
        watches.removeAll()
        beforePollHooks.removeAll()
    }

    /// What epoll is to watch: the wake-up eventfd, and each descriptor with
    /// the events of its enabled watches.
    private func interest() -> [Int32: UInt32] {
        var wanted: [Int32: UInt32] = [wakeFD: UInt32(POLLIN)]
        for watch in watches where watch.isEnabled {
            wanted[watch.fd, default: 0] |= UInt32(UInt16(bitPattern: watch.events))
        }
        return wanted
    }

    private func runInbox() {
        for item in inbox.takeAll() { item() }
    }

    private func waitTimeoutMilliseconds() -> Int32 {
        // No timer (a watch streaming): iterating even an empty dictionary cost ~350 instructions a wake-up.
        if timers.isEmpty { return -1 }
        // A plain loop: this runs at every wake-up (a key path per timer cost more).
        var soonest: MonotonicInstant?
        for timer in timers.values where soonest.map({ timer.deadline < $0 }) ?? true { soonest = timer.deadline }
        guard let earliest = soonest else { return -1 }
        let remaining = MonotonicInstant.now.duration(to: earliest)
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        // Round up so a timer never fires early and the loop does not spin.
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: milliseconds)
    }

    private func fireDueTimers() {
        guard !timers.isEmpty else { return }
        let now = MonotonicInstant.now
        // Most wake-ups are for a message, with no timer due: nothing built then.
        guard timers.values.contains(where: { $0.deadline <= now }) else { return }
        let due = timers.filter { $0.value.deadline <= now }.sorted { $0.value.deadline < $1.value.deadline }
        for (id, timer) in due where timers[id] != nil {
            timers[id] = nil
            timer.handler()
        }
    }
}
