import BlueZ
import DBus

/// What the driver asks BlueZ about devices, and the Disconnects and power cycle of a reset.
extension CentralDriver {
    /// Disconnects each device, then calls `body` once every Disconnect is answered.
    func disconnectAll(_ devices: [ObjectPath], then body: @escaping @Sendable () -> Void) {
        guard let device = devices.first else { return body() }
        client.perform(.disconnect(device: device)) { [self] _ in disconnectAll(Array(devices.dropFirst()), then: body) }
    }

    /// The bird at `address` if BlueZ already knows it on this adapter.
    func knownBird(_ address: BluetoothAddress, on adapter: ObjectPath) -> Sighting? {
        guard let device = client.tree.device(address: address.description, on: adapter), let sighting = Sighting(known: device)
        else { return nil }
        return sighting.isBird ? sighting : nil
    }

    /// The devices connected on an adapter. A tree that does not hold every
    /// device asks BlueZ for all (a rare path: a connect deadline).
    func connectedDevices(on adapter: ObjectPath, _ body: @escaping @Sendable ([ObjectPath]) -> Void) {
        guard !client.holdsEveryDevice else {
            return body(client.tree.devicesInRange(on: adapter).filter(\.connected).map(\.path))
        }
        client.perform(.getManagedObjects()) { result in
            body((try? result.get())?.devicesInRange(on: adapter).filter(\.connected).map(\.path) ?? [])
        }
    }

    /// Powers the adapter off and on (a reset), then `done`. Each step may be
    /// refused once (powering off while the controller still answers a
    /// cancelled connection attempt) and is tried once more; then `failed`.
    func powerCycle(
        _ adapter: ObjectPath, on: Bool = false, triesLeft: Int, failed: @escaping @Sendable (BlueZError) -> Void,
        done: @escaping @Sendable () -> Void
    ) {
        client.perform(.setPowered(adapter: adapter, on)) { [self] result in
            switch result {
            case .success where !on:
                powerCycle(adapter, on: true, triesLeft: 2, failed: failed, done: done)
            case .success:
                done()
            case .failure where triesLeft > 1:
                powerCycle(adapter, on: on, triesLeft: triesLeft - 1, failed: failed, done: done)
            case .failure(let error):
                failed(error)
                done()
            }
        }
    }
}
