import BlueZ
import DBus

/// What the driver asks BlueZ about devices, and the Disconnects of a reset.
extension CentralDriver {
    /// Disconnects each device, then calls `body` once every Disconnect is answered.
    func disconnectAll(_ devices: [ObjectPath], then body: @escaping @Sendable () -> Void) {
        guard let device = devices.first else { return body() }
        client.perform(.disconnect(device: device)) { [self] _ in disconnectAll(Array(devices.dropFirst()), then: body) }
    }

    /// The bird at `address` if BlueZ already knows it on this adapter.
    func knownBird(_ address: String, on adapter: ObjectPath) -> Sighting? {
        guard let device = client.tree.device(address: address, on: adapter)
        else { return nil }
        let sighting = Sighting(known: device)
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
}
