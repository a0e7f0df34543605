import BlueZ
import DBus

/// `watch --all` and the adapter's links: the fleet's side of `LinkScheduler`.
extension BirdFleet {
    /// Birds held (not polled) by the machines.
    var heldBirds: Int { machines.heldBirds }

    /// Links up (or still going down), and those being made: machines
    /// connecting, but not those whose Connect still waits at the gate.
    public var linksUp: Int { machines.linksUp(waiting: gate.isWaiting) + guests.count }

    /// The links up or being made on one adapter, and those up (a guest's too).
    public func linksUp(on adapter: ObjectPath) -> (up: Int, linked: Int) {
        let birds = machines.linksUp(on: adapter, waiting: gate.isWaiting)
        guard !guests.isEmpty else { return birds }
        let guests = guests.links(on: adapter)
        return (birds.up + guests.up, birds.linked + guests.linked)
    }

    /// A bird whose connection never came while the controller was at its
    /// limit is in range still: another chance, in line, without waiting to
    /// hear it again (BlueZ reports an unchanged bird's RSSI only when it
    /// moves by 8 dB). Other failures wait until the bird is heard again.
    mutating func tryAgainLater(_ sighting: Sighting?, after failure: CommandFailure) {
        // Several adapters: another may take it (see `triesAnotherAdapter`).
        if case .connectTimeoutWithLinksUp = failure {} else if !triesAnotherAdapter(sighting, after: failure) { return }
        guard let sighting else { return }
        waiting.again(sighting)
    }

    /// After each event: the next bird in line gets a machine, and the next
    /// connection attempt goes through the gate if it may.
    mutating func afterEvent(_ actions: [Action]) -> [Action] {
        guard !waiting.isEmpty || gate.isWaiting || pool?.toFeed.isEmpty == false else { return actions }
        return actions + feedHandOvers() + admitWaiting() + grantConnects()
    }

    /// The adapter machine `id` connects through: with several, the one its
    /// device lies under; else the chosen one.
    func connectingAdapter(_ id: MachineID) -> ObjectPath? {
        if let pool, let path = machineDevice(id)?.parent, pool.members.contains(where: { $0.adapter.path == path }) {
            return path
        }
        return bluetooth.adapter?.path
    }

    /// The adapter's link limit if known, and whether it was learned (not given).
    public func linkLimit(on adapter: ObjectPath) -> (limit: Int?, learned: Bool) {
        guard let scheduler, let limit = scheduler.limit(on: adapter) else { return (nil, false) }
        return (limit, scheduler.policy.links == nil)
    }

    /// The next connection attempt, if none is out and its adapter takes
    /// one more link (`watch --all`: the scheduler says; then the gap after it).
    mutating func grantConnects() -> [Action] {
        guard outcome == nil, gate.isOpen, gate.isWaiting else { return [] }
        if pool != nil { redirectWaiting() }
        let fleet = self
        var scheduler = scheduler
        var gate = gate
        let granted = gate.next { id, device in
            fleet.machines.central(id).map { $0.isFinding && $0.currentDevice == device } ?? fleet.guests.waits(id, for: device)
        } mayGo: { id, adapter in
            scheduler?.mayConnect(id, on: adapter, links: fleet.linksUp(on: adapter)) ?? true
        }
        self.gate = gate
        for case .connect(let id, _) in granted where guests[id] != nil { guests.set(id, .connecting) }
        guard !granted.isEmpty, var scheduler else { return granted }
        self.gate.closeGap()
        let gap = scheduler.nextGap()
        self.scheduler = scheduler
        return granted + [.armTimer(.connectGap, gap)]
    }

    /// Bluetooth is back after an outage (or `adapters` came): the first
    /// attempt waits a random gap, and learned limits are learned again.
    mutating func linksRestarting(adapters: [ObjectPath]? = nil) -> [Action] {
        guard var scheduler else { return [] }
        let forgotten = scheduler.restarting(forgetting: adapters)
        let gap = scheduler.nextGap()
        self.scheduler = scheduler
        gate.closeGap()
        return [.armTimer(.connectGap, gap)] + forgotten.flatMap(limitForgotten)
    }

    /// Machine `id` connected through `device`: if it was checking a learned
    /// limit, the controller holds more, and the limit is forgotten.
    mutating func connectedPastLimit(_ id: MachineID, _ device: ObjectPath) -> [Action] {
        let adapter = AdapterPool.adapter(of: device)
        guard scheduler?.connected(id, on: adapter) == true else { return [] }
        return limitForgotten(adapter)
    }

