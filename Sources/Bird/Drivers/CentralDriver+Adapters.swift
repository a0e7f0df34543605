import BlueZ
import DBus

/// What the driver tells of its adapters, on the loop: their health, and
/// the devices they hear.
extension CentralDriver {
    /// The adapters in use: the pool's, or the one chosen.
    var adaptersInUse: [ObjectPath] { pool?.members.map(\.path) ?? core.adapter.map { [$0.path] } ?? [] }

    /// Whether the kernel's adapter `index` (bluetoothd's `hciN`) is one in
    /// use. Asked per advertisement: no array of paths is made for it.
    public func isInUse(adapterIndex index: UInt16) -> Bool {
        loop.assertInLoop()
        let name = "/hci\(index)"
        guard let pool else { return core.adapter?.path.rawValue.hasSuffix(name) ?? false }
        return pool.members.contains { $0.path.rawValue.hasSuffix(name) }
    }

    /// Each adapter in use, and those tried before: links, limit and counts (on the loop).
    public func adapterHealth() -> [AdapterHealth] {
        loop.assertInLoop()
        return counters.health(with: adaptersInUse).map { path, counted in
            var health = counted
            health.address = client.tree.adapters.first { $0.path == path }.flatMap { BluetoothAddress($0.address) }
            health.links = fleet.linksUp(on: path).up
            (health.limit, health.limitLearned) = fleet.linkLimit(on: path)
            return health
        }
    }

    /// The devices heard advertising through the adapters in use in this
    /// discovery, Bird or not, as BlueZ holds them now: a proxy's new
    /// subscriber learns of them before their next change.
    public func devicesHeard() -> [Device] {
        loop.assertInLoop()
        return adaptersInUse.flatMap { client.tree.devicesInRange(on: $0).filter(\.hasSignal) }
    }
}
