import Bird
import BlueZ
import DBus

/// The ESPHome native API served on the loop: Home Assistant connects (at
/// most `maximumClients` at once), and the advertisements heard go to each
/// client that subscribed, in messages of up to 16, each at most
/// `batchWindow` after the first in it was heard. Loop-confined.
public final class ProxyServer: @unchecked Sendable {
    public struct Configuration: Sendable {
        /// nil: every address.
        public var host: String?
        public var port: UInt16
        /// The Noise pre-shared key; nil: plaintext (loopback, or asked for).
        public var key: NoiseKey?
        public var maximumClients = 4
        /// What may wait to be sent to one client before it is dropped as too slow.
        public var maximumQueued = 1 << 20

        public init(host: String?, port: UInt16, key: NoiseKey?) {
            (self.host, self.port, self.key) = (host, port, key)
        }
    }

    /// Advertisements per message, as ESPHome sends them: a message stays
    /// far below a frame's 64 KiB whatever the peers advertise.
    static let batchSize = 16
    /// How long an advertisement waits for others to fill its message: a
    /// send costs far more than a message's bytes, and Home Assistant does
    /// not notice 20 ms.
    static let batchWindow = Duration.milliseconds(20)

    private let loop: EventLoop
    private var server: StreamServer!
    private var connections: [ProxiedLinks.Client: ProxyConnection] = [:]
    private var nextClient: ProxiedLinks.Client = 1
    /// Home Assistant's links through the proxy.
    private var links = ProxiedLinks()
    /// The Bluetooth side of the links; without it no connect is let through.
    public weak var bluetooth: ProxyBluetooth?
    private var pending: [BluetoothLERawAdvertisement] = []
    /// Armed while advertisements wait for their message (`batchWindow`).
    private var flushTimer: EventLoop.TimerID?
    /// Who the proxy says it is, once known: it never changes after (Home
    /// Assistant keys the proxy on its MAC address).
    private var identity: ProxySession.Identity?
    /// The advertisements of the devices heard now, for a client that just subscribed.
    public var devicesHeard: () -> [BluetoothLERawAdvertisement] = { [] }
    public var port: UInt16 { server.port }
    public var clientCount: Int { connections.count }
    /// Clients the proxy dropped (a bad key or frame, silence, too slow), not those that said goodbye.
    public private(set) var clientsDropped = 0
    /// Advertisements passed on to the clients that asked (a batch counted once, whatever its clients).
    public private(set) var advertisementsPassedOn = 0
    /// Home Assistant's links up or being made.
    public var linkCount: Int { links.linkCount }
    /// How Home Assistant's connects ended.
    public var connectsEnded: [ProxiedLinks.ConnectEnd: Int] { links.connectsEnded }

    /// `identify` says who the proxy is, asked as each client comes until it
    /// answers (nil: not known yet, e.g. no adapter yet; the client is
    /// dropped). `said` gets a line for the log: a client dropped, and why.
    public init(
        loop: EventLoop, configuration: Configuration, identify: @escaping () -> ProxySession.Identity?,
        said: @escaping (String) -> Void
    ) throws(TCPListener.ListenError) {
        loop.assertInLoop()
        self.loop = loop
        server = try StreamServer(
            loop: loop, host: configuration.host, port: configuration.port, maximumClients: configuration.maximumClients,
            maximumQueued: configuration.maximumQueued
        ) { [unowned self] stream in
            if identity == nil { identity = identify() }
            guard let identity else {
                said("proxy: a client was dropped: birdctl has no Bluetooth adapter yet")
                return stream.close()
            }
            let connection = ProxyConnection(stream: stream, loop: loop, key: configuration.key?.bytes, identity: identity) {
                [unowned self] reason in
                clientsDropped += 1
                said("proxy: a client was dropped: \(reason)")
            }
            let client = nextClient
            nextClient += 1
            connection.onBluetooth = { [unowned self] in asked($0, by: client) }
            connections[client] = connection
            let ended = stream.onClose
            stream.onClose = { [unowned self] in
                ended?()
                connections[client] = nil
                perform(links.gone(client))
                slotsChanged()
            }
        }
    }

    /// Released on the loop, or after `stop()` there.
    deinit { stop() }

    /// Clients that asked for advertisements.
    public var advertisementSubscribers: Int {
        connections.values.filter { $0.isOpen && $0.session.advertisementsWanted }.count
    }