    /// A learned limit no longer holds: said (no limit known). Birds `auto`
    /// polled because of it are held again at the next tick (`holdAgain`).
    private func limitForgotten(_ adapter: ObjectPath) -> [Action] {
        [.report(.links(adapter: AdapterPool.name(ofAdapter: adapter), used: linksUp(on: adapter).up, limit: nil, learned: false))]
    }

    /// Time to check the learned limits: one attempt past each may go.
    mutating func recheckLimits() -> [Action] {
        guard var scheduler, scheduler.recheckDue() else { return [] }
        self.scheduler = scheduler
        return [.armTimer(.limitRecheck, LinkScheduler.limitRecheck)] + grantConnects()
    }

    /// `auto`: birds it polled to share the last link are held again, the
    /// newest first, while the held birds still leave that link free (held
    /// birds gone); with the limit not known (forgotten), one a tick, so that
    /// a limit learned again finds the bird just held still connecting, and
    /// polls it again. Only those resting between polls: one polling now is
    /// looked at on a later tick. On each forget tick.
    mutating func holdAgain() -> [Action] {
        guard let scheduler, scheduler.policy.otherBirds == .auto, outcome == nil else { return [] }
        var actions: [Action] = []
        var held = heldBirds
        for machine in machines.reversed() {
            guard machine.central.isResting, let address = machine.central.configuration.address,
                scheduler.holdsByChoice(address), knownLinks.map({ held < $0 - 1 }) ?? actions.isEmpty
            else { continue }
            actions += holdFromNow(machine.id)
            held += 1
        }
        return actions
    }

    /// Machine `id`'s bird, resting between polls, is held from now on: a
    /// held machine takes its place and connects at its turn.
    private mutating func holdFromNow(_ id: MachineID) -> [Action] {
        guard let address = machines.central(id)?.configuration.address,
            let sighting = machines.sightings[id]
        else { return [] }
        let replacement = replace(id, address: address, with: BirdCentral(perBird(address, polled: false)))
        let peripheral = BirdCentral.Peripheral(path: sighting.device, address: sighting.address, name: sighting.name)
        return [.report(.held(peripheral))]
            + on(replacement) { [adapter = bluetooth.adapter] in $0.bluetoothReady(adapter: adapter) + $0.deviceSighted(sighting) }
    }

    /// Machine `id`'s connect deadline passed on `adapter` (by name): if
    /// nothing comes through the adapter any more, it is powered off and on
    /// (see `LinkScheduler.deadlinePassed`).
    mutating func adapterStuck(_ id: MachineID, connectedDevices: [ObjectPath], adapter: String) -> [Action] {
        guard let device = machines.central(id)?.currentDevice else { return [] }
        return adapterStuck(id, device: device, connectedDevices: connectedDevices, adapter: adapter)
    }

    /// Attempt `id`'s connect deadline passed for `device` (a bird's or a guest's).
    mutating func adapterStuck(_ id: MachineID, device: ObjectPath, connectedDevices: [ObjectPath], adapter: String) -> [Action] {
        guard var scheduler else { return [] }
        let path = AdapterPool.adapter(of: device)
        // A deadline on an adapter powered off (or gone) meanwhile says nothing of it.
        guard usableAdapters.contains(where: { $0.path == path }) else { return [] }
        let stuck = scheduler.deadlinePassed(id, links: connectedDevices.count { $0 != device }, on: path)
        self.scheduler = scheduler
        guard stuck else { return [] }
        return [.report(.adapterReset(adapter: adapter, failure: nil)), .resetAdapter(path)]
    }

    /// The adapter could not be powered off and on: said; its birds go on waiting for links.
    public mutating func adapterResetFailed(_ path: ObjectPath, _ error: BlueZError) -> [Action] {
        scheduler?.resetFailed(path)
        return [.report(.adapterReset(adapter: AdapterPool.name(ofAdapter: path), failure: error))]
    }

    /// Limits an earlier run learned of these adapters (`LinkPolicy.remembered`),
    /// taken and said as learned the first time each is seen, and checked
    /// again as every learned limit is.
    mutating func recallLimits(_ adapters: [AdapterChoice]) -> [Action] {
        guard var scheduler else { return [] }
        let recalled = adapters.compactMap { adapter in scheduler.recall(adapter).map { (adapter, $0) } }
        self.scheduler = scheduler
        guard !recalled.isEmpty else { return [] }
        return recalled.map { adapter, limit in
            .report(.links(adapter: adapter.name, used: linksUp(on: adapter.path).up, limit: limit, learned: true))
        } + [.armTimer(.limitRecheck, LinkScheduler.limitRecheck)]
    }

