import CMosquitto
import Glibc
import Threads

/// Publishes QoS 1 messages to one broker through libmosquitto, on a thread
/// of its own: `publish` only appends to a bounded queue under a lock, so the
/// caller (the Bluetooth loop) never waits on the network. The thread
/// connects, keeps the connection alive, reconnects (1 s, 2 s, ... up to 10 s
/// apart) and sends what waits, oldest first, at most `window` unacknowledged.
///
/// A failure that retrying would not cure ends it with `.failed`: the first
/// connection impossible, a CONNACK refusal, a TLS handshake that fails.
/// Later losses of the connection are waited out.
public final class MQTTPublisher: @unchecked Sendable {
    private let handle: OpaquePointer
    private let settings: MQTTSettings
    private let onEvent: @Sendable (MQTTEvent) -> Void
    private let state: Locked<State>
    /// libmosquitto's latest error or warning (it explains TLS failures).
    /// A lock of its own: libmosquitto may log while holding its own locks.
    private let lastLoggedError = Locked<String?>(nil)

    private struct State {
        var queue: OutgoingQueue
        var connected = false
        /// Reconnected with messages in flight: libmosquitto sends those
        /// again right after the CONNACK callback, so nothing new may go
        /// before the first PUBACK (else it would overtake them).
        var awaitingResends = false
        var everConnected = false
        var closing = false
        var started = false
        var failure: MQTTError?
        /// Called once the thread has ended after `close`.
        var whenClosed: (@Sendable () -> Void)?
    }

    /// nil once libmosquitto is loaded and initialised, else why not.
    private static let libraryProblem: String? = {
        if let problem = cmosq_load() {
            return "the MQTT gateway needs libmosquitto (Debian: apt install libmosquitto1): \(String(cString: problem))"
        }
        return cmosq_lib_init() == MOSQ_ERR_SUCCESS.rawValue ? nil : "cannot initialise libmosquitto"
    }()

    /// Sets up the client; nothing touches the network until `start`.
    public init(_ settings: MQTTSettings, onEvent: @escaping @Sendable (MQTTEvent) -> Void) throws(MQTTError) {
        if let problem = Self.libraryProblem { throw .invalidSettings(problem) }
        guard let handle = cmosq_new(settings.clientID, true, nil) else {
            throw .invalidSettings("cannot create a libmosquitto client")
        }
        self.handle = handle
        self.settings = settings
        self.onEvent = onEvent
        state = Locked(State(queue: OutgoingQueue(
            capacity: settings.bufferCapacity, byteCapacity: settings.bufferByteCapacity, window: settings.window)))
        cmosq_user_data_set(handle, Unmanaged.passUnretained(self).toOpaque())
        try configure()
    }

    /// A started publisher's thread destroys the handle as it ends (`run`),
    /// and holds the publisher until then.
    deinit { if !state.withLock(\.started) { cmosq_destroy(handle) } }

