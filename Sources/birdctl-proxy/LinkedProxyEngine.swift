import Bird
import BirdctlCLI
import BlueZ
import DBus
import Health
import Proxy

/// The proxy as the CLI's `ProxyEngine`: the server on the loop, Home
/// Assistant's links as the watch's guest links, every device heard as a
/// rebuilt advertisement. Loop-confined.
final class LinkedProxyEngine: ProxyEngine, @unchecked Sendable {
    private let server: ProxyServer
    private let guests: GuestBluetooth

    static func key(base64 text: String) -> [UInt8]? { NoiseKey(base64: text)?.bytes }

    init(
        loop: EventLoop, host: String?, port: UInt16, key: [UInt8]?, central: CentralDriver,
        identify: @escaping () -> ProxyIdentity?, said: @escaping (String) -> Void
    ) throws(TCPListener.ListenError) {
        server = try ProxyServer(
            loop: loop, configuration: .init(host: host, port: port, key: key.flatMap(NoiseKey.init(bytes:))),
            identify: {
                identify().map {
                    ProxySession.Identity(name: $0.name, friendlyName: $0.friendlyName, macAddress: $0.macAddress, birdctlVersion: $0.version)
                }
            }, said: said)
        server.devicesHeard = { [weak central] in
            (central?.devicesHeard() ?? []).compactMap(HeardDevice.init).map(RebuiltAdvertisement.of)
        }
        guests = GuestBluetooth(driver: central, server: server)
        server.bluetooth = guests
    }

    var port: UInt16 { server.port }

    func heard(_ device: Device) {
        guard let heard = HeardDevice(device) else { return }
        server.advertise(RebuiltAdvertisement.of(heard))
    }

    func stop() { server.stop() }

    var health: ProxyHealth {
        ProxyHealth(
            clients: server.clientCount, clientsDropped: server.clientsDropped, advertisements: server.advertisementsPassedOn,
            links: server.linkCount, connects: Dictionary(uniqueKeysWithValues: server.connectsEnded.map { ($0.key.rawValue, $0.value) }))
    }
}
