import Bird
import BirdctlCLI
import BlueZ
import DBus
import Health
import Proxy

/// The proxy as the CLI's `ProxyEngine`: the server on the loop, Home
/// Assistant's links as the watch's guest links, every device heard as the
/// kernel reported it (the management channel, where birdctl may listen
/// there), else as an advertisement rebuilt from BlueZ. Loop-confined.
final class LinkedProxyEngine: ProxyEngine, @unchecked Sendable {
    private let server: ProxyServer
    private let guests: GuestBluetooth
    private var kernel: KernelAdvertisements?

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
        // A bluetoothd on another bus than the system's (a test's fake) is not this kernel's.
        guard Connection.isStandardSystemBus else {
            said("proxy: advertisements rebuilt from BlueZ (bluetoothd is not on the system bus)")
            return
        }
        switch KernelAdvertisements.open(
            loop: loop, inUse: { [weak central] in central?.isInUse(adapterIndex: $0) ?? false },
            heard: { [server] in server.advertise($0) })
        {
        case .success(let kernel):
            self.kernel = kernel
            said("proxy: advertisements as the kernel reports them (its Bluetooth management channel)")
        case .failure(let reason):
            said("proxy: advertisements rebuilt from BlueZ (the kernel's Bluetooth management channel: \(reason))")
        }
    }

    var port: UInt16 { server.port }

    func heard(_ device: Device) {
        guard kernel?.covers(adapter: device.adapter) != true, let heard = HeardDevice(device) else { return }
        server.advertise(RebuiltAdvertisement.of(heard))
    }

    func stop() {
        kernel?.close()
        server.stop()
    }

    var health: ProxyHealth {
        ProxyHealth(
            clients: server.clientCount, clientsDropped: server.clientsDropped, advertisements: server.advertisementsPassedOn,
            links: server.linkCount, connects: Dictionary(uniqueKeysWithValues: server.connectsEnded.map { ($0.key.rawValue, $0.value) }))
    }
}
