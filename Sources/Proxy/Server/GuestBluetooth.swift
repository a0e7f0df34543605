import Bird
import BlueZ
import DBus

/// The proxy's Bluetooth side on BlueZ: Home Assistant's links are the
/// central driver's guest links (through its scheduler and Connect gate),
/// GATT requests go to BlueZ's objects by `GATTTable`, and notifications
/// come back from the characteristics a client subscribed to: through a
/// socket where bluetoothd offers one (AcquireNotify), else as signals.
/// Loop-confined.
public final class GuestBluetooth: ProxyBluetooth, @unchecked Sendable {
    private let driver: CentralDriver
    private unowned let server: ProxyServer
    /// Each linked device's object in BlueZ.
    private var devices: [BluetoothAddress: ObjectPath] = [:]
    /// Each linked device's GATT table, made as its link comes up (a client
    /// that keeps the services itself asks by handle without asking for
    /// them: remote caching) and again when a client asks for the services.
    private var tables: [BluetoothAddress: GATTTable] = [:]
    private let notifications: GuestNotifications
    /// Devices whose cache a client cleared: BlueZ drops it with the
    /// device's object, once their link is down.
    private var uncacheWhenUnlinked: Set<BluetoothAddress> = []

    /// The ATT MTU said when BlueZ does not say one (the smallest there is).
    static let defaultMTU = 23

    public init(driver: CentralDriver, server: ProxyServer) {
        self.driver = driver
        self.server = server
        notifications = GuestNotifications(driver: driver) { [unowned server] address, handle, value in
            server.notified(address, handle: handle, value)
        }
        driver.onGuestUnlinked = { [unowned self] address in
            forget(address)
            if uncacheWhenUnlinked.remove(address) != nil { driver.uncache(address) }
            server.unlinked(address)
        }
        driver.onGuestValue = { [unowned self] characteristic, value in notifications.signalled(characteristic, value) }
        driver.onGuestSlotsChanged = { server.slotsChanged() }
    }

    public func slots() -> (free: Int, limit: Int) { driver.guestSlots() }

    public func connect(_ address: BluetoothAddress, randomAddress: Bool?, linked: @escaping @Sendable (Result<Int, BlueZError>) -> Void) {
        driver.connectGuest(address, randomAddress: randomAddress) { [unowned self] result in
            switch result {
            case .success(let device):
                devices[address] = device
                tables[address] = table(of: device)
                mtu(of: device) { linked(.success($0)) }
            case .failure(let error):
                linked(.failure(error))
            }
        }
    }

    public func disconnect(_ address: BluetoothAddress) {
        forget(address)
        driver.disconnectGuest(address)
    }

    public func perform(
        _ operation: ProxiedLinks.Operation, on address: BluetoothAddress, done: @escaping @Sendable (Result<ProxiedLinks.Outcome, BlueZError>) -> Void
    ) {
        guard let device = devices[address] else { return done(.failure(BlueZError(.notConnected))) }
        let client = driver.bluez
        if case .services = operation {
            let table = table(of: device)
            tables[address] = table
            return done(.success(.services(table.services)))
        }
        // A handle of nothing in the table: asked again of BlueZ's objects now
        // (services resolved late, or changed), then ATT's Invalid Handle.
        if tables[address]?.target(operation.handle) == nil { tables[address] = table(of: device) }
        guard let target = tables[address]?.target(operation.handle) else {
            return done(.failure(BlueZError(.invalidArguments, message: "no attribute with handle \(operation.handle)")))
        }
        let answered: @Sendable (Result<Void, BlueZError>) -> Void = { done($0.map { .done }) }
        switch (operation, target) {
        case (.read, .characteristic(let path)), (.readDescriptor, .characteristic(let path)):
            notifications.reading(path)
            client.perform(.readValue(characteristic: path)) { [unowned self] result in
                notifications.read(path)
                done(result.map { .bytes($0) })
            }
        case (.read, .descriptor(let path, _, _)), (.readDescriptor, .descriptor(let path, _, _)):
            client.perform(.readDescriptor(path)) { done($0.map { .bytes($0) }) }
        case (.write(_, let data, let response), .characteristic(let path)):
            client.perform(.writeValue(characteristic: path, data, type: response ? .request : .command), completion: answered)
        case (.writeDescriptor(_, let data), .descriptor(_, let characteristic, true)),
            (.write(_, let data, _), .descriptor(_, let characteristic, true)):
            // BlueZ writes the configuration itself: notifications on (01 00, or 02 00 to indicate) or off.
            subscribe(characteristic, address, on: data.first.map { $0 & 0x03 != 0 } ?? false, done: answered)
        case (.writeDescriptor(_, let data), .descriptor(let path, _, false)), (.write(_, let data, _), .descriptor(let path, _, false)):
            client.perform(.writeDescriptor(path, data), completion: answered)
        case (.notify(_, let enable), .characteristic(let path)):
            subscribe(path, address, on: enable, done: answered)
        default:
            done(.failure(BlueZError(.notSupported, message: "not an operation of that attribute")))
        }
    }

    /// Pairing asks birdctl's agent; unpairing forgets the device (its bond,
    /// its cached services and so its link); the cache goes with the
    /// device's object once the link is down, as ESP-IDF's cleaning takes
    /// effect at the next link. BlueZ keeps a bonded device's cache with its
    /// bond: clearing it is refused (unpairing clears both).
    public func change(_ change: ProxiedLinks.DeviceChange, of address: BluetoothAddress, done: @escaping @Sendable (Result<Void, BlueZError>) -> Void) {
        guard let device = devices[address] else { return done(.failure(BlueZError(.notConnected))) }
        switch change {
        case .pair:
            driver.pairGuest(device, done: done)
        case .unpair:
            driver.unpairGuest(device, done: done)
        case .clearCache:
            guard driver.bluez.tree.device(device)?.paired != true else {
                return done(.failure(BlueZError(.notSupported, message: "BlueZ keeps a bonded device's cache with its bond")))
            }
            uncacheWhenUnlinked.insert(address)
            done(.success(()))
        }
    }

    /// Notifications of a characteristic on or off for its link's client.
    private func subscribe(_ path: ObjectPath, _ address: BluetoothAddress, on: Bool, done: @escaping @Sendable (Result<Void, BlueZError>) -> Void) {
        guard on else { return notifications.off(path) { done(.success(())) } }
        guard let handle = tables[address]?.handle(of: path) else { return done(.failure(BlueZError(.doesNotExist))) }
        notifications.on(path, of: address, handle: handle, done: done)
    }

    /// The device's GATT database as BlueZ holds it now.
    private func table(of device: ObjectPath) -> GATTTable {
        let tree = driver.bluez.tree
        return GATTTable(
            services: tree.services(of: device), characteristics: tree.characteristics(under: device),
            descriptors: tree.descriptors(under: device))
    }

    /// The link's ATT MTU: as BlueZ says it on a characteristic of the device.
    private func mtu(of device: ObjectPath, _ body: @escaping @Sendable (Int) -> Void) {
        guard let characteristic = driver.bluez.tree.characteristics(under: device).first?.path else { return body(Self.defaultMTU) }
        driver.bluez.perform(.characteristicMTU(characteristic: characteristic)) { result in
            body((try? result.get()).flatMap { $0 } ?? Self.defaultMTU)
        }
    }

    private func forget(_ address: BluetoothAddress) {
        devices[address] = nil
        tables[address] = nil
        notifications.linkEnded(address)
    }
}
