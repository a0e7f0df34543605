import BlueZ
import DBus

/// The central side of a command as one pure state machine: one `BirdCentral`
/// for a read, set or watch of one bird; with `all` (`watch --all`), one per
/// Bird heard, started when its bird is first heard and dropped when its
/// session ends, so that it can be found again. Like `BirdCentral` it does no
/// I/O: each event is one mutating method that returns the actions to
/// perform, each naming the machine whose event its completion is.
public struct BirdFleet: Sendable {
    public typealias MachineID = Int

    /// How long a bird neither heard nor connected is remembered by default:
    /// well past Home Assistant's 195 s before a silent device is shown
    /// unavailable.
    public static let defaultForgetAfter = Duration.seconds(600)

    /// How long an adapter may hear no Bird while one is looked for before
    /// its discovery is restarted (see `DiscoveryWatchdog`).
    public static let defaultDiscoveryWatchdog = DiscoveryWatchdog.defaultWindow

    /// How many ticks of `forgetTick` make up `forgetAfter`: a bird is
    /// forgotten between 7/8 and 8/8 of that time after it was last heard.
    public static let ticksToForget = 8

    public let configuration: BirdCentral.Configuration
    /// Follow every Bird in range (`watch --all`).
    public let all: Bool
    /// `all`: a bird neither heard nor connected for this long is forgotten
    /// (its machine dropped, reported as `forgotten`), and one that asked for
    /// pairing without being named is ignored for this long. Nil: never.
    public var forgetAfter: Duration? { forgetting?.after }
    /// The machines, what is kept of each, and the links they made.
    var machines = FleetMachines()
    /// `all` with `forgetAfter`: when birds were last heard, and strangers declined.
    var forgetting: Forgetting?
    /// `all`: birds heard while another was being connected to.
    var waiting = WaitingLine()
    /// The adapter chosen, and with `all` the fleet's discovery and its watchdog.
    var bluetooth: FleetBluetooth
    var outcome: CommandOutcome?
    var readings = 0

    /// Links made for a guest (Home Assistant, through the proxy).
    var guests = GuestLinks()
    /// Connection attempts, one out at a time.
    var gate = ConnectGate()
    /// `all`: who gets a link, and when.
    var scheduler: LinkScheduler?
    /// `all` among gateways (`shared`): the birds this one may connect.
    var sharing: Sharing?
    /// `all` with several adapters (`pooled`): through which adapter each bird is connected.
    var pool: AdapterPool?

    /// `seed`: for the random part of the gaps between connection attempts;
    /// `discoveryWatchdog`: the window of `DiscoveryWatchdog` (nil: none).
    public init(
        _ configuration: BirdCentral.Configuration, all: Bool = false, forgetAfter: Duration? = nil,
        links: LinkPolicy = LinkPolicy(), seed: UInt64 = 0, shared: Bool = false, pooled: Bool = false,
        discoveryWatchdog: Duration? = nil
    ) {
        self.configuration = configuration
        self.all = all
        if all, let forgetAfter { forgetting = Forgetting(after: forgetAfter) }
        if all { scheduler = LinkScheduler(links, seed: seed) } else { _ = machines.add(BirdCentral(configuration)) }
        if all && shared { sharing = Sharing() }
        if all && pooled { pool = AdapterPool() }
        bluetooth = FleetBluetooth(watchdog: all ? discoveryWatchdog : nil)
    }

    /// How many birds the fleet holds state for (machines, declined and waiting birds).
    public var birdsRemembered: Int {
        machines.count + (forgetting?.declined.count ?? 0) + waiting.count + (sharing?.heard.count ?? 0) + (pool?.heard.count ?? 0)
    }

    public var isFinished: Bool { outcome != nil }

    /// Whether machine `id` is still running (it has not finished or been dropped).
    public func runs(_ id: MachineID) -> Bool { outcome == nil && machines.index(of: id) != nil }

    /// The device machine `id` is connected (or connecting) to.
    public func machineDevice(_ id: MachineID) -> ObjectPath? { machines.central(id)?.currentDevice }

    /// The devices the machines are connected (or connecting) to.
    public var currentDevices: [ObjectPath] { machines.compactMap(\.central.currentDevice) }

    // MARK: Bluetooth availability

    /// BlueZ's tree is loaded, or the chosen adapter was powered on; `adapter`
    /// is the chosen one, nil if none (or none named `requested`).
    public mutating func bluetoothReady(adapter: AdapterChoice?, requested: String?) -> [Action] {
        guard outcome == nil else { return [] }
        bluetooth.adapter = adapter
        var actions = all ? readyToDiscover(requested: requested) : []
        actions += everyMachine { $0.bluetoothReady(adapter: adapter, requested: requested) }
        return actions
    }

