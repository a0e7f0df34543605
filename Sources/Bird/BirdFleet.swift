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

    public enum Timer: Hashable, Sendable {
        /// `--all`: the fleet's own find deadline and duration.
        case fleet(BirdCentral.Timer)
        case machine(MachineID, BirdCentral.Timer)
        /// `--all`: one tick of the clock that forgets unheard birds (`forgetAfter`).
        case forgetTick
        /// `--all`: the gap after a connection attempt (see `LinkScheduler`).
        case connectGap
        /// `--all`: time to check the learned link limits (see `LinkScheduler`).
        case limitRecheck
        /// `--all` with several adapters: a bird new to the fleet has been
        /// listened to long enough for every adapter to hear it (see `AdapterPool`).
        case listen(String)
    }

    /// How long a bird neither heard nor connected is remembered by default:
    /// well past Home Assistant's 195 s before a silent device is shown
    /// unavailable.
    public static let defaultForgetAfter = Duration.seconds(600)

    /// How many ticks of `forgetTick` make up `forgetAfter`: a bird is
    /// forgotten between 7/8 and 8/8 of that time after it was last heard.
    public static let ticksToForget = 8

    /// What the driver must do, in order.
    public enum Action: Hashable, Sendable {
        /// Discovery on; a refusal goes to `scanFailed` of that machine (nil:
        /// the fleet's). With `lookUpKnown`, first look for that address in
        /// BlueZ's cache and, if it is a Bird, give it to `deviceKnown` instead.
        case startScanning(MachineID?, lookUpKnown: String?)
        case stopScanning
        case connect(MachineID, ObjectPath)
        /// Disconnect, or cancel a connection still being made.
        case disconnect(ObjectPath)
        /// A connect deadline passed: count it a timeout of the adapter and
        /// find the devices connected on it; answered by `connectDeadlinePassed`.
        case countLinks(MachineID, ObjectPath)
        case read(MachineID, BirdField, ObjectPath)
        case write(MachineID, ObjectPath, [UInt8])
        case startNotify(MachineID, BirdField, ObjectPath)
        case stopNotify(ObjectPath)
        /// Pair through our agent; answered by `pairCompleted`.
        case pair(MachineID, ObjectPath)
        case cancelPairing(ObjectPath)
        /// Have BlueZ forget the device at this address; answered by `forgetCompleted`.
        case forget(MachineID, String)
        /// `all`: a bird forgotten (neither heard nor connected for
        /// `forgetAfter`). BlueZ keeps for good a device it was asked to
        /// connect to (Connect makes it non-temporary), with its GATT
        /// objects, in its memory and in ours: unless it is bonded or
        /// connected, have BlueZ drop it, as it drops a device it only heard.
        /// Heard again, BlueZ makes it anew. Not answered.
        case uncache(String)
        /// `all`: power the adapter off and on, to unstick its connect path
        /// (see `LinkScheduler.deadlinePassed`); a failure goes to `adapterResetFailed`.
        case resetAdapter(ObjectPath)
        case armTimer(Timer, Duration)
        case cancelTimer(Timer)
        case report(BirdCentral.Report)
        /// The command is done once the cleanup actions before this one are
        /// answered (briefly).
        case finish(CommandOutcome)
    }

    public let configuration: BirdCentral.Configuration
    /// Follow every Bird in range (`watch --all`).
    public let all: Bool
    /// `all`: a bird neither heard nor connected for this long is forgotten
    /// (its machine dropped, reported as `forgotten`), and one that asked for
    /// pairing without being named is ignored for this long. Nil: never.
    public let forgetAfter: Duration?
    /// The machines, in the order they were started (few: one per Bird in
    /// range), so in the order of their ids: each is appended with the next
    /// id, and removals keep the order (`index(of:)` relies on it).
    var machines: [(id: MachineID, central: BirdCentral)] = []
    /// `all`: each machine's bird (address, upper case), and when it was last heard (in ticks).
    var byAddress: [String: MachineID] = [:]
    var lastHeard: [MachineID: Int] = [:]
    /// `all`: birds that asked for pairing without being named, and the tick
    /// they did: not connected to again until forgotten (a stranger would
    /// otherwise be connected to, and refused, every time it is heard).
    var declined: [String: Int] = [:]
    var tick = 0
    /// `all`: birds heard while another was being connected to, in the order heard.
    var waiting: [Sighting] = []
    /// `all`: the last sighting of each machine's bird.
    var sightings: [MachineID: Sighting] = [:]
    /// `all`: the machine each notifying characteristic was last found to belong to (see `owner(of:)`).
    var notifiers: [ObjectPath: MachineID] = [:]
    /// `all`: devices with a link up, from Connect's success to Connected
    /// turning false — also while a link we undo is still going down
    /// (bluetoothd holds a Disconnect for 2 s): the scheduler counts them.
    var linked: Set<ObjectPath> = []
    var nextID: MachineID = 0
    var adapter: AdapterChoice?
    var outcome: CommandOutcome?
    /// `--all`: discovery is on for the fleet; `everReady`: it was at least once.
    var discovering = false
    var everReady = false
    private var readings = 0
    /// Machines whose first scan looked in BlueZ's cache.
    private var lookedUp: Set<MachineID> = []

    /// Connection attempts, one out at a time.
    var gate = ConnectGate()
    /// `all`: who gets a link, and when.
    var scheduler: LinkScheduler?
    /// `all` among gateways (`shared`): the birds this one may connect.
    var sharing: Sharing?
    /// `all` with several adapters (`pooled`): through which adapter each bird is connected.
    var pool: AdapterPool?
    /// `pool`: birds new to the fleet being listened to by every adapter (see `Timer.listen`).
    var listening: Set<String> = []

    /// `seed`: for the random part of the gaps between connection attempts.
    public init(
        _ configuration: BirdCentral.Configuration, all: Bool = false, forgetAfter: Duration? = nil,
        links: LinkPolicy = LinkPolicy(), seed: UInt64 = 0, shared: Bool = false, pooled: Bool = false
    ) {
        self.configuration = configuration
        self.all = all
        self.forgetAfter = all ? forgetAfter : nil
        if all { scheduler = LinkScheduler(links, seed: seed) } else { add(configuration) }
        if all && shared { sharing = Sharing() }
        if all && pooled { pool = AdapterPool() }
    }

    /// How many birds the fleet holds state for (machines, declined and waiting birds).
    public var birdsRemembered: Int {
        machines.count + declined.count + waiting.count + (sharing?.heard.count ?? 0) + (pool?.heard.count ?? 0)
    }

    public var isFinished: Bool { outcome != nil }

    /// Whether machine `id` is still running (it has not finished or been dropped).
    public func runs(_ id: MachineID) -> Bool { outcome == nil && index(of: id) != nil }

    /// The device machine `id` is connected (or connecting) to.
    public func machineDevice(_ id: MachineID) -> ObjectPath? { central(id)?.currentDevice }

    /// The devices the machines are connected (or connecting) to.
    public var currentDevices: [ObjectPath] { machines.compactMap(\.central.currentDevice) }

    // MARK: Bluetooth availability

    /// BlueZ's tree is loaded, or the chosen adapter was powered on; `adapter`
    /// is the chosen one, nil if none (or none named `requested`).
    public mutating func bluetoothReady(adapter: AdapterChoice?, requested: String?) -> [Action] {
        guard outcome == nil else { return [] }
        self.adapter = adapter
        var actions = all ? readyToDiscover(requested: requested) : []
        actions += everyMachine { $0.bluetoothReady(adapter: adapter, requested: requested) }
        return actions
    }

    public mutating func bluetoothUnavailable(_ error: BlueZError) -> [Action] {
        guard outcome == nil else { return [] }
        scheduler?.bluetoothGone()
        gate.bluetoothGone()
        adapter = nil
        discovering = false
        linked.removeAll()
        waiting.removeAll()
        // Several adapters: none is left; they are told again when bluetoothd is back.
        _ = pool?.update([])
        listening.removeAll()
        let actions = everyMachine { $0.bluetoothUnavailable(error) }
        if all && !everReady { return actions + finishAll(.failed(.unavailable(error))) }
        return actions
    }

    public mutating func adapterPoweredOff(_ adapter: AdapterChoice) -> [Action] {
        self.adapter = adapter
        discovering = false
        waiting.removeAll()
        linked.removeAll()
        return everyMachine { $0.adapterPowered(false, adapter: adapter) }
    }

    public mutating func adapterRemoved(name: String) -> [Action] {
        adapter = nil
        discovering = false
        waiting.removeAll()
        linked.removeAll()
        return everyMachine { $0.adapterRemoved(name: name) }
    }

    /// The adapter cannot be used (a power-on was refused): the command ends.
    public mutating func adapterFailed(_ failure: CommandFailure) -> [Action] {
        finishAll(.failed(failure))
    }

    /// `--all`: the adapter is usable (again): keep discovery on to hear every Bird.
    private mutating func readyToDiscover(requested: String?) -> [Action] {
        guard let adapter, adapter.powered else {
            if everReady { return [] }
            return finishAll(.failed(adapter.map { .adapterOff($0.name) } ?? .noAdapter(requested)))
        }
        guard !discovering else { return [] }
        discovering = true
        var actions: [Action] = [.startScanning(nil, lookUpKnown: nil)]
        actions += everReady ? linksRestarting() : givenLimit
        if !everReady {
            if let timeout = configuration.scanTimeout { actions.append(.armTimer(.fleet(.scan), timeout)) }
            if let duration = configuration.duration { actions.append(.armTimer(.fleet(.duration), duration)) }
            if let forgetAfter { actions.append(.armTimer(.forgetTick, forgetAfter / Self.ticksToForget)) }
        }
        everReady = true
        return actions
    }

    // MARK: Devices

    /// A device was heard. With `all`, a Bird no machine follows gets one
    /// (unless it declined to be paired with lately); the sighting goes to
    /// its bird's machine alone.
    public mutating func deviceSighted(_ sighting: Sighting) -> [Action] {
        guard outcome == nil else { return [] }
        guard all else { return everyMachine { $0.deviceSighted(sighting) } }
        guard sighting.matches(address: nil, minimumRSSI: configuration.minimumRSSI) else { return [] }
        let address = sighting.address.uppercased()
        if let id = byAddress[address] {
            lastHeard[id] = tick
            guard pool != nil else {
                sightings[id] = sighting
                return on(id) { $0.deviceSighted(sighting) }
            }
            return pooledSighting(sighting, of: id)
        }
        guard discovering, declined[address] == nil, mayFollow(sighting, address: address) else { return [] }
        if pool != nil { return listen(sighting) }
        return admit(sighting)
    }

    /// `all`: a Bird new to the fleet, to follow now or after the one being connected to.
    mutating func admit(_ sighting: Sighting) -> [Action] {
        let address = sighting.address.uppercased()
        // One new bird at a time: a machine is made for a bird when the one
        // before it has a link or gave up. Birds heard meanwhile wait in a
        // short line (the last sighting of each); past its end they are not
        // remembered (they will be heard again), so a crowd of strangers
        // advertising the Bird Service costs a few entries, not a machine each.
        if admitting {
            if let index = waiting.firstIndex(where: { $0.address.uppercased() == address }) {
                waiting[index] = sighting
            } else if waiting.count < Self.waitingLimit {
                waiting.append(sighting)
            }
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
        return everyMachine { $0.deviceDisconnected(device) }
    }

    public mutating func deviceRemoved(_ device: ObjectPath) -> [Action] {
        linkEnded(device)
        return everyMachine { $0.deviceRemoved(device) }
    }

    private mutating func linkEnded(_ device: ObjectPath) {
        if scheduler != nil { linked.remove(device) }
        gate.linkEnded(device)
    }

    public mutating func servicesResolved(device: ObjectPath, characteristics: [BirdField: ObjectPath]) -> [Action] {
        if scheduler != nil, currentDevices.contains(device) { linked.insert(device) }
        return everyMachine { $0.servicesResolved(device: device, characteristics: characteristics) }
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

    /// The Connect of machine `id` was answered; `alreadyConnected`: its
    /// device was connected when it was sent (another program's link, not
    /// ours to undo). A reply to an attempt given up is nobody's.
    public mutating func connectReplied(
        _ id: MachineID, _ result: Result<Void, BlueZError>, alreadyConnected: Bool = false
    ) -> [Action] {
        guard gate.replied(id, alreadyConnected: alreadyConnected) else { return afterEvent([]) }
        var moved: [Action] = []
        if scheduler != nil, case .success = result, let device = central(id)?.currentDevice {
            linked.insert(device)
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
        all ? .adapters : configuration.address.map { .device(address: $0) } ?? .everything
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
        }
    }

    /// SIGINT/SIGTERM, or stdout closed: undo what was done, then finish.
    public mutating func stopRequested() -> [Action] {
        if all { return finishAll(.success) }
        return everyMachine { $0.stopRequested() }
    }

    // MARK: Machines

    @discardableResult
    mutating func add(_ configuration: BirdCentral.Configuration) -> MachineID {
        add(BirdCentral(configuration))
    }

    mutating func add(_ central: BirdCentral) -> MachineID {
        let id = nextID
        nextID += 1
        machines.append((id, central))
        return id
    }

    /// Forgets a machine (with `all`).
    mutating func drop(_ id: MachineID, keepHeard: Bool = false) {
        gate.withdraw(id)
        scheduler?.withdraw(id)
        if let address = central(id)?.configuration.address {
            pool?.forget(address, keepHeard: keepHeard)
        }
        machines.removeAll { $0.id == id }
        lastHeard[id] = nil
        sightings[id] = nil
        if !notifiers.isEmpty { notifiers = notifiers.filter { $0.value != id } }
        if let address = byAddress.first(where: { $0.value == id })?.key { byAddress[address] = nil }
    }

    /// Where machine `id` is: a binary search of `machines` (sorted by id),
    /// not a walk through every bird: each notification and each machine's
    /// timer looks its machine up.
    func index(of id: MachineID) -> Int? {
        var low = 0
        var high = machines.count
        while low < high {
            let middle = (low + high) / 2
            if machines[middle].id < id { low = middle + 1 } else { high = middle }
        }
        return low < machines.count && machines[low].id == id ? low : nil
    }

    /// Machine `id`'s central, if it runs.
    func central(_ id: MachineID) -> BirdCentral? {
        index(of: id).map { machines[$0].central }
    }

    /// Runs an event on one machine; its actions, translated.
    mutating func on(_ id: MachineID, _ event: (inout BirdCentral) -> [BirdCentral.Action]) -> [Action] {
        guard outcome == nil, let index = index(of: id) else { return [] }
        let actions = translate(event(&machines[index].central), from: id)
        return afterEvent(actions)
    }

    /// Runs an event on every machine (in place: this is the notification path).
    private mutating func everyMachine(_ event: (inout BirdCentral) -> [BirdCentral.Action]) -> [Action] {
        guard outcome == nil else { return [] }
        var actions: [Action] = []
        var index = 0
        while index < machines.count, outcome == nil {
            let id = machines[index].id
            let own = event(&machines[index].central)
            if !own.isEmpty {
                // Most events concern one machine: its actions are taken as they are, not copied.
                if actions.isEmpty { actions = translate(own, from: id) } else { actions += translate(own, from: id) }
            }
            // A machine that finished (with `all`) has left the list.
            if index < machines.count, machines[index].id == id { index += 1 }
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
                let (sighting, linkedAtAttempt) = (sightings[id], scheduler?.linkedAtAttempt[id] ?? 0)
                if case .failed(.connectFailed) = result, let sighting { pool?.failed(sighting.address, device: sighting.device) }
                drop(id, keepHeard: pool != nil)
                // Its link is being undone: say so, if it did not (a gateway
                // would otherwise keep the bird online for ever).
                if let sighting, linked.contains(sighting.device),
                    !actions.contains(where: { if case .report(.disconnected(let p)) = $0 { p.path == sighting.device } else { false } })
                {
                    actions.append(.report(.disconnected(
                        BirdCentral.Peripheral(path: sighting.device, address: sighting.address, name: sighting.name))))
                }
                if case .failed(let failure) = result {
                    if case .pairingNotNamed(let bird, _) = failure, forgetAfter != nil {
                        declined[bird.address.uppercased()] = tick
                    }
                    actions.append(.report(.gaveUp(failure)))
                    // A stranger is not ours: nothing of it is kept (a gateway clears what it published).
                    if case .pairingNotNamed(let bird, _) = failure { actions.append(.report(.forgotten(address: bird.address))) }
                    if case .connectTimeoutWithLinksUp(let adapter, let links) = failure {
                        // Links that went down since the Connect was sent were up when the controller refused it.
                        let path = sighting.map { AdapterPool.adapter(of: $0.device) } ?? self.adapter?.path ?? "/"
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
    private mutating func firstLookUp(for id: MachineID) -> String? {
        guard let address = central(id)?.configuration.address,
            lookedUp.insert(id).inserted
        else { return nil }
        return address
    }

    /// Stops every machine (StopNotify, Disconnect) and discovery, then finishes.
    private mutating func finishAll(_ result: CommandOutcome) -> [Action] {
        guard outcome == nil else { return [] }
        var actions: [Action] = []
        for index in machines.indices {
            let id = machines[index].id
            let cleanup = machines[index].central.stopRequested().filter { if case .finish = $0 { false } else { true } }
            actions += translate(cleanup, from: id).filter { if case .stopScanning = $0 { false } else { true } }
        }
        machines.removeAll()
        waiting.removeAll()
        sightings.removeAll()
        byAddress.removeAll()
        lastHeard.removeAll()
        outcome = result
        return actions + [.stopScanning, .finish(result)]
    }
}
