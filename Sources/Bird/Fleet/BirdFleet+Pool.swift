import BlueZ
import DBus

/// `watch --all` with several adapters as one pool: the fleet's side of
/// `AdapterPool`. Each machine is given the sighting of its bird under the
/// adapter the pool chooses; the choice is made when the machine is about
/// to connect, never per notification.
extension BirdFleet {
    /// The pool's adapters as they are now (those present, powered or not),
    /// at start and at every change (added, removed, powered on or off). The
    /// fleet sees the pool as one adapter — usable while any of its adapters
    /// is — and an adapter that goes hands its birds to the others.
    public mutating func adaptersChanged(_ adapters: [AdapterChoice], requested: String?) -> [Action] {
        guard outcome == nil, pool != nil else { return [] }
        let before = Set(pool!.usable.map(\.path))
        let lost = pool!.update(adapters)
        let usable = pool!.usable
        let primary = usable.first ?? adapters.first
        var actions: [Action] = []
        // The links of an adapter that went are gone with it (its
        // Connected=false may come after this, or never for a removed one).
        for adapter in lost {
            // Removed (not only powered off): another controller may come under its name.
            if !adapters.contains(where: { $0.path == adapter.path }) { bluetooth.removed(adapter.path) }
            for (id, central) in machines {
                if let device = central.currentDevice, AdapterPool.adapter(of: device) == adapter.path, runs(id) {
                    actions += deviceDisconnected(device)
                }
            }
            machines.linksGone(on: adapter.path)
            actions += guestsLost(on: adapter.path)
        }
        if usable.isEmpty {
            guard bluetooth.everReady else { return actions + bluetoothReady(adapter: primary, requested: requested) }
            guard !before.isEmpty else { return actions }
            if let primary { return actions + adapterPoweredOff(primary) }
            return actions + adapterRemoved(name: lost.first?.name ?? "")
        }
        if before.isEmpty { return actions + bluetoothReady(adapter: primary, requested: requested) + feedHandOvers() }
        bluetooth.adapter = primary
        let added = usable.filter { !before.contains($0.path) }
        if bluetooth.discovering && !added.isEmpty {
            // Discovery on the adapters that came, and their given limit said.
            actions.append(.startScanning(nil, lookUpKnown: nil))
            // As after any adapter's return: the next attempt waits a random gap.
            actions += linksRestarting(adapters: added.map(\.path)) + recallLimits(added)
            if let limit = scheduler?.policy.links {
                actions += added.map { .report(.links(adapter: $0.name, used: 0, limit: limit, learned: false)) }
            }
        }
        return actions + feedHandOvers()
    }

    /// `pool`: the sighting of a bird the fleet follows. A machine looking
    /// for its bird gets the sighting under the adapter the pool chooses —
    /// once every adapter heard it, or after the listening window; one
    /// connecting or linked only those under its own device's adapter.
    mutating func pooledSighting(_ sighting: Sighting, of id: MachineID) -> [Action] {
        pool?.heard(sighting)
        guard let central = machines.central(id) else { return [] }
        guard central.isScanning else {
            guard central.currentDevice == sighting.device else { return [] }
            machines.sighted(id, sighting)
            return on(id) { $0.deviceSighted(sighting) }
        }
        let address = sighting.address
        if pool?.heardByAll(address) == true {
            pool?.stopListening(address)
            return feed(id)
        }
        guard pool?.listen(address) == true else { return [] }
        return [.armTimer(.listen(address), listeningWindow)]
    }

    private var listeningWindow: Duration { configuration.listeningWindow ?? BirdCentral.defaultListeningWindow }

    /// Machine `id` is given its bird's sighting under the adapter the pool chooses now.
    mutating func feed(_ id: MachineID) -> [Action] {
        guard let address = machines.central(id)?.configuration.address,
            let chosen = chosenSighting(address)
        else { return [] }
        pool?.fed(address)
        machines.sighted(id, chosen)
        return on(id) { $0.deviceSighted(chosen) }
    }

    /// The bird's sighting under the adapter the pool chooses for it now.
    func chosenSighting(_ address: BluetoothAddress) -> Sighting? {
        guard let pool else { return nil }
        let fleet = self
        return pool.choice(address) { adapter in
            fleet.linksUp(on: adapter).up < fleet.scheduler?.limit(on: adapter) ?? Int.max
        }
    }