    /// bluetoothd went, with every adapter and link, and the Connect out
    /// (the bus answers it with NoReply); the pool's adapters are told again
    /// when it is back.
    public mutating func bluetoothUnavailable(_ error: BlueZError) -> [Action] {
        guard outcome == nil else { return [] }
        let guestsLost = adapterLost(nil)
        scheduler?.bluetoothGone()
        gate.bluetoothGone()
        pool?.bluetoothGone()
        let actions = guestsLost + everyMachine { $0.bluetoothUnavailable(error) }
        if all && !bluetooth.everReady { return actions + finishAll(.failed(.unavailable(error))) }
        return actions
    }

    public mutating func adapterPoweredOff(_ adapter: AdapterChoice) -> [Action] {
        adapterLost(adapter) + everyMachine { $0.adapterPowered(false, adapter: adapter) }
    }

    public mutating func adapterRemoved(name: String) -> [Action] {
        adapterLost(nil) + everyMachine { $0.adapterRemoved(name: name) }
    }

    /// The adapter can no longer be used (`adapter`: as it is now, if still
    /// there; nil: gone, see `FleetBluetooth.lost`): discovery and every link
    /// went with it (the guest's said), and birds waiting for a machine will
    /// be heard again.
    private mutating func adapterLost(_ adapter: AdapterChoice?) -> [Action] {
        bluetooth.lost(adapter)
        waiting.removeAll()
        machines.linksGone(on: nil)
        return guestsLost(on: nil)
    }

    /// The adapter cannot be used (a power-on was refused): the command ends.
    public mutating func adapterFailed(_ failure: CommandFailure) -> [Action] {
        finishAll(.failed(failure))
    }

    /// `--all`: the adapter is usable (again): keep discovery on to hear every Bird.
    private mutating func readyToDiscover(requested: String?) -> [Action] {
        let start: [Action] = [.startScanning(nil, lookUpKnown: nil)]
        switch bluetooth.ready(requested: requested) {
        case .failed(let failure): return finishAll(.failed(failure))
        case .nothing: return []
        case .discovery(first: false): return start + linksRestarting()
        case .discovery(first: true):
            let usable = usableAdapters
            var actions = start + givenLimit(usable) + recallLimits(usable) + lookUpLinked(usable)
            if let timeout = configuration.scanTimeout { actions.append(.armTimer(.fleet(.scan), timeout)) }
            if let duration = configuration.duration { actions.append(.armTimer(.fleet(.duration), duration)) }
            if let forgetting { actions.append(.armTimer(.forgetTick, forgetting.interval)) }
            if let window = bluetooth.watchdog?.window { actions.append(.armTimer(.discoveryWatch, window)) }
            return actions
        }
    }

    // MARK: Devices

    /// Devices BlueZ heard (or holds connected) as discovery started: each
    /// sighted, not live, in the order they take their turns (`LinkScheduler.inTurn`).
    public mutating func heardBefore(_ heard: [Sighting]) -> [Action] {
        var actions: [Action] = []
        for sighting in scheduler?.inTurn(heard) ?? heard { actions += deviceSighted(sighting, live: false) }
        return actions
    }

    /// A device was heard. With `all`, a Bird no machine follows gets one
    /// (unless it declined to be paired with lately); the sighting goes to
    /// its bird's machine alone. `live`: heard now, not found in BlueZ's
    /// cache as discovery started (only what is heard now, with an RSSI,
    /// shows the adapter hears, see `DiscoveryWatchdog`).
    public mutating func deviceSighted(_ sighting: Sighting, live: Bool = true) -> [Action] {
        guard outcome == nil else { return [] }
        guard all else { return everyMachine { $0.deviceSighted(sighting) } }
        guard sighting.isBird else { return [] }
        bluetooth.heard(sighting, live: live)
        guard sighting.isHeard(atLeast: configuration.minimumRSSI) else { return [] }
        let address = sighting.address
        if let id = machines.id(of: address) {
            forgetting?.heard(id)
            guard pool != nil else {
                machines.sighted(id, sighting)
                return on(id) { $0.deviceSighted(sighting) }
            }
            return pooledSighting(sighting, of: id)
        }
        guard bluetooth.discovering, forgetting?.isDeclined(address) != true, mayFollow(sighting, address: address) else { return [] }
        if pool != nil { return listen(sighting) }
        return admit(sighting)
    }