    /// The birds an earlier run followed, looked for connected on each of
    /// `adapters` as discovery first starts (see `Action.lookUpLinked`).
    func lookUpLinked(_ adapters: [AdapterChoice]) -> [Action] {
        let birds = scheduler?.adoptableBirds ?? []
        guard !birds.isEmpty else { return [] }
        return [.lookUpLinked(adapters.flatMap { adapter in birds.map { ObjectTree.devicePath($0.description, on: adapter.path) } })]
    }

    /// The limit the user gave, said for each of `adapters` (with several,
    /// it applies to each) once Bluetooth is ready.
    func givenLimit(_ adapters: [AdapterChoice]) -> [Action] {
        guard let scheduler, let limit = scheduler.policy.links else { return [] }
        return adapters.map { .report(.links(adapter: $0.name, used: linksUp(on: $0.path).up, limit: limit, learned: false)) }
    }

    /// A connection never came while `links` others were up on `adapter`:
    /// that is its limit. Said once; and with the automatic policy, while
    /// the held birds would take every link, the newest held by choice are
    /// polled from now on, so that one link is shared by the birds beyond
    /// the limit (`pollHeldByChoice`).
    /// `path`: the adapter's object (`adapter` is its name).
    mutating func learnedLimit(_ links: Int, adapter: String, path: ObjectPath) -> [Action] {
        guard var scheduler else { return [] }
        let learned = scheduler.learnLimit(links, adapter: path)
        self.scheduler = scheduler
        guard learned else { return [] }
        let said: [Action] = [
            .report(.links(adapter: adapter, used: linksUp(on: path).up, limit: links, learned: true)),
            .armTimer(.limitRecheck, LinkScheduler.limitRecheck),
        ]
        // Several adapters: the held birds of that adapter.
        let pooled = pool != nil
        return said + pollHeldByChoice(leaving: links) { !pooled || $0.currentDevice?.isDescendant(of: path) == true }
    }

    /// `auto`: one link is kept for polling once birds outnumber links, and
    /// a bird the user named to hold (`--hold`) comes before one held by
    /// choice: while the held birds (those `counted`) would take all `links`,
    /// the newest held by choice with a link (or an attempt) is polled from
    /// now on. So a named bird heard after the birds held by choice, or
    /// waiting as the limit is learned, gets a link, and polled birds a turn.
    mutating func pollHeldByChoice(leaving links: Int, counted: (BirdCentral) -> Bool = { _ in true }) -> [Action] {
        guard let scheduler else { return [] }
        var actions: [Action] = []
        while machines.count(where: { $0.central.configuration.pollInterval == nil && counted($0.central) }) >= links,
            let newest = machines.last(where: {
                $0.central.configuration.pollInterval == nil && counted($0.central) && $0.central.currentDevice != nil
                    && $0.central.configuration.address.map(scheduler.holdsByChoice) == true
            })
        {
            actions += pollFromNow(newest.id)
        }
        return actions
    }

    /// Machine `id`'s bird is polled from now on: its link is undone and a
    /// polling machine takes its place (it connects when the bird is heard).
    private mutating func pollFromNow(_ id: MachineID) -> [Action] {
        guard var stopped = machines.central(id), let address = stopped.configuration.address,
            let device = stopped.currentDevice
        else { return [] }
        let peripheral = BirdCentral.Peripheral(path: device, address: address, name: machines.sightings[id]?.name)
        let undo = translate(stopped.stopRequested().filter { if case .finish = $0 { false } else { true } }, from: id)
        let (polling, resting) = BirdCentral.polling(perBird(address, polled: true), peripheral)
        let replacement = replace(id, address: address, with: polling)
        return undo + [.report(.polled(peripheral))] + translate(resting, from: replacement)
    }

    /// Machine `id` makes way for `central`, another machine for the same
    /// bird: what the fleet and the pool heard of it is kept.
    private mutating func replace(_ id: MachineID, address: BluetoothAddress, with central: BirdCentral) -> MachineID {
        let heard = (forgetting?.lastHeard[id], machines.sightings[id])
        drop(id, keepHeard: true)
        let replacement = machines.add(central, for: address, seen: heard.1)
        forgetting?.heard(replacement, at: heard.0)
        return replacement
    }
}
