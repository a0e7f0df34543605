import CDBus
import Glibc
// The loop is part of a connection's API (`loop`): whoever imports DBus gets it.
@_exported import Loop
import Synchronization
import Threads

/// A private connection to a message bus, driven by its own `EventLoop`.
///
/// Public methods may be called from any thread; they hop onto the loop.
/// Reply handlers, signal handlers and exported methods run on the loop.
/// Replies are matched to calls here (by serial) rather than through libdbus
/// pending calls, so timeouts are ordinary loop timers.
public final class Connection: @unchecked Sendable {
    public typealias ReplyHandler = @Sendable (Result<Message, DBusError>) -> Void
    public typealias SignalHandler = @Sendable (Message) -> Void

    public struct SubscriptionID: Hashable, Sendable { let raw: UInt64 }

    let raw: OpaquePointer
    public let loop: EventLoop
    /// This connection's unique name on the bus, e.g. `:1.42`.
    public let uniqueName: String

    // Loop-confined state.
    private struct PendingReply {
        let handler: ReplyHandler
        let timer: EventLoop.TimerID
    }
    /// A class: every signal is matched against each, and copying a struct
    /// of a rule and a closure out of the array cost more than the matching.
    private final class Subscription {
        let id: UInt64
        let rule: MatchRule.Compiled
        let handler: SignalHandler
        init(id: UInt64, rule: MatchRule.Compiled, handler: @escaping SignalHandler) {
            (self.id, self.rule, self.handler) = (id, rule, handler)
        }
    }
    private var pending: [UInt32: PendingReply] = [:]
    private var subscriptions: [Subscription] = []
    private var nextSubscriptionID: UInt64 = 1
    /// Owners of well-known names that match rules name as sender.
    private var nameOwners = NameOwners()
    private var trackedNames: Set<String> = []
    private var lossHandlers: [@Sendable (ConnectionLoss) -> Void] = []
    /// Set once the bus has gone (not by `close()`).
    private var loss: ConnectionLoss?
    private let mainLoop: LibdbusMainLoop
    private(set) var isConnected = true
    let exports = ExportRegistry()

    /// Traffic tracer for `--verbose`: called on the loop with every message
    /// sent and received.
    public var tracer: (@Sendable (_ outgoing: Bool, _ message: Message) -> Void)?

    // MARK: Opening and closing

