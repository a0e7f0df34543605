import CLoop
import Glibc
import Synchronization
import Threads

/// One thread that blocks in `epoll_wait(2)` on file descriptors and timers and runs
/// everything that touches a connection: a thread of its own (`start()`), or
/// the caller's (`runOnCurrentThread()`, birdctl's main thread). Work from
/// other threads is posted to it and wakes it through an eventfd, so an idle
/// loop uses no CPU at all.
///
/// Everything but `execute`, `stop` and `isInLoop` must be called on the loop
/// (in a debug build, `assertInLoop` checks it: LoopBound.swift).
public final class EventLoop: @unchecked Sendable {
    public struct TimerID: Hashable, Sendable { let raw: UInt64 }

    /// A file descriptor the loop watches while `isEnabled` is true (poll's
    /// event bits, which epoll shares). `package`: DBus maps libdbus's watches onto these.
    package final class IOWatch {
        let fd: Int32
        let events: Int16
        /// Reported only when the descriptor becomes ready again: for a
        /// handler that always reads until it would block (EAGAIN). Level-
        /// triggered, epoll looks at the descriptor once more at the next wait
        /// to find it drained — at every wake-up of a paced stream.
        let isEdgeTriggered: Bool
        package fileprivate(set) var isEnabled: Bool
        /// Between `addWatch` and `removeWatch`: a watch removed by a handler
        /// is not called later in the same round.
        fileprivate(set) var isWatched = false
        let handler: (_ revents: Int16) -> Void
        package init(
            fd: Int32, events: Int16, isEdgeTriggered: Bool = false, isEnabled: Bool = true,
            handler: @escaping (Int16) -> Void
        ) {
            self.fd = fd
            self.events = events
            self.isEdgeTriggered = isEdgeTriggered
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
    let loopThread = Atomic<UInt>(0)
    private let stopRequested = Atomic<Bool>(false)
    let hasEnded = Atomic<Bool>(false)
    private var threadHandle: pthread_t?

    // Loop-confined state.
    private var watches: [IOWatch] = []
    private let epoll = EpollSet()
    /// The set of watches or one's enabling changed since epoll was told.
    private var watchesChanged = true
    private var timers: [UInt64: Timer] = [:]
    private var nextTimerID: UInt64 = 1
    /// `timers` in deadline order, with entries of cancelled ones left in.
    private var queue = TimerQueue()
    /// The earliest deadline in `timers` (nil: none), kept so that a wake-up
    /// reads one value; stale after the timer that had it went, until
    /// `soonestDeadline()` takes it from the queue again.
    private var soonest: MonotonicInstant?
    private var soonestIsStale = false
    /// Run before every wait, in the order added: the connection dispatches
    /// queued messages, then e.g. an output buffer is flushed once per batch.
    private var beforePollHooks: [() -> Void] = []

    package init() {
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

    package func wakeUp() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: Timers (loop only)

    /// Calls `handler` on the loop once, after `delay`.
    @discardableResult
    public func schedule(after delay: Duration, _ handler: @escaping () -> Void) -> TimerID {
        assertInLoop()
        let id = nextTimerID
        nextTimerID += 1
        let deadline = MonotonicInstant.now + delay
        timers[id] = Timer(deadline: deadline, handler: handler)
        queue.insert(TimerQueue.Entry(deadline: deadline, id: id))
        if !soonestIsStale, soonest.map({ deadline < $0 }) ?? true { soonest = deadline }
        return TimerID(raw: id)
    }

    public func cancel(_ timer: TimerID) {
        assertInLoop()
        guard let removed = timers.removeValue(forKey: timer.raw) else { return }
        if removed.deadline == soonest { soonestIsStale = true }
        // Bounded: cancelled entries never outnumber the live timers by much.
        if queue.count > 2 * timers.count + 64 { queue.rebuild { timers[$0.id] != nil } }
    }

    /// Adds work to run before each wait, after pending messages are dispatched (loop only).
    public func addBeforePollHook(_ hook: @escaping () -> Void) {
        assertInLoop()
        beforePollHooks.append(hook)
    }

    // MARK: Watches (loop only, or before the thread starts)

    package func addWatch(_ watch: IOWatch) {
        assertInLoop()
        epoll.forget(watch.fd)
        watches.append(watch)
        watch.isWatched = true
        watchesChanged = true
    }

    package func removeWatch(_ watch: IOWatch) {
        assertInLoop()
        watch.isWatched = false
        watches.removeAll { $0 === watch }
        epoll.forget(watch.fd)
        watchesChanged = true
    }

    package func setEnabled(_ watch: IOWatch, _ enabled: Bool) {
        assertInLoop()
        guard watch.isEnabled != enabled else { return }
        watch.isEnabled = enabled
        watchesChanged = true
    }

    /// Calls `handler` on the loop whenever `fd` is readable, until `removeWatch`.
    @discardableResult
    public func watchReadable(_ fd: Int32, _ handler: @escaping () -> Void) -> AnyObject {
        watchReadable(fd, revents: { _ in handler() })
    }

    /// Like `watchReadable`, with the ready events (POLLHUP: the other end
    /// closed). `drains`: the handler reads until the descriptor would block,
    /// so it is called only when it becomes readable again (edge-triggered).
    @discardableResult
    public func watchReadable(_ fd: Int32, drains: Bool = false, revents handler: @escaping (Int16) -> Void) -> AnyObject {
        let watch = IOWatch(fd: fd, events: Int16(POLLIN), isEdgeTriggered: drains, handler: handler)
        addWatch(watch)
        return watch
    }

    public func unwatch(_ token: AnyObject) {
        if let watch = token as? IOWatch { removeWatch(watch) }
    }

    // MARK: Running

    /// Starts the loop on a new thread.
    package func start() {
        let handle = startThread { [self] in run() }
        threadHandle = handle
        loopThread.store(UInt(handle), ordering: .releasing)
    }

    /// Runs the loop on the calling thread, instead of `start()`, until
    /// `stop()`: for a program whose main thread has nothing else to do, one
    /// thread less to start and to hand over to.
    public func runOnCurrentThread() {
        precondition(threadHandle == nil, "the loop already runs on a thread of its own")
        run()
    }

    /// Asks the loop to finish its current iteration and end; waits for a
    /// loop on a thread of its own unless called from the loop itself.
    public func stop() {
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
    package func threadCPUTime() -> Duration {
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
        // Where each descriptor's watches start in `watched` (sorted by
        // descriptor), indexed by the descriptor; -1: none. An event finds its
        // watches at once, not by a look through every bird's socket.
        var firstWatched: [Int] = []
        while !stopRequested.load(ordering: .acquiring) {
            runInbox()
            for hook in beforePollHooks { hook() }

            // The enabled watches, as epoll is told them: rebuilt only when they
            // change, not at every wake-up (one per notification when streaming).
            if watchesChanged {
                watchesChanged = false
                epoll.update(interest())
                // By descriptor; a descriptor's watches in the order added.
                watched = watches.enumerated().filter { $0.element.isEnabled }
                    .sorted { ($0.element.fd, $0.offset) < ($1.element.fd, $1.offset) }.map(\.element)
                firstWatched = Array(repeating: -1, count: Int(watched.last?.fd ?? -1) + 1)
                for (index, watch) in watched.enumerated().reversed() { firstWatched[Int(watch.fd)] = index }
            }
            // epoll reports each descriptor once, with the events of all its
            // watches (libdbus has two on its socket: reading and writing).
            epoll.wait(timeout: waitTimeoutMilliseconds()) { fd, events in
                if fd == wakeFD {
                    var count: UInt64 = 0
                    _ = read(wakeFD, &count, 8)
                    return
                }
                guard fd >= 0, Int(fd) < firstWatched.count else { return }
                var index = firstWatched[Int(fd)]
                while index >= 0, index < watched.count, watched[index].fd == fd {
                    let watch = watched[index]
                    let revents = events & (watch.events | Int16(POLLERR | POLLHUP))
                    // A watch removed or disabled by an earlier handler is skipped.
                    if revents != 0, watch.isWatched, watch.isEnabled { watch.handler(revents) }
                    index += 1
                }
            }
            fireDueTimers()
        }
        hasEnded.store(true, ordering: .releasing)
        runInbox()
        // Drop the handlers: they may hold the objects that own this loop.
        timers.removeAll()
        queue.removeAll()
        soonest = nil
        watches.removeAll()
        beforePollHooks.removeAll()
    }

    /// What epoll is to watch: the wake-up eventfd, and each descriptor with
    /// the events of its enabled watches.
    private func interest() -> [Int32: UInt32] {
        var wanted: [Int32: UInt32] = [wakeFD: UInt32(POLLIN)]
        for watch in watches where watch.isEnabled {
            wanted[watch.fd, default: 0] |= UInt32(UInt16(bitPattern: watch.events)) | (watch.isEdgeTriggered ? EPOLLET.rawValue : 0)
        }
        return wanted
    }

    private func runInbox() {
        for item in inbox.takeAll() { item() }
    }

    /// The earliest deadline of a timer, if any (taken from the queue again
    /// only when stale, dropping the cancelled timers' entries on its top).
    private func soonestDeadline() -> MonotonicInstant? {
        if soonestIsStale {
            soonestIsStale = false
            while let top = queue.first, timers[top.id] == nil { queue.removeFirst() }
            soonest = queue.first?.deadline
        }
        return soonest
    }

    private func waitTimeoutMilliseconds() -> Int32 {
        guard let earliest = soonestDeadline() else { return -1 }
        let remaining = MonotonicInstant.now.duration(to: earliest)
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        // Round up so a timer never fires early and the loop does not spin.
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: milliseconds)
    }

    private func fireDueTimers() {
        // Most wake-ups are for a message, with no timer due: one look at the top.
        guard let earliest = soonestDeadline() else { return }
        let now = MonotonicInstant.now
        guard earliest <= now else { return }
        // Timers the handlers schedule wait for the next wake-up, even with no delay.
        let scheduledBefore = nextTimerID
        while let top = queue.first, top.deadline <= now, top.id < scheduledBefore {
            queue.removeFirst()
            soonestIsStale = true
            timers.removeValue(forKey: top.id)?.handler()
        }
    }
}
