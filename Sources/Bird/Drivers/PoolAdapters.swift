import BlueZ
import DBus

/// The I/O side of several adapters as one pool (`--adapter hci0,hci1`,
/// `--adapter all`), for a driver: which of BlueZ's adapters are in the pool,
/// and discovery (with the same filter) on each of them. What to do with them
/// is the fleet's (`AdapterPool`). Loop-confined.
final class PoolAdapters: @unchecked Sendable {
    private let client: BlueZClient
    let options: AdapterOptions
    /// The pool's adapters as last looked at (present ones, powered or not).
    private(set) var members: [AdapterChoice] = []
    /// Their paths, for the per-sighting check.
    private var paths: Set<ObjectPath> = []
    private var discoveries: [ObjectPath: Discovery] = [:]
    /// Adapters asked to power on (`--power-on`), once each while they are present.
    private var poweringOn: Set<ObjectPath> = []

    init(client: BlueZClient, options: AdapterOptions) {
        self.client = client
        self.options = options
    }

    /// What `noAdapter` names when none of the pool is there.
    var requested: String? { options.pool?.joined(separator: " or ") }

    /// Looks at BlueZ's adapters again: the pool's members now. Discovery on
    /// an adapter that is gone or powered off is forgotten (it went with it);
    /// with `--power-on`, an adapter of the pool that is off is powered on.
    @discardableResult
    func refresh(onPowerFailure: @escaping @Sendable (CommandFailure) -> Void) -> [AdapterChoice] {
        let now = options.members(of: client.tree.adapterChoices)
        for old in members where !now.contains(where: { $0.path == old.path && $0.powered }) {
            discoveries[old.path]?.forget()
        }
        poweringOn = poweringOn.filter { path in now.contains { $0.path == path } }
        if options.powerOn {
            for adapter in now where !adapter.powered && poweringOn.insert(adapter.path).inserted {
                client.perform(.setPowered(adapter: adapter.path, true)) { result in
                    if case .failure(let error) = result { onPowerFailure(.failed("power on \(adapter.name)", error)) }
                }
            }
        }
        members = now
        paths = Set(now.map(\.path))
        return now
    }

    /// bluetoothd went away: discovery with it.
    func forgetAll() {
        for discovery in discoveries.values { discovery.forget() }
        members = []
        paths = []
        poweringOn = []
    }

    /// Whether a device object lies under an adapter of the pool.
    func holds(_ device: ObjectPath) -> Bool { device.parent.map(paths.contains) ?? false }

    /// Whether this adapter is (or, added, would be) one of the pool's.
    func isMember(_ adapter: Adapter) -> Bool { options.pool?.contains(adapter.interfaceName) ?? true }

    /// The powered members whose discovery is not on (`startDiscovery` starts it there).
    var adaptersNotDiscovering: [ObjectPath] {
        members.filter { $0.powered && discoveries[$0.path]?.isOn != true }.map(\.path)
    }

    /// Discovery on every powered adapter of the pool (those already on are left alone).
    func startDiscovery(onStarted: @escaping @Sendable ([Sighting]) -> Void, onFailure: @escaping @Sendable (BlueZError) -> Void) {
        for adapter in members where adapter.powered {
            discovery(adapter.path).start(on: adapter.path, onStarted: onStarted, onFailure: onFailure)
        }
    }

    /// Discovery off and on on one adapter of the pool; false if it is not on there.
    func restartDiscovery(
        on adapter: ObjectPath, onStarted: @escaping @Sendable ([Sighting]) -> Void, onFailure: @escaping @Sendable (BlueZError) -> Void
    ) -> Bool {
        guard let discovery = discoveries[adapter], discovery.isOn else { return false }
        discovery.stop()
        discovery.start(on: adapter, onStarted: onStarted, onFailure: onFailure)
        return true
    }

    /// Discovery off on every adapter it was started on; `done` runs for each answer (see `DriverCore.cleanup`).
    func stopDiscovery(_ cleanup: ((@escaping @Sendable () -> Void) -> Void) -> Void) {
        for discovery in discoveries.values where discovery.isOn {
            cleanup { done in discovery.stop(done: done) }
        }
    }

    /// Runs `body` once the discovery calls pending on the device's adapter are answered.
    func afterPending(on device: ObjectPath, _ body: @escaping () -> Void) {
        guard let adapter = device.parent, let discovery = discoveries[adapter] else { return body() }
        discovery.afterPending(body)
    }

    private func discovery(_ adapter: ObjectPath) -> Discovery {
        if let discovery = discoveries[adapter] { return discovery }
        let discovery = Discovery(client: client, everyDevice: options.hearsEveryDevice)
        discoveries[adapter] = discovery
        return discovery
    }
}