    /// Connects waiting at the gate for an adapter without a free link go to
    /// the bird's best adapter with one, if another hears it: the choice is
    /// made again while they wait (a link may free up elsewhere first).
    mutating func redirectWaiting() {
        guard gate.isWaiting else { return }
        for (id, device, adapter) in gate.waiting.map({ ($0.id, $0.device, $0.adapter) }) {
            let other = { (device: ObjectPath) in AdapterPool.adapter(of: device) }
            guard linksUp(on: adapter).up >= scheduler?.limit(on: adapter) ?? Int.max,
                let index = machines.index(of: id),
                let address = machines[index].central.configuration.address,
                let chosen = chosenSighting(address), chosen.device != device,
                linksUp(on: other(chosen.device)).up < scheduler?.limit(on: other(chosen.device)) ?? Int.max,
                machines.run(at: index, { $0.redirect(to: chosen.device) })
            else { continue }
            machines.sighted(id, chosen)
            gate.redirect(id, to: chosen.device)
        }
    }

    /// Birds whose adapter went or wedged, looking for their bird again:
    /// given their best other adapter's sighting at once.
    mutating func feedHandOvers() -> [Action] {
        guard let due = pool?.toFeed, !due.isEmpty else { return [] }
        var actions: [Action] = []
        for address in due {
            guard let id = machines.id(of: address), machines.central(id)?.isScanning == true else { continue }
            actions += feed(id)
        }
        return actions
    }

    /// `pool`: a Bird new to the fleet. It is listened to for the listening
    /// window first, so that every adapter of the pool has heard it before
    /// one is chosen (with one usable adapter there is nothing to compare).
    mutating func listen(_ sighting: Sighting) -> [Action] {
        let address = sighting.address
        if pool?.listening.contains(address) == true {
            pool?.heard(sighting)
            // Every adapter heard it: nothing more to wait for.
            guard pool?.heardByAll(address) == true, let chosen = chosenSighting(address) else { return [] }
            pool?.stopListening(address)
            return admit(chosen)
        }
        if waiting.update(sighting) {
            pool?.heard(sighting)
            return []
        }
        guard let pool, pool.usable.count > 1 else { return admit(sighting) }
        guard pool.listening.count < Self.waitingLimit else { return [] }
        self.pool?.heard(sighting)
        _ = self.pool?.listen(address)
        return [.armTimer(.listen(address), listeningWindow)]
    }

    /// The listening window ended: a bird new to the fleet is admitted, one
    /// it follows is given the sighting of its best adapter.
    mutating func listened(_ address: BluetoothAddress) -> [Action] {
        guard pool?.stopListening(address) == true, outcome == nil else { return [] }
        if let id = machines.id(of: address) {
            return machines.central(id)?.isScanning == true ? feed(id) : []
        }
        guard bluetooth.discovering, let chosen = chosenSighting(address) else {
            pool?.forget(address)
            return []
        }
        return admit(chosen)
    }

    /// A connect through `device` succeeded for machine `id`: if its bird
    /// came to another adapter than its last link's, that is said.
    mutating func connectedThrough(_ device: ObjectPath, by id: MachineID) -> [Action] {
        guard pool != nil, let address = machines.central(id)?.configuration.address,
            let reason = pool?.connected(address, device: device)
        else { return [] }
        let peripheral = BirdCentral.Peripheral(path: device, address: address, name: machines.sightings[id]?.name)
        return [.report(.adapter(peripheral, adapter: AdapterPool.adapterName(of: device), reason))]
    }

    /// `pool`: machine `id`'s connect deadline passed while `connectedDevices`
    /// were connected on its adapter: the pool learns whether it is wedged.
    mutating func poolDeadlinePassed(_ id: MachineID, connectedDevices: [ObjectPath]) {
        guard pool != nil, let central = machines.central(id),
            let device = central.currentDevice, let address = central.configuration.address
        else { return }
        let others = connectedDevices.count { $0 != device }
        _ = pool?.connectDeadlinePassed(address, device: device, links: others)
    }

    /// `pool`: a bird new to the fleet that could not be connected through
    /// one adapter tries the others at once (if another hears it).
    func triesAnotherAdapter(_ sighting: Sighting?, after failure: CommandFailure) -> Bool {
        guard let pool, let sighting else { return false }
        switch failure {
        case .connectTimeout, .connectFailed: return pool.hasAlternative(sighting.address)
        default: return false
        }
    }

    /// The links of every adapter the fleet uses, if each one's limit is known.
    var knownLinks: Int? {
        guard let scheduler else { return nil }
        let paths = pool.map { $0.usable.map(\.path) } ?? [bluetooth.adapter?.path ?? "/"]
        var total = 0
        for path in paths {
            guard let limit = scheduler.limit(on: path) else { return nil }
            total += limit
        }
        return paths.isEmpty ? nil : total
    }
}