    /// `all`: a Bird new to the fleet, to follow now or after the one being connected to.
    mutating func admit(_ sighting: Sighting) -> [Action] {
        // One new bird at a time: a machine is made for a bird when the one
        // before it has a link or gave up. Birds heard meanwhile wait in line.
        guard !admitting else {
            waiting.heard(sighting)
            return []
        }
        return follow(sighting)
    }

    /// The bird machine `id` asked for is in BlueZ's cache (`lookUpKnown`).
    public mutating func deviceKnown(_ id: MachineID, _ sighting: Sighting) -> [Action] {
        on(id) { $0.deviceKnown(sighting) }
    }

    public mutating func deviceDisconnected(_ device: ObjectPath) -> [Action] {
        linkEnded(device)
        return guestLinkEnded(device) + everyMachine { $0.deviceDisconnected(device) }
    }

    public mutating func deviceRemoved(_ device: ObjectPath) -> [Action] {
        linkEnded(device)
        return guestLinkEnded(device) + everyMachine { $0.deviceRemoved(device) }
    }

    private mutating func linkEnded(_ device: ObjectPath) {
        if scheduler != nil { machines.linkDown(device) }
        gate.linkEnded(device)
    }

    public mutating func servicesResolved(device: ObjectPath, characteristics: [BirdField: ObjectPath]) -> [Action] {
        if scheduler != nil, currentDevices.contains(device) { machines.linkUp(device) }
        return guestResolved(device) + everyMachine { $0.servicesResolved(device: device, characteristics: characteristics) }
    }

    /// A characteristic went away while its device's services stayed resolved.
    public mutating func characteristicRemoved(_ path: ObjectPath) -> [Action] {
        everyMachine { $0.characteristicRemoved(path) }
    }

    /// A notification (or BlueZ's echo of a read), over a link of this ATT
    /// MTU if known; `ordered`: see `BirdCentral.valueChanged`. `machine`:
    /// the machine whose subscription it came through, if known (an acquired socket).
    public mutating func valueChanged(
        _ characteristic: ObjectPath, _ raw: [UInt8], mtu: Int? = nil, ordered: Bool = true, of machine: MachineID? = nil
    ) -> [Action] {
        // Many birds: the notification goes to its own bird's machine alone.
        guard machines.count > 1 else { return everyMachine { $0.valueChanged(characteristic, raw, mtu: mtu, ordered: ordered) } }
        if let machine { return on(machine) { $0.valueChanged(characteristic, raw, mtu: mtu, ordered: ordered) } }
        return owner(of: characteristic) { $0.valueChanged(characteristic, raw, mtu: mtu, ordered: ordered) }
    }

    // MARK: Replies

    public mutating func scanFailed(_ id: MachineID?, _ error: BlueZError) -> [Action] {
        guard let id else { return finishAll(.failed(.failed("start discovery", error))) }
        return on(id) { $0.scanFailed(error) }
    }

    /// The Connect let through went to `device`. If it was connected:
    /// another program's link, not ours to undo, even before the answer;
    /// or, at the first Connect of this run to a bird an earlier run
    /// followed (`LinkPolicy.rememberedBirds`), the link that run left up,
    /// adopted as ours. A bird's first Connect ends its chance of adoption.
    public mutating func connectSent(_ device: ObjectPath, whileConnected connected: Bool) -> [Action] {
        let address = machines.address(of: device)
        let adopted = address.map { scheduler?.adopts($0) == true } ?? false
        if connected && !adopted { gate.sentWhileConnected(device) }
        return []
    }

    /// The Connect of machine `id` was answered. A reply to an attempt
    /// given up is nobody's.
    public mutating func connectReplied(_ id: MachineID, _ result: Result<Void, BlueZError>) -> [Action] {
        if guests[id] != nil { return guestConnectReplied(id, result) }
        guard gate.replied(id) else {
            // Given up: nobody's link, but the attempt (and a check of a limit it made) is over.
            scheduler?.attemptEnded(id)
            return afterEvent([])
        }
        var moved: [Action] = []
        if scheduler != nil, case .success = result, let device = machines.central(id)?.currentDevice {
            machines.linkUp(device)
            moved = connectedPastLimit(id, device) + connectedThrough(device, by: id)
        }
        scheduler?.attemptEnded(id)
        return moved + on(id) { $0.connectReplied(result) }
    }

    public mutating func readCompleted(_ id: MachineID, _ field: BirdField, _ result: Result<[UInt8], BlueZError>) -> [Action] {
        on(id) { $0.readCompleted(field, result) }
    }