    private func configure() throws(MQTTError) {
        // Other threads publish: libmosquitto then only queues packets there
        // and wakes its loop, which does all the writing.
        _ = cmosq_threaded_set(handle, true)
        _ = cmosq_max_inflight_messages_set(handle, UInt32(settings.window))
        // 1 s, 2 s, 3 s ... 10 s between attempts: a broker back after an
        // outage is found again within 10 s.
        _ = cmosq_reconnect_delay_set(handle, 1, 10, false)
        if let username = settings.username {
            try check(cmosq_username_pw_set(handle, username, settings.password), "username/password")
        }
        if let tls = settings.tls {
            let rc = cmosq_tls_set(handle, tls.caFile, nil, tls.certificateFile, tls.keyFile)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                throw .invalidSettings(
                    "cannot use the TLS files (CA \(tls.caFile)"
                        + (tls.certificateFile.map { ", certificate \($0), key \(tls.keyFile ?? $0)" } ?? "")
                        + "): \(String(cString: cmosq_strerror(rc)))")
            }
        }
        if let will = settings.will {
            try check(
                cmosq_will_set(handle, will.topic, Int32(will.payload.count), will.payload, 1, will.retain),
                "the will")
        }
        cmosq_connect_callback_set(handle) { _, context, code in
            MQTTPublisher.from(context).connected(code)
        }
        cmosq_disconnect_callback_set(handle) { _, context, code in
            MQTTPublisher.from(context).disconnected(code)
        }
        cmosq_publish_callback_set(handle) { _, context, _ in
            MQTTPublisher.from(context).acknowledged()
        }
        if !settings.subscriptions.isEmpty {
            cmosq_message_callback_set(handle) { _, context, message in
                MQTTPublisher.from(context).received(message.pointee)
            }
        }
        listenToLog(true)
    }

    /// libmosquitto formats a log line (vsnprintf into a fresh buffer) for
    /// every packet it sends or receives whenever a log callback is set, a
    /// good part of what a published reading costs (see docs/performance.md,
    /// 'The MQTT gateway'). Its errors only explain a connection that cannot
    /// be made (TLS, refused), so the callback is set only while not
    /// connected: from the start and after each loss until the CONNACK.
    /// Called on the publisher's thread once it runs.
    private func listenToLog(_ listening: Bool) {
        guard listening else { return cmosq_log_callback_set(handle, nil) }
        cmosq_log_callback_set(handle) { _, context, level, text in
            guard level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0, let text else { return }
            let line = String(cString: text)
            MQTTPublisher.from(context).lastLoggedError.withLock { $0 = line }
        }
    }

    private func check(_ rc: Int32, _ what: String) throws(MQTTError) {
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            throw .invalidSettings("cannot set \(what): \(String(cString: cmosq_strerror(rc)))")
        }
    }

    private static func from(_ context: UnsafeMutableRawPointer?) -> MQTTPublisher {
        Unmanaged<MQTTPublisher>.fromOpaque(context!).takeUnretainedValue()
    }

    // MARK: Any thread

    /// Starts the thread: connects, then keeps publishing until `close`.
    public func start() {
        state.withLock { $0.started = true }
        pthread_detach(startThread { [self] in run() })
    }

    /// Queues a message; it goes out as soon as the connection and the
    /// window allow. Returns false when it made the queue drop its oldest.
    @discardableResult
    public func publish(_ message: MQTTMessage) -> Bool {
        state.withLock { state in
            guard !state.closing, state.failure == nil else { return true }
            let kept = !state.queue.append(message)
            pump(&state)
            return kept
        }
    }

    /// Publishes `message` now and after every reconnect (the latest per
    /// topic): what the broker must always hold, like availability.
    public func publishSticky(_ message: MQTTMessage) {
        state.withLock { state in
            guard !state.closing, state.failure == nil else { return }
            state.queue.setSticky(message)
            pump(&state)
        }
    }

    /// No longer publishes these topics after a reconnect (a bird forgotten).
    public func forgetSticky(_ topics: Set<String>) {
        state.withLock { $0.queue.forgetSticky(topics) }
    }

    /// Sends `final` (e.g. "offline"), then disconnects once everything queued
    /// is acknowledged, and calls `done` on the publisher's thread. A caller
    /// that cannot wait long (the broker may be away) sets its own deadline.
    public func close(final: [MQTTMessage], _ done: @escaping @Sendable () -> Void) {
        let finishedAlready = state.withLock { state in
            guard state.started, state.failure == nil, !state.closing else { return true }
            for message in final { state.queue.setSticky(message) }
            pump(&state)
            state.closing = true
            state.whenClosed = done
            disconnectIfSettled(state)
            return false
        }
        if finishedAlready { done() }
    }

    /// Messages waiting or unacknowledged (for the message at exit).
    public var undelivered: Int {
        state.withLock { $0.queue.count + $0.queue.stickiesDue + $0.queue.inFlight }
    }

    // MARK: The publisher's thread

    private func run() {
        let failure = publishUntilEnded()
        let done = state.withLock { state in
            if let failure { state.failure = failure }
            state.connected = false  // so no other thread uses the handle again
            defer { state.whenClosed = nil }
            return state.whenClosed
        }
        // Once this thread has told of its end, birdctl may exit, and exit()
        // tears down OpenSSL's globals (OPENSSL_cleanup). OpenSSL work on this
        // thread after that, or its thread-exit destructor, crashed birdctl
        // (SIGSEGV instead of its exit status, seen under ThreadSanitizer). So
        // the client (its SSL context) and this thread's OpenSSL state go
        // first, here, not in deinit, which may run on this thread later.
        cmosq_destroy(handle)
        cmosq_openssl_thread_stop()
        if let failure { onEvent(.failed(failure)) }
        done?()
    }

    /// Connects, then runs libmosquitto's loop until `close` is done (nil)
    /// or the publisher fails (why).
    private func publishUntilEnded() -> MQTTError? {
        let rc = cmosq_connect(handle, settings.host, Int32(settings.port), Int32(settings.keepaliveSeconds))
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            return rc == MOSQ_ERR_TLS.rawValue ? .tls(loggedError(rc)) : .unreachable(describe(rc))
        }
        while true {
            let rc = cmosq_loop_forever(handle, -1, 1)
            let (closing, failure) = state.withLock { ($0.closing, $0.failure) }
            if let failure { return failure }
            if closing { return nil }
            switch rc {
            case MOSQ_ERR_TLS.rawValue: return .tls(loggedError(rc))
            case MOSQ_ERR_AUTH.rawValue, MOSQ_ERR_ACL_DENIED.rawValue: return .refused(describe(rc))
            default:
                // Gave up on an error it counts as fatal (a failed DNS lookup):
                // for a gateway that has been connected, another try later.
                sleep(5)
                _ = cmosq_reconnect(handle)
            }
        }
    }

    private func connected(_ code: Int32) {
        guard code == 0 else {
            state.withLock { $0.failure = .refused(String(cString: cmosq_connack_string(code))) }
            cmosq_disconnect(handle)
            return
        }
        listenToLog(false)
        lastLoggedError.withLock { $0 = nil }
        // Before anything queued goes out: the broker handles a client's
        // packets in order, so the retained messages arrive before the echo
        // of anything published after this.
        for filter in settings.subscriptions { _ = cmosq_subscribe(handle, nil, filter, 1) }
        let backlog = state.withLock { state in
            state.connected = true
            state.everConnected = true
            if state.queue.inFlight > 0 {
                state.awaitingResends = true
            } else {
                resume(&state)
            }
            return state.queue.count + state.queue.stickiesDue
        }
        onEvent(.connected(backlog: backlog))
        reportDropped()
    }

    private func disconnected(_ code: Int32) {
        listenToLog(true)
        let (report, queued) = state.withLock { state in
            state.connected = false
            state.awaitingResends = false
            if !state.everConnected && !state.closing && state.failure == nil {
                // Never got as far as CONNACK: not a broker we can use.
                state.failure = .unreachable(lastLoggedError.withLock { $0 } ?? describe(code))
                cmosq_disconnect(handle)
            }
            return (!state.closing && state.failure == nil, state.queue.count + state.queue.inFlight)
        }
        if report { onEvent(.lost(reason: describe(code), queued: queued)) }
    }

    private func acknowledged() {
        state.withLock { state in
            state.queue.acknowledged()
            if state.awaitingResends {
                resume(&state)
            } else {
                pump(&state)
                disconnectIfSettled(state)
            }
        }
        reportDropped()
    }

    /// On the publisher's thread; libmosquitto frees the message after this returns.
    private func received(_ message: mosquitto_message) {
        let limit = settings.maximumIncomingSize
        guard let topic = message.topic, (0...limit).contains(Int(message.payloadlen)),
            strnlen(topic, limit + 1) <= limit
        else { return }
        let name = String(decoding: UnsafeRawBufferPointer(start: topic, count: strlen(topic)), as: UTF8.self)
        let payload = message.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(message.payloadlen))) } ?? []
        onEvent(.received(MQTTMessage(name, bytes: payload, retain: message.retain)))
    }

    private func reportDropped() {
        let dropped = state.withLock { $0.connected ? $0.queue.takeDropped() : 0 }
        if dropped > 0 { onEvent(.dropped(dropped)) }
    }

    // MARK: With the lock held

    /// After (re)connecting: the sticky messages, then the queue, a window at a time.
    private func resume(_ state: inout State) {
        state.awaitingResends = false
        state.queue.makeAllStickiesDue()
        pump(&state)
        disconnectIfSettled(state)
    }

    private func pump(_ state: inout State) {
        guard state.connected, !state.awaitingResends else { return }
        while let message = state.queue.nextToSend() {
            publishNow(message)
        }
    }

    private func publishNow(_ message: MQTTMessage) {
        // Not connected after all (the socket just went): libmosquitto keeps a
        // QoS 1 message it accepted and sends it after reconnecting.
        _ = cmosq_publish(
            handle, nil, message.topic, Int32(message.payload.count), message.payload, 1, message.retain)
    }

    private func disconnectIfSettled(_ state: State) {
        if state.closing && state.connected && state.queue.isSettled { cmosq_disconnect(handle) }
    }

    // MARK: Errors as text

    private func describe(_ rc: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue { return String(cString: strerror(errno)) }
        if rc == MOSQ_ERR_EAI.rawValue { return "cannot resolve \(settings.host)" }
        return String(cString: cmosq_strerror(rc))
    }

    private func loggedError(_ rc: Int32) -> String {
        lastLoggedError.withLock { $0 } ?? describe(rc)
    }
}