    /// The system bus's address as `DBUS_SYSTEM_BUS_ADDRESS` sets it; nil: the standard socket.
    public static var systemBusAddress: String? { getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) } }

    /// Whether `system` opens the machine's own system bus: the standard
    /// socket, by default or named (as containers often set it).
    public static var isStandardSystemBus: Bool {
        guard let address = systemBusAddress else { return true }
        return ["unix:path=/run/dbus/system_bus_socket", "unix:path=/var/run/dbus/system_bus_socket"].contains(address)
    }

    /// The system bus: `DBUS_SYSTEM_BUS_ADDRESS` if set, else the standard socket.
    /// `startingLoop` false: the caller runs `loop.runOnCurrentThread()` (and
    /// so cannot use `callBlocking`, which needs the loop on another thread).
    public static func system(startingLoop: Bool = true) throws(DBusError) -> Connection {
        try open(startingLoop: startingLoop) { error in dbus_bus_get_private(DBUS_BUS_SYSTEM, &error) }
    }

    /// A bus at an explicit address such as `unix:path=/run/dbus/system_bus_socket`.
    public static func connect(address: String) throws(DBusError) -> Connection {
        try open { error in
            guard let raw = dbus_connection_open_private(address, &error) else { return nil }
            if dbus_bus_register(raw, &error) == 0 {
                dbus_connection_close(raw)
                dbus_connection_unref(raw)
                return nil
            }
            return raw
        }
    }

    private static func open(
        startingLoop: Bool = true, _ body: (inout CDBus.DBusError) -> OpaquePointer?
    ) throws(DBusError) -> Connection {
        dbus_threads_init_default()
        var error = cdbus_error_make()
        guard let raw = body(&error) else {
            throw takeError(&error, fallback: DBusError(.noServer, "could not connect to the bus"))
        }
        return Connection(raw: raw, startingLoop: startingLoop)
    }

    /// Moves a libdbus error into a Swift one and frees it.
    static func takeError(_ error: inout CDBus.DBusError, fallback: DBusError) -> DBusError {
        defer { dbus_error_free(&error) }
        guard dbus_error_is_set(&error) != 0, let name = error.name else { return fallback }
        return DBusError(DBusErrorName(String(cString: name)), error.message.map { String(cString: $0) } ?? "")
    }

    private init(raw: OpaquePointer, startingLoop: Bool) {
        self.raw = raw
        self.loop = EventLoop()
        self.mainLoop = LibdbusMainLoop(raw: raw, loop: loop)
        self.uniqueName = dbus_bus_get_unique_name(raw).map { String(cString: $0) } ?? ""
        dbus_connection_set_exit_on_disconnect(raw, 0)
        installFilter()
        mainLoop.install()
        // Asks libdbus only when it said it queued something: this runs at
        // every wake-up, most of them (AcquireNotify's socket) not for the bus.
        loop.addBeforePollHook { [weak self, mainLoop] in
            if mainLoop.takeQueuedMark() { self?.dispatchQueued() }
        }
        if startingLoop { loop.start() }
    }

    /// Closes the connection and ends the loop. Pending calls fail with `.disconnected`.
    /// Handlers are dropped, which also breaks the reference cycles between
    /// the connection and the objects whose handlers it holds.
    public func close() {
        let work: @Sendable () -> Void = { [self] in
            if isConnected {
                dbus_connection_flush(raw)
                dbus_connection_close(raw)
                failEverythingPending()
            }
            // Also after a loss: the handlers' cycles are broken all the same.
            subscriptions.removeAll()
            lossHandlers.removeAll()
            exports.objects.removeAll()
            tracer = nil
        }
        if loop.isInLoop { work() } else { runBlocking(work) }
        loop.stop()
    }

    deinit {
        // Only reachable once nothing on the loop refers to us any more.
        // The loop ends first: closing makes libdbus remove its watches from
        // the loop, which off the loop's thread would race with its wait
        // (the loop-thread check traps on that in a debug build).
        loop.stop()
        if isConnected { dbus_connection_close(raw) }
        dbus_connection_unref(raw)
    }

    /// Calls `handler` on the loop, once, if the bus goes away (the daemon
    /// stopped or crashed, the socket failed) — not after `close()`. It runs
    /// before the calls waiting for a reply fail with `.disconnected`, so the
    /// owner knows why they fail; registered after the loss, it runs at once.
    /// Nothing can be sent any more: a call fails at once with `.disconnected`.
    public func onLoss(_ handler: @escaping @Sendable (ConnectionLoss) -> Void) {
        loop.execute { [self] in
            if let loss { return handler(loss) }
            lossHandlers.append(handler)
        }
    }

    // MARK: Sending and calling

    /// Sends a message without waiting for any reply.
    public func send(_ message: Message) {
        loop.execute { [self] in _ = sendNow(message) }
    }

    /// Sends a method call; `reply` runs on the loop with the reply or an error
    /// (the peer's, `.timeout` after `timeout`, or `.disconnected`).
    public func call(_ message: Message, timeout: Duration = .seconds(25), reply: @escaping ReplyHandler) {
        loop.execute { [self] in
            guard let serial = sendNow(message) else {
                reply(.failure(DBusError(.disconnected, "not connected to the bus")))
                return
            }
            let timer = loop.schedule(after: timeout) { [self] in
                guard let entry = pending.removeValue(forKey: serial) else { return }
                entry.handler(.failure(DBusError(.noReply, "no reply within \(timeout)")))
            }
            pending[serial] = PendingReply(handler: reply, timer: timer)
        }
    }

    /// Sends a method call and blocks the calling thread for its reply.
    /// Must not be called on the loop, which has to run to deliver the reply.
    public func callBlocking(_ message: Message, timeout: Duration = .seconds(25)) throws(DBusError) -> Message {
        precondition(!loop.isInLoop, "callBlocking on the connection's own loop would deadlock")
        let box = ResultBox()
        let done = ThreadGate()
        call(message, timeout: timeout) { result in
            box.result = result
            done.open()
        }
        done.wait()
        return try box.result!.get()
    }

    /// Runs `work` on the loop and waits for it (used only off the loop).
    private func runBlocking(_ work: @escaping @Sendable () -> Void) {
        let done = ThreadGate()
        loop.execute {
            work()
            done.open()
        }
        done.wait()
    }

    /// Queues a message on the loop; returns its serial, nil if disconnected.
    func sendNow(_ message: Message) -> UInt32? {
        loop.assertInLoop()
        guard isConnected else { return nil }
        var serial: UInt32 = 0
        guard dbus_connection_send(raw, message.raw, &serial) != 0 else { return nil }
        tracer?(true, message)
        return serial
    }

    // MARK: Signals

    /// Adds a match rule on the bus and calls `handler` on the loop for every
    /// signal it selects. The AddMatch request is sent before this returns to
    /// the loop, so any call sent after it is ordered after the rule is active.
    @discardableResult
    public func subscribe(_ rule: MatchRule, handler: @escaping SignalHandler) -> SubscriptionID {
        // The id is reserved off-loop so the caller gets it synchronously.
        let id = SubscriptionID(raw: subscriptionCounter.add(1, ordering: .relaxed).newValue)
        loop.execute { [self] in
            if rule.hasWellKnownSender, let sender = rule.sender { trackOwner(of: sender) }
            subscriptions.append(Subscription(id: id.raw, rule: MatchRule.Compiled(rule), handler: handler))
            callBusDriver("AddMatch", [.string(rule.description)])
        }
        return id
    }

    public func unsubscribe(_ id: SubscriptionID) {
        loop.execute { [self] in
            guard let index = subscriptions.firstIndex(where: { $0.id == id.raw }) else { return }
            let rule = subscriptions.remove(at: index).rule.rule
            callBusDriver("RemoveMatch", [.string(rule.description)])
        }
    }

    private let subscriptionCounter = Atomic<UInt64>(0)

    /// Keeps `nameOwners[name]` current so well-known senders can be matched.
    func trackOwner(of name: String) {
        guard trackedNames.insert(name).inserted else { return }
        let rule = MatchRule(
            sender: busDriverName, interface: busDriverName, member: "NameOwnerChanged", arg0: name)
        callBusDriver("AddMatch", [.string(rule.description)])
        callBusDriver("GetNameOwner", [.string(name)]) { [self] result in
            // A NameOwnerChanged may have arrived first; it is newer, keep it.
            guard nameOwners[name] == nil else { return }
            nameOwners[name] = CString((try? result.get().arguments().first?.string) ?? "")
        }
    }

    private func callBusDriver(
        _ member: String, _ arguments: [DBusValue], reply: ReplyHandler? = nil
    ) {
        guard
            let message = try? Message.methodCall(
                destination: busDriverName, path: busDriverPath, interface: busDriverName,
                member: member, arguments: arguments)
        else { return }
        call(message, timeout: .seconds(25)) { result in reply?(result) }
    }

    // MARK: Incoming

    /// Delivers every message libdbus has queued (runs before each poll).
    /// Signals and replies — every notification is a signal — are taken off
    /// the queue and handled here: libdbus's dispatch would copy its filter
    /// list into a newly allocated list and look the reply serial up among
    /// pending calls (there are none: replies are matched here) for every
    /// notification (see docs/performance.md, 'The signal path'). Method
    /// calls still go through it, so its built-in org.freedesktop.DBus.Peer
    /// answers, then our filter.
    private func dispatchQueued() {
        while let message = dbus_connection_borrow_message(raw) {
            if dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_METHOD_CALL {
                dbus_connection_return_message(raw, message)
                dbus_connection_dispatch(raw)
            } else {
                dbus_connection_steal_borrowed_message(raw, message)
                _ = handleIncoming(Message(owning: message, received: true))
            }
        }
    }

    /// The single libdbus filter: replies, signals and calls to exported objects.
    fileprivate func handleIncoming(_ message: Message) -> Bool {
        loop.assertInLoop()
        tracer?(false, message)
        switch message.kind {
        case .methodReturn, .error:
            guard let entry = pending.removeValue(forKey: message.replySerial) else { return false }
            loop.cancel(entry.timer)
            if let error = message.error {
                entry.handler(.failure(error))
            } else {
                entry.handler(.success(message))
            }
            return true
        case .signal:
            // Handled: libdbus would otherwise look the path up among
            // registered objects (none: exports are dispatched here), which
            // splits the path into allocated strings per signal.
            deliverSignal(message)
            return true
        case .methodCall:
            if let reply = refusal(of: message) ?? exports.handle(message, on: self), message.expectsReply {
                _ = sendNow(reply)
            }
            return true
        case .invalid:
            return false
        }
    }

    /// AccessDenied for a call to a restricted object from anyone but the
    /// current owner of the name it is restricted to (unknown owner: refused).
    func refusal(of message: Message) -> Message? {
        guard let path = message.path, let name = exports.restriction(for: path) else { return nil }
        if let owner = nameOwners[name], owner.count > 0, message.hasSender(owner) { return nil }
        return message.makeErrorReply(DBusError(.accessDenied, "only the owner of \(name) may call \(path)"))
    }

    private func deliverSignal(_ message: Message) {
        if message.hasInterface(Self.localInterface), message.hasMember(Self.disconnected) {
            handleDisconnected()
            return
        }
        if message.hasMember(Self.nameOwnerChanged), message.hasSender(Self.busDriver),
            let args = try? message.arguments(), args.count == 3,
            let name = args[0].string, trackedNames.contains(name)
        {
            nameOwners[name] = CString(args[2].string ?? "")
        }
        // Local copies: a handler may subscribe or unsubscribe, and reading
        // them from `self` for each rule cost a retain and release apiece.
        let current = subscriptions, owners = nameOwners
        for index in current.indices where current[index].rule.matches(message, nameOwners: owners) {
            current[index].handler(message)
        }
    }

    private static let localInterface = CString("org.freedesktop.DBus.Local")
    private static let disconnected = CString("Disconnected")
    private static let nameOwnerChanged = CString("NameOwnerChanged")
    private static let busDriver = CString(busDriverName)

    /// libdbus queues org.freedesktop.DBus.Local.Disconnected when it finds
    /// the socket closed (EOF, or HUP/ERR on the watch) and drops its watch
    /// of it: from then on the loop would wait for ever unless told.
    private func handleDisconnected() {
        guard isConnected else { return }
        isConnected = false
        let loss = ConnectionLoss(unansweredCalls: pending.count)
        self.loss = loss
        let handlers = lossHandlers
        lossHandlers.removeAll()
        for handler in handlers { handler(loss) }
        failEverythingPending()
    }

    private func failEverythingPending() {
        isConnected = false
        let failed = pending
        pending.removeAll()
        for (_, entry) in failed {
            loop.cancel(entry.timer)
            entry.handler(.failure(DBusError(.disconnected, "connection to the bus closed")))
        }
    }

    // MARK: libdbus's hooks

    /// The one filter: every incoming message goes to `handleIncoming`.
    private func installFilter() {
        let context = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_add_filter(raw, { _, message, context in
            let connection = Unmanaged<Connection>.fromOpaque(context!).takeUnretainedValue()
            let handled = connection.handleIncoming(Message(borrowing: message!))
            return handled ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }, context, nil)
    }
}

/// How a connection ended when `close()` did not end it: the bus closed it
/// (dbus-daemon stopped, crashed or restarted) or its socket failed. libdbus
/// tells no more than that.
public struct ConnectionLoss: Sendable, Equatable, CustomStringConvertible {
    /// The calls still waiting for a reply; each fails with `.disconnected`
    /// right after the loss is reported.
    public let unansweredCalls: Int

    public var description: String {
        "the bus closed the connection"
            + (unansweredCalls > 0 ? " (\(unansweredCalls) call\(unansweredCalls == 1 ? "" : "s") unanswered)" : "")
    }
}

/// Carries a result from the loop to a thread blocked on a semaphore.
private final class ResultBox: @unchecked Sendable {
    var result: Result<Message, DBusError>?
}
