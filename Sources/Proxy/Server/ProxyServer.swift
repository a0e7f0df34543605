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
        public var identity: ProxySession.Identity
        public var maximumClients = 4
        /// What may wait to be sent to one client before it is dropped as too slow.
        public var maximumQueued = 1 << 20

        public init(host: String?, port: UInt16, key: NoiseKey?, identity: ProxySession.Identity) {
            (self.host, self.port, self.key, self.identity) = (host, port, key, identity)
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
    public var port: UInt16 { server.port }
    public var clientCount: Int { connections.count }

    /// `said` gets a line for the log: a client dropped, and why.
    public init(loop: EventLoop, configuration: Configuration, said: @escaping (String) -> Void) throws(TCPListener.ListenError) {
        loop.assertInLoop()
        self.loop = loop
        server = try StreamServer(
            loop: loop, host: configuration.host, port: configuration.port, maximumClients: configuration.maximumClients,
            maximumQueued: configuration.maximumQueued
        ) { [unowned self] stream in
            let connection = ProxyConnection(stream: stream, loop: loop, key: configuration.key?.bytes, identity: configuration.identity) {
                said("proxy: a client was dropped: \($0)")
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
        let subscribed = connections.values.filter { $0.isOpen && $0.session.advertisementsWanted }
        for start in stride(from: 0, to: pending.count, by: Self.batchSize) {
            var batch = BluetoothLERawAdvertisementsResponse()
            batch.advertisements = Array(pending[start..<min(start + Self.batchSize, pending.count)])
            for connection in subscribed { connection.send(batch) }
        }
        pending.removeAll(keepingCapacity: true)
    }
}
