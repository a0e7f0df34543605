import Bird
import DBus

/// The ESPHome native API served on the loop: Home Assistant connects (at
/// most `maximumClients` at once), and the advertisements heard go to each
/// client that subscribed, in one batch per loop wake-up. Loop-confined.
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

    /// At most this many advertisements wait for the next batch (the oldest go first).
    static let maximumPending = 256
    /// Advertisements per message, as ESPHome sends them: a message stays
    /// far below a frame's 64 KiB whatever the peers advertise.
    static let batchSize = 16

    private let loop: EventLoop
    private var server: StreamServer!
    private var connections: [ObjectIdentifier: ProxyConnection] = [:]
    private var pending: [BluetoothLERawAdvertisement] = []
    /// Who the proxy says it is, once known: it never changes after (Home
    /// Assistant keys the proxy on its MAC address).
    private var identity: ProxySession.Identity?
    /// The advertisements of the devices heard now, for a client that just subscribed.
    public var devicesHeard: () -> [BluetoothLERawAdvertisement] = { [] }
    public var port: UInt16 { server.port }
    public var clientCount: Int { connections.count }

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
                said("proxy: a client was dropped: \($0)")
            }
            connection.onAdvertisementsWanted = { [unowned self, unowned connection] in
                send(devicesHeard(), to: [connection])
            }
            let id = ObjectIdentifier(connection)
            connections[id] = connection
            let ended = stream.onClose
            stream.onClose = { [unowned self] in
                ended?()
                connections[id] = nil
            }
        }
        loop.addBeforePollHook { [weak self] in self?.flush() }
    }

    /// Released on the loop, or after `stop()` there.
    deinit { stop() }

    /// Clients that asked for advertisements.
    public var advertisementSubscribers: Int {
        connections.values.filter { $0.isOpen && $0.session.advertisementsWanted }.count
    }

    /// An advertisement as heard; it goes out with the next batch.
    public func advertise(_ advertisement: BluetoothLERawAdvertisement) {
        guard connections.values.contains(where: { $0.isOpen && $0.session.advertisementsWanted }) else { return }
        if pending.count >= Self.maximumPending { pending.removeFirst() }
        pending.append(advertisement)
    }

    public func stop() {
        server.stop()
    }

    private func flush() {
        guard !pending.isEmpty else { return }
        send(pending, to: connections.values.filter { $0.isOpen && $0.session.advertisementsWanted })
        pending.removeAll(keepingCapacity: true)
    }

    private func send(_ advertisements: [BluetoothLERawAdvertisement], to clients: [ProxyConnection]) {
        for start in stride(from: 0, to: advertisements.count, by: Self.batchSize) {
            var batch = BluetoothLERawAdvertisementsResponse()
            batch.advertisements = Array(advertisements[start..<min(start + Self.batchSize, advertisements.count)])
            for connection in clients { connection.send(batch) }
        }
    }
}
