import DBus

/// One Home Assistant connection to the proxy, on the loop: the Noise
/// handshake (or plaintext, where asked for), then frames in and out of its
/// `ProxySession`. A client that sends what is no frame, fails the
/// handshake, or falls silent past `silenceLimit` is told why (where the
/// API has a way) and dropped. Loop-confined.
final class ProxyConnection {
    /// Home Assistant pings after 20 s of silence: a client silent this long is gone.
    static let silenceLimit = Duration.seconds(150)
    /// The handshake must be done within this (aioesphomeapi's own limit is 30 s).
    static let handshakeLimit = Duration.seconds(30)

    private enum Phase {
        /// Noise: the client's hello frame is next (its payload goes into the prologue).
        case awaitingClientHello
        /// Noise: the client's handshake message is next.
        case awaitingHandshake(NoiseHandshake)
        /// Frames are open (encrypted with these ciphers, or plaintext when nil).
        case open(receive: NoiseCipher?, send: NoiseCipher?)
        case closed
    }

    private let stream: StreamConnection
    private let loop: EventLoop
    private var reader: FrameReader
    private var phase: Phase
    private let key: [UInt8]?
    private(set) var session: ProxySession
    private var lastHeard = MonotonicInstant.now
    private var watchdog: EventLoop.TimerID?
    private let dropped: (String) -> Void
    /// What the session asks of the proxy's Bluetooth side (devices heard,
    /// slots, links and GATT requests), for the server.
    var onBluetooth: (ProxySession.Action) -> Void = { _ in }

    /// `key`: the 32-byte pre-shared key (nil: plaintext). `dropped` gets
    /// the reason when the proxy drops the client (not when it says goodbye).
    init(stream: StreamConnection, loop: EventLoop, key: [UInt8]?, identity: ProxySession.Identity, dropped: @escaping (String) -> Void) {
        self.stream = stream
        self.loop = loop
        self.key = key
        self.dropped = dropped
        reader = FrameReader(key == nil ? .plaintext : .noise)
        phase = key == nil ? .open(receive: nil, send: nil) : .awaitingClientHello
        session = ProxySession(identity)
        stream.onBytes = { [unowned self] bytes in received(bytes) }
        stream.onClose = { [unowned self] in ended() }
        watchdog = loop.schedule(after: Self.handshakeLimit) { [weak self] in self?.checkAlive() }
    }

    var isOpen: Bool { if case .open = phase { stream.isOpen } else { false } }

    /// The most a message's payload may hold: a Noise frame's 65,535 bytes
    /// less the tag and the type and length.
    static let maximumPayload = 65535 - 16 - 4

    /// A message for the client (once its frames are open).
    func send(_ message: some ESPHomeMessage) {
        guard let payload = try? message.serializedBytes() as [UInt8] else { return }
        send(type: type(of: message).messageType, payload: payload)
    }

    /// An encoded message for the client (once its frames are open).
    func send(type: UInt32, payload: [UInt8]) {
        guard case .open = phase else { return }
        sendFrame(type: type, payload: payload)
    }

    /// The proxy is going: the client is told, and the connection closes
    /// once that is sent.
    func sayGoodbye() {
        guard case .open = phase else { return }
        send(DisconnectRequest())
        phase = .closed
        stream.closeAfterSending()
    }

    func close(_ reason: String) {
        dropped(reason)
        stream.close()
    }

    // MARK: In

    private func received(_ bytes: [UInt8]) {
        lastHeard = .now
        reader.append(bytes)
        do {
            while case .some(let frame) = try reader.next() {
                handle(frame)
                if case .closed = phase { return }
            }
        } catch {
            reject(error.description)
        }
    }

    private func handle(_ frame: FrameReader.Frame) {
        switch (phase, frame) {
        case (.awaitingClientHello, .noise(let hello)):
            let prologue = Array("NoiseAPIInit".utf8) + [UInt8(hello.count >> 8), UInt8(hello.count & 0xFF)] + hello
            phase = .awaitingHandshake(NoiseHandshake(presharedKey: key!, prologue: prologue))
            // The server hello: the Noise protocol chosen (1), the name, and the MAC.
            let identity = session.identity
            stream.send(FrameWriter.noise([1] + Array(identity.name.utf8) + [0] + Array(identity.macAddress.hexDigits.lowercased().utf8) + [0]))
        case (.awaitingHandshake(var handshake), .noise(let message)):
            guard message.first == 0 else { return reject("Bad handshake error byte") }
            do throws(NoiseHandshake.Failure) {
                try handshake.readInitiatorMessage(Array(message.dropFirst()))
                let (answer, receive, send) = try handshake.writeResponderMessage()
                stream.send(FrameWriter.noise([0] + answer))
                phase = .open(receive: receive, send: send)
            } catch {
                reject(error.description)
            }
        case (.open(var receive?, let send), .noise(let sealed)):
            guard let plaintext = receive.open(sealed), plaintext.count >= 4 else { return reject("a message that does not decrypt") }
            phase = .open(receive: receive, send: send)
            let type = UInt32(plaintext[0]) << 8 | UInt32(plaintext[1])
            let length = Int(plaintext[2]) << 8 | Int(plaintext[3])
            guard length <= plaintext.count - 4 else { return reject("a message longer than its frame") }
            perform(session.received(type: type, payload: Array(plaintext[4..<(4 + length)])))
        case (.open(nil, _), .plaintext(let type, let payload)):
            perform(session.received(type: type, payload: payload))
        default:
            reject("Bad indicator byte")
        }
    }

    private func perform(_ actions: [ProxySession.Action]) {
        for action in actions {
            switch action {
            case .send(let type, let payload): sendFrame(type: type, payload: payload)
            case .close(let reason):
                dropped(reason)
                phase = .closed
                stream.closeAfterSending()
            case .end:
                phase = .closed
                stream.closeAfterSending()
            case .sendDevicesHeard, .sendSlots, .device, .gatt:
                onBluetooth(action)
            }
        }
    }

    // MARK: Out

    private func sendFrame(type: UInt32, payload: [UInt8]) {
        guard payload.count <= Self.maximumPayload else {
            return close("a message of \(payload.count) bytes is over a frame")
        }
        switch phase {
        case .open(let receive, var send?):
            let plaintext = [UInt8(type >> 8), UInt8(type & 0xFF), UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
            stream.send(FrameWriter.noise(send.seal(plaintext)))
            phase = .open(receive: receive, send: send)
        case .open(_, nil):
            stream.send(FrameWriter.plaintext(type: type, payload: payload))
        default:
            break
        }
    }

    /// A Noise client in its handshake is told why, in the API's way (a
    /// frame of 1 and the reason); once its frames are encrypted, or in
    /// plaintext, it is just dropped.
    private func reject(_ reason: String) {
        dropped(reason)
        var handshaking = true
        if case .open = phase { handshaking = false }
        if key != nil && handshaking { stream.send(FrameWriter.noise([1] + Array(reason.utf8))) }
        phase = .closed
        stream.closeAfterSending()
    }

    private func checkAlive() {
        watchdog = nil
        guard stream.isOpen else { return }
        if case .closed = phase { return }
        guard case .open = phase else { return close("the handshake did not finish in \(Self.handshakeLimit)") }
        let silent = MonotonicInstant.now - lastHeard
        if silent >= Self.silenceLimit { return close("silent for \(Self.silenceLimit)") }
        watchdog = loop.schedule(after: Self.silenceLimit - silent) { [weak self] in self?.checkAlive() }
    }

    private func ended() {
        phase = .closed
        if let watchdog { loop.cancel(watchdog) }
        watchdog = nil
    }
}
