import BlueZ
import DBus

/// The fleet's machines: started, looked up, run on an event, their actions
/// made the fleet's, dropped, and all stopped at the end.
extension BirdFleet {
    /// Forgets a machine (with `all`): out of the gate's line and the
    /// scheduler's count, and what the pool heard of its bird unless `keepHeard`.
    mutating func drop(_ id: MachineID, keepHeard: Bool = false) {
        gate.withdraw(id)
        scheduler?.withdraw(id)
        if let address = machines.central(id)?.configuration.address {
            pool?.forget(address, keepHeard: keepHeard)
        }
        machines.drop(id)
        forgetting?.forget(id)
    }

    /// Runs an event on one machine; its actions, translated.
    mutating func on(_ id: MachineID, _ event: (inout BirdCentral) -> [BirdCentral.Action]) -> [Action] {
        guard outcome == nil, let index = machines.index(of: id) else { return [] }
        let actions = translate(machines.run(at: index, event), from: id)
        return afterEvent(actions)
    }

    /// Runs an event on every machine (in place: this is the notification path).
    mutating func everyMachine(_ event: (inout BirdCentral) -> [BirdCentral.Action]) -> [Action] {
        guard outcome == nil else { return [] }
        var actions: [Action] = []
        var index = 0
        while index < machines.count, outcome == nil {
            let id = machines.id(at: index)
            let own = machines.run(at: index, event)
            if !own.isEmpty {
                // Most events concern one machine: its actions are taken as they are, not copied.
                if actions.isEmpty { actions = translate(own, from: id) } else { actions += translate(own, from: id) }
            }
            // A machine that finished (with `all`) has left the list.
            if index < machines.count, machines.id(at: index) == id { index += 1 }
        }
        return afterEvent(actions)
    }

    /// A machine's actions as the fleet's: tagged with the machine, discovery
    /// left to the fleet with `all`, and a machine's end the command's end
    /// only without `all`.
    mutating func translate(_ own: [BirdCentral.Action], from id: MachineID) -> [Action] {
        var actions: [Action] = []
        actions.reserveCapacity(own.count)
        var enough = false
        // A connection attempt (its deadline and its Connect) waits its turn at the gate.
        var heldBack: [Action] = []
        var connectingTo: ObjectPath?
        for action in own {
            switch action {
            case .connect(let device):
                heldBack.append(.connect(id, device))
                connectingTo = device
            case .armTimer(.connect, let delay):
                heldBack.append(.armTimer(.machine(id, .connect), delay))
            case .startScanning:
                actions.append(.startScanning(id, lookUpKnown: all ? nil : firstLookUp(for: id)))
            case .stopScanning:
                if !all { actions.append(.stopScanning) }
            case .disconnect(let device):
                if gate.disconnecting(device) { actions.append(.disconnect(device)) }
            case .read(let field, let path): actions.append(.read(id, field, path))
            case .write(_, let path, let bytes): actions.append(.write(id, path, bytes))
            case .startNotify(let field, let path): actions.append(.startNotify(id, field, path))
            case .stopNotify(let path): actions.append(.stopNotify(path))
            case .pair(let device): actions.append(.pair(id, device))
            case .cancelPairing(let device): actions.append(.cancelPairing(device))
            case .forget(let address): actions.append(.forget(id, address))
            case .armTimer(let timer, let delay): actions.append(.armTimer(.machine(id, timer), delay))
            case .cancelTimer(let timer): actions.append(.cancelTimer(.machine(id, timer)))
            case .report(let report):
                actions.append(.report(report))
                if all, case .reading = report, let maximum = configuration.maximumReadings {
                    readings += 1
                    enough = enough || readings == maximum
                }
            case .finish(let result):
                guard all else {
                    outcome = result
                    actions.append(.finish(result))
                    continue
                }
                // One bird lost is not the end of the fleet: forget it so it can be found again.
                let (sighting, linkedAtAttempt) = (machines.sightings[id], scheduler?.linkedAtAttempt[id] ?? 0)
                if case .failed(.connectFailed) = result, let sighting { pool?.failed(sighting.address, device: sighting.device) }
                drop(id, keepHeard: pool != nil)
                // Its link is being undone: say so, if it did not (a gateway
                // would otherwise keep the bird online for ever).
                let bird = sighting.map { BirdCentral.Peripheral(path: $0.device, address: $0.address, name: $0.name) }
                if let bird, machines.linked.contains(bird.path),
                    !actions.contains(where: { if case .report(.disconnected(let p)) = $0 { p.path == bird.path } else { false } })
                {
                    actions.append(.report(.disconnected(bird)))
                }
                if case .failed(let failure) = result {
                    if case .pairingNotNamed(let bird, _) = failure { forgetting?.decline(bird.address) }
                    actions.append(.report(.gaveUp(failure, bird: bird)))
                    // A stranger is not ours: nothing of it is kept (a gateway clears what it published).
                    if case .pairingNotNamed(let bird, _) = failure { actions.append(.report(.forgotten(address: bird.address))) }
                    if case .connectTimeoutWithLinksUp(let adapter, let links) = failure {
                        // Links that went down since the Connect was sent were up when the controller refused it.
                        let path = sighting.map { AdapterPool.adapter(of: $0.device) } ?? bluetooth.adapter?.path ?? "/"
                        actions += learnedLimit(max(links, linkedAtAttempt), adapter: adapter, path: path)
                    }
                    tryAgainLater(sighting, after: failure)
                }
            }
        }
        if let connectingTo {
            gate.request(id, device: connectingTo, heldBack)
        } else {
            actions += heldBack  // a deadline re-armed without a Connect
        }
        // After this machine's actions, not in the middle of them.
        return enough ? actions + finishAll(.success) : actions
    }

    /// A machine's first scan may start from BlueZ's cache (a bird asked for
    /// by address that BlueZ knows); later ones (after a lost link) listen.
    private mutating func firstLookUp(for id: MachineID) -> BluetoothAddress? {
        guard let address = machines.central(id)?.configuration.address, machines.firstLookUp(id) else { return nil }
        return address
    }

    /// Stops every machine (StopNotify, Disconnect) and discovery, then finishes.
    mutating func finishAll(_ result: CommandOutcome) -> [Action] {
        guard outcome == nil else { return [] }
        var actions: [Action] = []
        for index in machines.indices {
            let id = machines.id(at: index)
            let cleanup = machines.run(at: index) { $0.stopRequested() }.filter { if case .finish = $0 { false } else { true } }
            actions += translate(cleanup, from: id).filter { if case .stopScanning = $0 { false } else { true } }
        }
        actions += guestsUndone()
        machines.removeAll()
        waiting.removeAll()
        forgetting?.forgetMachines()
        outcome = result
        return actions + [.stopScanning, .finish(result)]
    }
}
