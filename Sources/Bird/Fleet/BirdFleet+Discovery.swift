import BlueZ
import DBus

/// `watch --all` and discovery that hears nothing: the fleet's side of
/// `DiscoveryWatchdog`.
extension BirdFleet {
    /// The adapters the fleet uses now: the pool's usable ones, or the chosen adapter if powered.
    var usableAdapters: [AdapterChoice] {
        pool?.usable ?? bluetooth.adapter.flatMap { $0.powered ? [$0] : nil } ?? []
    }

    /// A window of the watchdog ended: each deaf adapter has its discovery
    /// restarted, or, stalled, its connected devices counted (answered by
    /// `deafAdapterChecked`). One being powered off and on already is left alone.
    mutating func discoveryWindowEnded() -> [Action] {
        guard outcome == nil, let window = bluetooth.watchdog?.window,
            let deaf = bluetooth.windowEnded(
                usableAdapters.map(\.path), lookingFor: machines.contains { $0.central.isScanning || $0.central.isFinding })
        else { return [] }
        var actions: [Action] = []
        for deafness in deaf where scheduler?.isResetting(deafness.adapter) != true {
            switch deafness.step {
            case .restart:
                actions += discoveryRestarted(deafness.adapter, silentFor: deafness.silentFor, stalled: false)
            case .stalled:
                actions.append(.checkDeafAdapter(deafness.adapter, silentFor: deafness.silentFor))
            }
        }
        return actions + [.armTimer(.discoveryWatch, window)]
    }

    /// A stalled adapter has `connected` devices connected on it (any
    /// program's, as BlueZ counts them): with none it is powered off and on,
    /// as a wedged one is (no attempt meanwhile, its learned limit kept);
    /// else its discovery is restarted again.
    public mutating func deafAdapterChecked(_ adapter: ObjectPath, silentFor: Duration, connected: Int) -> [Action] {
        guard outcome == nil, var scheduler else { return [] }
        guard connected == 0 else { return discoveryRestarted(adapter, silentFor: silentFor, stalled: true) }
        // Being reset meanwhile: that power cycle will do.
        guard scheduler.resetting(adapter) else { return [] }
        self.scheduler = scheduler
        return [
            .report(.discoveryDeaf(adapter: AdapterPool.name(ofAdapter: adapter), silentFor: silentFor, stalled: true, powerCycle: true)),
            .resetAdapter(adapter),
        ]
    }

    /// Discovery could not be restarted on the adapter: said; the next
    /// window tries again (or powers it off and on).
    public mutating func discoveryRestartFailed(_ adapter: ObjectPath, _ error: BlueZError) -> [Action] {
        guard outcome == nil else { return [] }
        return [.report(.waiting("could not restart discovery on \(AdapterPool.name(ofAdapter: adapter)): \(error)"))]
    }

    private func discoveryRestarted(_ adapter: ObjectPath, silentFor: Duration, stalled: Bool) -> [Action] {
        [
            .report(.discoveryDeaf(adapter: AdapterPool.name(ofAdapter: adapter), silentFor: silentFor, stalled: stalled, powerCycle: false)),
            .restartDiscovery(adapter),
        ]
    }
}
