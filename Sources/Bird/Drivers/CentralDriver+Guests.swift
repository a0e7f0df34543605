import BlueZ
import DBus

/// Links for a guest — Home Assistant, through the proxy — to devices that
/// are not birds: asked of the fleet, which lets them through its scheduler
/// and gate like a bird's (`BirdFleet+Guests`). What the guest does on a
/// link (GATT) it asks BlueZ itself, through `bluez`. On the loop.
extension CentralDriver {
    /// BlueZ, for what a guest does on its links.
    public var bluez: BlueZClient { client }

    /// The guest's free links and their limit now.
    public func guestSlots() -> (free: Int, limit: Int) {
        loop.assertInLoop()
        return fleet.guestSlots
    }

    /// A link to the device at `address`, through the adapter in use that
    /// hears it best; `linked` gets its object once the link is up with its
    /// services resolved, or why there is none.
    public func connectGuest(
        _ address: BluetoothAddress, randomAddress: Bool?, linked: @escaping (Result<ObjectPath, BlueZError>) -> Void
    ) {
        loop.assertInLoop()
        let heard = adaptersInUse.compactMap { client.tree.device(address: address.description, on: $0) }
            .filter { $0.hasSignal && (randomAddress == nil || ($0.addressType == "random") == randomAddress) }
        guard let device = heard.max(by: { ($0.rssi ?? -127) < ($1.rssi ?? -127) }) else {
            return linked(.failure(BlueZError(.doesNotExist, message: "\(address) is not heard")))
        }
        guestReplies[address] = linked
        apply { $0.guestConnect(address, device: device.path) }
    }

    /// The guest lets go of its link to `address` (or of the attempt).
    public func disconnectGuest(_ address: BluetoothAddress) {
        loop.assertInLoop()
        guestReplies[address] = nil
        apply { $0.guestDisconnect(address) }
    }

    /// Pairs the guest's linked device (birdctl's agent answers for it: Just
    /// Works, unless the watch asks a person, who is asked only about birds),
    /// within `guestPairLimit`. bluetoothd 5.66 may leave a Pair unanswered
    /// whose bonding completed: a device found paired when it fails counts
    /// as paired; one that is not has its pairing cancelled.
    public func pairGuest(_ device: ObjectPath, done: @escaping @Sendable (Result<Void, BlueZError>) -> Void) {
        loop.assertInLoop()
        withAgent { [self] registered in
            guard case .success = registered else { return done(registered) }
            let limit = min(fleet.configuration.pairTimeout, Self.guestPairLimit)
            client.perform(.pair(device: device, timeout: limit)) { [self] result in
                guard case .failure(let error) = result else { return done(result) }
                if error.kind == .alreadyExists || client.tree.device(device)?.paired == true { return done(.success(())) }
                if error.kind == .timeout { client.perform(.cancelPairing(device: device)) { _ in } }
                done(result)
            }
        }
    }

    /// How long a guest's Pair may take: Home Assistant's client gives up
    /// after 30 s, and must hear the answer before.
    static let guestPairLimit = Duration.seconds(20)

    /// Forgets the guest's device on its adapter: its bond, its cached
    /// services and its link (BlueZ's RemoveDevice); the device is found
    /// again when it next advertises.
    public func unpairGuest(_ device: ObjectPath, done: @escaping @Sendable (Result<Void, BlueZError>) -> Void) {
        loop.assertInLoop()
        client.perform(.removeDevice(adapter: AdapterPool.adapter(of: device), device: device)) { result in
            if case .failure(let error) = result, error.kind == .doesNotExist || error.kind == .notFound { return done(.success(())) }
            done(result)
        }
    }

    /// Drops what BlueZ keeps of the device at `address` on every adapter
    /// where it is neither bonded nor connected (its object, with its cached
    /// services); bonds and links stay.
    public func uncache(_ address: BluetoothAddress) {
        loop.assertInLoop()
        for adapter in client.tree.adapters {
            guard let device = client.tree.device(address: address.description, on: adapter.path), !device.paired, !device.connected
            else { continue }
            client.perform(.removeDevice(adapter: adapter.path, device: device.path)) { _ in }
        }
    }

    /// Notifications of a characteristic on a guest's link, as a bird's are
    /// subscribed (`--notify-method`: a socket where bluetoothd offers one,
    /// else signals). Values from a socket go to `notified`; those from
    /// signals come as `onGuestValue`, with the values a read announces.
    public func subscribeGuest(
        _ characteristic: ObjectPath, notified: @escaping @Sendable ([UInt8]) -> Void,
        done: @escaping @Sendable (Result<Void, BlueZError>) -> Void
    ) {
        loop.assertInLoop()
        subscriptions.subscribe(characteristic, notified: { _, value, _ in notified(value) }, completion: done)
    }

    /// Whether a guest's subscription to `characteristic` has a socket:
    /// then its signals are only the values reads announce.
    public func guestNotificationsAcquired(_ characteristic: ObjectPath) -> Bool {
        loop.assertInLoop()
        return subscriptions.isAcquired(characteristic)
    }

    /// Ends a guest's subscription (its socket closed once bluetoothd has ended it).
    public func unsubscribeGuest(_ characteristic: ObjectPath, done: @escaping @Sendable () -> Void) {
        loop.assertInLoop()
        subscriptions.unsubscribe(characteristic, done: done)
    }

    /// After each event: the guest is told its free slots if they changed.
    func guestSlotsMayHaveChanged() {
        let slots = fleet.guestSlots
        guard guestSlotsTold.map({ $0 != slots }) ?? true else { return }
        guestSlotsTold = slots
        onGuestSlotsChanged?()
    }
}