    /// An advertisement as heard: it goes out when a message is full, or
    /// `batchWindow` after the first of its message was heard.
    public func advertise(_ advertisement: BluetoothLERawAdvertisement) {
        guard connections.values.contains(where: { $0.isOpen && $0.session.advertisementsWanted }) else { return }
        pending.append(advertisement)
        if pending.count >= Self.batchSize { return flush() }
        if flushTimer == nil {
            flushTimer = loop.schedule(after: Self.batchWindow) { [weak self] in
                self?.flushTimer = nil
                self?.flush()
            }
        }
    }

    /// Each client is told goodbye (DisconnectRequest, as ESPHome says it
    /// at shutdown: Home Assistant reconnects later without an error), then
    /// the server closes.
    public func stop() {
        if let flushTimer { loop.cancel(flushTimer) }
        flushTimer = nil
        for connection in connections.values { connection.sayGoodbye() }
        server.stop()
    }

    // MARK: Links

    /// A linked device's link went down (or its Connect failed late).
    public func unlinked(_ address: BluetoothAddress) {
        perform(links.unlinked(address))
        slotsChanged()
    }

    /// A notification from a linked device's characteristic (by its API handle).
    public func notified(_ address: BluetoothAddress, handle: UInt32, _ bytes: [UInt8]) {
        perform(links.notified(address, handle: handle, bytes))
    }

    /// The devices linked for Home Assistant (the Bluetooth side routes their events here).
    public var linkedAddresses: Set<BluetoothAddress> { links.addresses }

    /// The scheduler's slots may have changed: clients that asked are told if they did.
    public func slotsChanged() {
        let slots = bluetooth?.slots() ?? (free: 0, limit: 0)
        perform(links.slots(free: slots.free, limit: slots.limit))
    }

    private func asked(_ action: ProxySession.Action, by client: ProxiedLinks.Client) {
        switch action {
        case .sendDevicesHeard:
            guard let connection = connections[client] else { return }
            send(devicesHeard(), to: [connection])
        case .sendSlots:
            let slots = bluetooth?.slots() ?? (free: 0, limit: 0)
            perform(links.slotsWanted(by: client, free: slots.free, limit: slots.limit))
        case .device(let request):
            perform(links.requested(client, request, free: (bluetooth?.slots().free ?? 0) > 0))
            slotsChanged()
        case .gatt(let address, let operation):
            perform(links.requested(client, address, operation))
        case .send, .close, .end:
            break
        }
    }

    private func perform(_ actions: [ProxiedLinks.Action]) {
        for action in actions {
            switch action {
            case .send(let client, let type, let payload):
                connections[client]?.send(type: type, payload: payload)
            case .connect(let address, let randomAddress):
                guard let bluetooth else {
                    perform(links.unlinked(address, failure: BlueZError(.notReady)))
                    continue
                }
                bluetooth.connect(address, randomAddress: randomAddress) { [weak self] result in
                    guard let self else { return }
                    switch result {
                    case .success(let mtu): perform(links.linked(address, mtu: mtu))
                    case .failure(let error): perform(links.unlinked(address, failure: error))
                    }
                    slotsChanged()
                }
            case .disconnect(let address):
                bluetooth?.disconnect(address)
            case .perform(let client, let address, let operation):
                guard let bluetooth else { continue }
                bluetooth.perform(operation, on: address) { [weak self] result in
                    guard let self else { return }
                    perform(links.performed(client, address, operation, result))
                }
            case .change(let client, let address, let change):
                guard let bluetooth else {
                    perform(links.changed(client, address, change, .failure(BlueZError(.notReady))))
                    continue
                }
                bluetooth.change(change, of: address) { [weak self] result in
                    guard let self else { return }
                    perform(links.changed(client, address, change, result))
                }
            }
        }
    }

    private func flush() {
        if let flushTimer { loop.cancel(flushTimer) }
        flushTimer = nil
        guard !pending.isEmpty else { return }
        send(pending, to: connections.values.filter { $0.isOpen && $0.session.advertisementsWanted })
        pending.removeAll(keepingCapacity: true)
    }

    /// Advertisements to `clients` in batches, counted once whatever their
    /// number (a new subscriber's devices heard so far included).
    private func send(_ advertisements: [BluetoothLERawAdvertisement], to clients: [ProxyConnection]) {
        if !clients.isEmpty { advertisementsPassedOn += advertisements.count }
        for start in stride(from: 0, to: advertisements.count, by: Self.batchSize) {
            var batch = BluetoothLERawAdvertisementsResponse()
            batch.advertisements = Array(advertisements[start..<min(start + Self.batchSize, advertisements.count)])
            for connection in clients { connection.send(batch) }
        }
    }
}