    public mutating func writeCompleted(_ id: MachineID, _ result: Result<Void, BlueZError>) -> [Action] {
        on(id) { $0.writeCompleted(result) }
    }

    public mutating func notifyStarted(_ id: MachineID, _ field: BirdField, _ result: Result<Void, BlueZError>) -> [Action] {
        on(id) { $0.notifyStarted(field, result) }
    }

    public mutating func pairCompleted(_ id: MachineID, _ result: Result<Void, BlueZError>) -> [Action] {
        on(id) { $0.pairCompleted(result) }
    }

    /// BlueZ says the device is paired (`Paired` turned true): the pairing of
    /// whichever machine is pairing it is over (see `BirdCentral.devicePaired`).
    public mutating func devicePaired(_ device: ObjectPath) -> [Action] {
        everyMachine { $0.devicePaired(device) }
    }

    /// The bird some machine is pairing with at `device`: whom bluetoothd's
    /// questions to our agent are about. Nil: not a pairing of ours.
    public func pairing(_ device: ObjectPath) -> BirdCentral.Peripheral? {
        for machine in machines { if let peripheral = machine.central.pairing(device) { return peripheral } }
        return nil
    }

    public mutating func forgetCompleted(_ id: MachineID, _ result: Result<Void, BlueZError>) -> [Action] {
        on(id) { $0.forgetCompleted(result) }
    }

    /// What of BlueZ's cache the driver loads: the bird asked for by address;
    /// with `all`, the adapters alone (devices enter as they are heard);
    /// else everything (the nearest bird is chosen among those BlueZ knows).
    public var whatToLoad: BlueZClient.Scope {
        all ? .adapters : configuration.address.map { .device(address: $0.description) } ?? .everything
    }

    /// The link's services went unresolved: the link is going (see `BirdCentral.servicesUnresolved`).
    public mutating func servicesUnresolved(_ device: ObjectPath) -> [Action] {
        everyMachine { $0.servicesUnresolved(device) }
    }

    /// Whether machine `id` waits for the answer to its Connect to `device`
    /// (an attempt it gave up is answered to nobody).
    public func awaitsConnect(_ id: MachineID, _ device: ObjectPath) -> Bool { gate.awaitsReply(id, device) }

    /// Machine `id`'s connect deadline passed while `connectedDevices` were
    /// connected on `adapter` (see `BirdCentral.connectDeadlinePassed`).
    public mutating func connectDeadlinePassed(_ id: MachineID, connectedDevices: [ObjectPath], adapter: String) -> [Action] {
        if guests[id] != nil { return guestDeadlinePassed(id, connectedDevices: connectedDevices, adapter: adapter) }
        scheduler?.attemptEnded(id)
        poolDeadlinePassed(id, connectedDevices: connectedDevices)
        let stuck = adapterStuck(id, connectedDevices: connectedDevices, adapter: adapter)
        // The attempt is undone (its Disconnect) before the adapter is powered off.
        return on(id) { $0.connectDeadlinePassed(connectedDevices: connectedDevices, adapter: adapter) } + stuck
    }

    // MARK: Timers and stopping

    public mutating func timerFired(_ timer: Timer) -> [Action] {
        switch timer {
        case .machine(let id, .connect):
            // The controller may be at its limit (which Linux does not
            // report): the links up on its adapter are counted first.
            guard runs(id), let adapter = connectingAdapter(id) else { return on(id) { $0.timerFired(.connect) } }
            return [.countLinks(id, adapter)]
        case .machine(let id, let timer):
            return on(id) { $0.timerFired(timer) }
        case .fleet(.scan) where machines.isEmpty:
            return finishAll(.failed(.notFound))
        case .fleet(.duration):
            return finishAll(.success)
        case .fleet:
            return []
        case .forgetTick:
            return forgetUnheard() + holdAgain()
        case .connectGap:
            gate.gapPassed()
            return grantConnects()
        case .limitRecheck:
            return recheckLimits()
        case .listen(let address):
            return listened(address)
        case .discoveryWatch:
            return discoveryWindowEnded()
        case .guest(let id):
            guard let device = guests[id]?.device else { return [] }
            return [.countLinks(id, AdapterPool.adapter(of: device))]
        }
    }

    /// SIGINT/SIGTERM, or stdout closed: undo what was done, then finish.
    public mutating func stopRequested() -> [Action] {
        if all { return finishAll(.success) }
        return everyMachine { $0.stopRequested() }
    }
}
