import BlueZ
import DBus

/// Runs a `BirdFleet` against BlueZ: turns BlueZ events into the fleet's
/// events, performs the actions it returns, keeps its timers on the
/// connection's loop. It decides nothing the fleet can decide (which Connect
/// goes when, whose reply it is, which link is ours to undo: `ConnectGate`).
///
/// Loop-confined; `start` and `stop` may be called from anywhere.
public final class CentralDriver: @unchecked Sendable {
    public typealias ReportHandler = @Sendable (BirdCentral.Report) -> Void
    public typealias FinishHandler = @Sendable (CommandOutcome) -> Void

    let core: DriverCore
    private let person: PairingQuestions?
    private var agent: PairingAgent?
    private let onReport: ReportHandler
    private let onFinish: FinishHandler
    private var discovery: Discovery!
    /// Notify subscriptions, the birds' and a guest's (`subscribeGuest`).
    private(set) var subscriptions: NotifySubscriptions!
    /// Several adapters as one pool (`--adapter hci0,hci1`, `all`); nil for one adapter.
    private(set) var pool: PoolAdapters?
    /// The fleet was told the pool's adapters once (see `poolChanged`).
    private var poolAnnounced = false

    // Loop-confined state.
    private(set) var fleet: BirdFleet
    private var timers: [BirdFleet.Timer: EventLoop.TimerID] = [:]
    /// Each connected bird's ATT MTU (a notification carries at most MTU − 3 bytes).
    private var linkMTUs: [ObjectPath: Int] = [:]
    /// What was tried through each adapter (`adapterHealth`).
    private(set) var counters = AdapterCounters()
    /// Bumped when bluetoothd goes: an adapter reset under way is dropped.
    private var resetGeneration = 0

    /// Every Bird heard with its RSSI (on the loop): a gateway of a fleet
    /// reports how well it hears each bird.
    public var onHeard: ((_ address: BluetoothAddress, _ rssi: Int16) -> Void)?

    /// Every device heard advertising through the adapters in use, Bird or
    /// not (on the loop): a Bluetooth proxy passes them on. Discovery hears
    /// every device only with `AdapterOptions.hearsEveryDevice`.
    public var onAdvertisement: ((Device) -> Void)?

    /// A guest's links (Home Assistant's, through the proxy; see
    /// `CentralDriver+Guests`): each link asked for, until it is answered;
    /// what to tell of links that went, of values, and of free slots.
    var guestReplies: [BluetoothAddress: (Result<ObjectPath, BlueZError>) -> Void] = [:]
    public var onGuestUnlinked: ((BluetoothAddress) -> Void)?
    public var onGuestValue: ((ObjectPath, [UInt8]) -> Void)?
    public var onGuestSlotsChanged: (() -> Void)? { didSet { guestSlotsTold = nil } }
    var guestSlotsTold: (free: Int, limit: Int)?

    var client: BlueZClient { core.client }
    var loop: EventLoop { core.connection.loop }

    /// `person`: asks a person to confirm a pairing's passkey and shows the
    /// codes to type; without one pairing is Just Works (NoInputNoOutput).
    public init(
        connection: Connection, fleet: BirdFleet, options: AdapterOptions = AdapterOptions(),
        person: PairingQuestions? = nil,
        onReport: @escaping ReportHandler, onFinish: @escaping FinishHandler
    ) {
        // A command about one bird loads only that bird from BlueZ's cache;
        // `--all` loads the adapters, and devices enter as they are heard.
        core = DriverCore(connection: connection, options: options, scope: fleet.whatToLoad)
        self.person = person
        self.fleet = fleet
        self.onReport = onReport
        self.onFinish = onFinish
    }

    public func start() {
        core.start(prepare: { [self] client in
            discovery = Discovery(client: client, everyDevice: core.options.hearsEveryDevice)
            if core.options.isPool { pool = PoolAdapters(client: client, options: core.options) }
            subscriptions = NotifySubscriptions(client: client, method: fleet.configuration.notifyMethod)
            core.onFinish { [self] in subscriptions.releaseAll(core.cleanup) }
        }) { [self] event in handle(event) }
    }

    /// SIGINT/SIGTERM: undo what was done, then finish.
    public func stop() {
        loop.execute { [self] in apply { $0.stopRequested() } }
    }

    // MARK: Events from BlueZ

    private func handle(_ event: BlueZEvent) {
        guard !core.isFinished else { return }
        if case .valueChanged(let path, let value) = event {
            onGuestValue?(path, value)
            // The MTU matters only to a value long enough to have been cut;
            // the smallest ATT MTU (23) leaves 20 bytes, so shorter ones skip the lookup.
            let mtu = value.count >= Self.smallestMTU - 3 ? linkMTU(of: path) : nil
            return apply(linksMayChange: false) { $0.valueChanged(path, value, mtu: mtu) }
        }
        if let pool { return handlePooled(event, pool) }
        if let adapter = core.powerChange(event) {
            if adapter.powered {
                apply { [options = core.options] in $0.bluetoothReady(adapter: adapter, requested: options.adapterName) }
            } else {
                discovery.forget()
                apply { $0.adapterPoweredOff(adapter) }
            }
            return
        }
        switch event {
        case .ready:
            discovery.forget()
            chooseAdapter()
        case .unavailable(let error):
            resetGeneration += 1
            discovery.forget()
            core.adapter = nil
            apply { $0.bluetoothUnavailable(error) }
        case .adapterAdded:
            if core.adapter == nil { chooseAdapter() }
        case .adapterRemoved(let path) where path == core.adapter?.path:
            let name = core.adapter?.name ?? ""
            core.adapter = nil
            discovery.forget()
            apply { $0.adapterRemoved(name: name) }
        case .deviceRemoved, .deviceChanged, .characteristicRemoved, .characteristicAdded:
            handleDevice(event)
        default:
            break
        }
        heard(event) { $0.isDescendant(of: core.adapter?.path ?? "/nowhere") }
    }

    /// Devices, links and GATT objects: the same with one adapter or a pool.
    private func handleDevice(_ event: BlueZEvent) {
        switch event {
        case .deviceRemoved(let path):
            linkMTUs[path] = nil
            apply { $0.deviceRemoved(path) }
        case .deviceChanged(let device, let changed):
            if changed.contains(.connected), !device.connected {
                linkMTUs[device.path] = nil  // the next link asks again
                subscriptions.linkEnded(device.path)
                apply { $0.deviceDisconnected(device.path) }
            }
            if changed.contains(.servicesResolved) {
                if device.servicesResolved { resolved(device.path) } else { apply { $0.servicesUnresolved(device.path) } }
            }
            if changed.contains(.paired), device.paired {
                apply { $0.devicePaired(device.path) }
            }
        case .characteristicRemoved(let path):
            apply { $0.characteristicRemoved(path) }
        case .characteristicAdded(let characteristic):
            // Late GATT objects of a device already marked resolved.
            if let device = client.tree.service(characteristic.service)?.device,
                client.tree.device(device)?.servicesResolved == true
            {
                resolved(device)
            }
        default:
            break
        }
    }

    private func sighted(_ sighting: Sighting) {
        if sighting.isBird { counters.count(AdapterPool.adapter(of: sighting.device)) { $0.advertisements += 1 } }
        if let onHeard, let rssi = sighting.rssi, sighting.isBird { onHeard(sighting.address, rssi) }
        apply { $0.deviceSighted(sighting) }
    }

    /// The events of several adapters as one pool: the adapters' comings and
    /// goings become the fleet's `adaptersChanged`; devices are as with one.
    private func handlePooled(_ event: BlueZEvent, _ pool: PoolAdapters) {
        switch event {
        case .ready:
            pool.forgetAll()
            poolChanged(pool)
        case .unavailable(let error):
            resetGeneration += 1
            pool.forgetAll()
            core.adapter = nil
            apply { $0.bluetoothUnavailable(error) }
        case .adapterAdded(let adapter) where pool.isMember(adapter):
            poolChanged(pool)
        case .adapterRemoved(let path) where pool.members.contains(where: { $0.path == path }):
            poolChanged(pool)
        case .adapterChanged(let adapter, let names) where names.contains(.powered) && pool.isMember(adapter):
            poolChanged(pool)
        case .deviceRemoved, .deviceChanged, .characteristicRemoved, .characteristicAdded:
            // What happens to devices, links and GATT objects is the same with one adapter.
            handleDevice(event)
        default:
            break
        }
        heard(event, on: pool.holds)
    }

    /// A device heard through an adapter in use: a Bird is sighted, and every
    /// device goes to `onAdvertisement`.
    private func heard(_ event: BlueZEvent, on isInUse: (ObjectPath) -> Bool) {
        if let onAdvertisement, let device = event.advertisingDevice, device.hasSignal, isInUse(device.path) {
            onAdvertisement(device)
        }
        if let sighting = Sighting(event), isInUse(sighting.device) { sighted(sighting) }
    }

    private func poolChanged(_ pool: PoolAdapters) {
        guard client.isReady else { return }
        let members = pool.refresh { [self] failure in apply { $0.adapterFailed(failure) } }
        core.adapter = members.first(where: \.powered) ?? members.first
        // At start, adapters being powered on (--power-on): their Powered change comes back here.
        if !poolAnnounced, core.options.powerOn, !members.isEmpty, !members.contains(where: \.powered) { return }
        poolAnnounced = true
        apply { [requested = pool.requested] in $0.adaptersChanged(members, requested: requested) }
    }

    private func chooseAdapter() {
        guard client.isReady else { return }
        // The fleet decides what a missing or powered-off adapter means (fail
        // at start, wait later); powering on waits for Powered to change.
        let step = core.selectAdapter { [self] failure in apply { $0.adapterFailed(failure) } }
        if case .poweringOn = step { return }
        apply { [adapter = core.adapter, options = core.options] in
            $0.bluetoothReady(adapter: adapter, requested: options.adapterName)
        }
    }

    /// `loaded`: what is below the device was just loaded (see `BlueZClient.loadBelow`).
    private func resolved(_ device: ObjectPath, loaded: Bool = false) {
        let characteristics = client.tree.birdCharacteristics(of: device)
        // A guest's device: its GATT objects BlueZ announced before this run are loaded.
        let missing = fleet.isGuest(device) ? client.tree.services(of: device).isEmpty
            : characteristics.isEmpty && fleet.currentDevices.contains(device)
        if missing, !loaded, !client.holdsEveryDevice {
            return client.loadBelow(device) { [self] in resolved(device, loaded: true) }
        }
        // The link went while its GATT objects were loaded: its services are
        // no longer resolved, and the fleet must not count it as a link again.
        if loaded, client.tree.device(device)?.servicesResolved != true { return }
        // Asked before anything is subscribed, so the answer comes before any notification.
        if let any = characteristics.values.first {
            client.perform(.characteristicMTU(characteristic: any)) { [self] result in
                if case .success(let mtu?) = result { linkMTUs[device] = mtu }
            }
        }
        apply { $0.servicesResolved(device: device, characteristics: characteristics) }
    }

    /// The smallest ATT MTU there is: a notification of fewer than 20 bytes cannot have been cut.
    private static let smallestMTU = 23

    /// The ATT MTU of the link a characteristic is on, as asked when its
    /// services resolved (or as the tree has it).
    private func linkMTU(of characteristic: ObjectPath) -> Int? {
        for (device, mtu) in linkMTUs where characteristic.isDescendant(of: device) { return mtu }
        return client.tree.mtu(ofCharacteristic: characteristic)
    }

    /// Writes `value` to the bird at `address` on the link a watch holds (on
    /// the loop); the answer is a `written` report. False if no machine follows it.
    public func write(_ address: BluetoothAddress, _ value: BirdValue) -> Bool {
        loop.assertInLoop()
        guard !core.isFinished, let actions = fleet.writeRequested(address, value) else { return false }
        for action in actions { perform(action) }
        return true
    }

    /// A gateway of a fleet holds the bird now: it may be connected (on the loop).
    public func grant(_ address: BluetoothAddress) { apply { $0.grant(address) } }

    /// Another gateway holds the bird now: its link is undone (on the loop).
    public func release(_ address: BluetoothAddress) { apply { $0.release(address) } }

    // MARK: The fleet's actions

    /// Runs one event on the fleet and performs the actions it returns.
    /// `linksMayChange` false: a notification, which changes no link, so the
    /// guest's slots are not looked at (the hot path).
    func apply(linksMayChange: Bool = true, _ event: (inout BirdFleet) -> [BirdFleet.Action]) {
        loop.assertInLoop()
        guard !core.isFinished else { return }
        for action in event(&fleet) { perform(action) }
        if linksMayChange, onGuestSlotsChanged != nil { guestSlotsMayHaveChanged() }
    }

    private func perform(_ action: BirdFleet.Action) {
        switch action {
        case .startScanning(let id, _) where pool != nil:
            for adapter in pool?.adaptersNotDiscovering ?? [] { counters.count(adapter) { $0.discoveryStarts += 1 } }
            pool?.startDiscovery(
                onStarted: heardBefore,
                onFailure: { [self] error in
                    // One adapter of the pool being powered off: its power event decides.
                    if error.kind != .notReady { apply { $0.scanFailed(id, error) } }
                })
        case .startScanning(let id, let address):
            guard let adapter = core.adapter else { return }
            if let address, let known = knownBird(address, on: adapter.path), let id {
                // After the actions of this event: the machine is scanning by then.
                loop.execute { [self] in apply { $0.deviceKnown(id, known) } }
                return
            }
            if !discovery.isOn { counters.count(adapter.path) { $0.discoveryStarts += 1 } }
            discovery.start(on: adapter.path, onStarted: heardBefore, onFailure: { [self] error in apply { $0.scanFailed(id, error) } })
        case .restartDiscovery(let adapter):
            let failed: @Sendable (BlueZError) -> Void = { [self] error in
                // An adapter being powered off is left to its power event.
                if error.kind != .notReady { apply { $0.discoveryRestartFailed(adapter, error) } }
            }
            if let pool {
                if pool.restartDiscovery(on: adapter, onStarted: heardBefore, onFailure: failed) { counters.count(adapter) { $0.discoveryRestarts += 1 } }
                return
            }
            guard discovery.isOn, discovery.adapter == adapter else { return }
            counters.count(adapter) { $0.discoveryRestarts += 1 }
            discovery.stop()
            discovery.start(on: adapter, onStarted: heardBefore, onFailure: failed)
        case .checkDeafAdapter(let adapter, let silentFor):
            counters.count(adapter) { $0.discoveryStalls += 1 }
            connectedDevices(on: adapter) { [self] connected in
                apply { $0.deafAdapterChecked(adapter, silentFor: silentFor, connected: connected.count) }
            }
        case .stopScanning:
            if let pool { return pool.stopDiscovery(core.cleanup) }
            core.cleanup { done in discovery.stop(done: done) }
        case .connect(let id, let device):
            // Connect once a StopDiscovery just asked for is answered, as a
            // person does with bluetoothctl (scan off, then connect): a Connect
            // sent while the kernel is still stopping discovery was seen to
            // wait for a scan that never came back on (the VM tier, kernel 6.1).
            if let pool { return pool.afterPending(on: device) { [self] in connect(id, device) } }
            discovery.afterPending { [self] in connect(id, device) }
        case .disconnect(let device):
            core.cleanup { done in client.perform(.disconnect(device: device)) { _ in done() } }
        case .lookUpLinked(let devices):
            for device in devices {
                client.linkedDevice(device) { [self] linked in
                    guard let linked, let sighting = Sighting(heard: linked) else { return }
                    apply { $0.deviceSighted(sighting, live: false) }
                }
            }
        case .countLinks(let id, let adapter):
            counters.connectFailed(adapter, "timeout")
            connectedDevices(on: adapter) { [self] links in
                apply { $0.connectDeadlinePassed(id, connectedDevices: links, adapter: AdapterPool.name(ofAdapter: adapter)) }
            }
        case .read(let id, let field, let characteristic):
            client.perform(.readValue(characteristic: characteristic)) { [self] result in
                apply { $0.readCompleted(id, field, result) }
            }
        case .write(let id, let characteristic, let bytes):
            client.perform(.writeValue(characteristic: characteristic, bytes, type: .request)) { [self] result in
                apply { $0.writeCompleted(id, result) }
            }
        case .startNotify(let id, let field, let characteristic):
            subscriptions.subscribe(
                characteristic,
                // A socket of this machine's subscription: its notifications are this machine's.
                notified: { [self] path, value, mtu in
                    apply(linksMayChange: false) { $0.valueChanged(path, value, mtu: mtu, ordered: false, of: id) }
                },
                completion: { [self] result in apply { $0.notifyStarted(id, field, result) } })
        case .stopNotify(let characteristic):
            core.cleanup { [subscriptions] done in subscriptions?.unsubscribe(characteristic, done: done) }
        case .pair(let id, let device):
            withAgent { [self] registered in
                guard case .success = registered else { return apply { $0.pairCompleted(id, registered) } }
                // Each machine pairs on its own; one whose pairing ended (Paired
                // came first, or its deadline) takes no notice of a late answer.
                client.perform(.pair(device: device, timeout: fleet.configuration.pairTimeout)) { [self] result in
                    apply { $0.pairCompleted(id, result) }
                }
            }
        case .cancelPairing(let device):
            core.cleanup { done in client.perform(.cancelPairing(device: device)) { _ in done() } }
        case .uncache(let address):
            uncache(address)
        case .resetAdapter(let adapter):
            reset(adapter)
        case .guestLinked(let address, let device):
            guestReplies.removeValue(forKey: address)?(.success(device))
        case .guestFailed(let address, let error):
            guestReplies.removeValue(forKey: address)?(.failure(error))
        case .guestUnlinked(let address):
            onGuestUnlinked?(address)
        case .forget(let id, let address):
            guard let adapter = core.adapter,
                let device = client.tree.device(address: address.description, on: adapter.path)
            else { return apply { $0.forgetCompleted(id, .failure(BlueZError(.notFound))) } }
            client.perform(.removeDevice(adapter: adapter.path, device: device.path)) { [self] result in
                apply { $0.forgetCompleted(id, result) }
            }
        case .armTimer(let timer, let delay):
            cancelTimer(timer)
            timers[timer] = loop.schedule(after: delay) { [self] in
                timers[timer] = nil
                timerFired(timer)
            }
        case .cancelTimer(let timer):
            cancelTimer(timer)
        case .report(let report):
            onReport(report)
        case .finish(let outcome):
            for (_, timer) in timers { loop.cancel(timer) }
            timers.removeAll()
            core.finish { [onFinish] in onFinish(outcome) }
        }
    }

    /// Powers the adapter off and on (`resetAdapter`, or a stalled discovery's).
    private func reset(_ adapter: ObjectPath) {
        counters.count(adapter) { $0.resets += 1 }
        // Every link on it ended first, each answered: Linux 6.1 oopsed
        // (hci_chan_del) when bluetoothd closed a socket whose link the
        // power-off had already dropped. (No attempt goes out meanwhile:
        // the gate holds them.) A cleanup: an exit meanwhile waits for
        // the power-on rather than leave the adapter off.
        let generation = resetGeneration
        core.cleanup { [self] done in
            connectedDevices(on: adapter) { [self] linked in
                let devices = Set(linked + fleet.currentDevices.filter { $0.isDescendant(of: adapter) })
                disconnectAll(Array(devices)) { [self] in
                    // bluetoothd went meanwhile: the reset is moot (its adapter comes back afresh).
                    guard generation == resetGeneration else { return done() }
                    powerCycle(adapter, triesLeft: 2, failed: { [self] error in apply { $0.adapterResetFailed(adapter, error) } }, done: done)
                }
            }
        }
    }

    /// The devices BlueZ heard before discovery went on (see `Discovery.start`):
    /// sightings, but not heard now.
    private func heardBefore(_ heard: [Sighting]) {
        apply { $0.heardBefore(heard) }
    }

    /// Our pairing agent, exported and registered once (bluetoothd asks the
    /// agent of whoever called Pair); unregistered on the way out.
    func withAgent(_ body: @escaping @Sendable (Result<Void, BlueZError>) -> Void) {
        if agent != nil { return body(.success(())) }
        let agent = PairingAgent(connection: core.connection, person: person.map(agentPerson))
        self.agent = agent
        agent.export()
        client.perform(.registerAgent(agent)) { [self] result in
            if case .success = result {
                core.onFinish { [self] in core.cleanup { done in client.perform(.unregisterAgent(agent)) { _ in done() } } }
            }
            body(result)
        }
    }

    /// The agent's questions about a device, put to the person about the bird
    /// being paired there; a device no machine is pairing with is refused.
    private func agentPerson(_ person: PairingQuestions) -> PairingAgent.Person {
        PairingAgent.Person(
            confirm: { [self] device, passkey, answer in
                guard let bird = fleet.pairing(device) else { return answer(false) }
                person.confirm(bird, PairingAgent.passkeyText(passkey), answer)
            },
            display: { [self] device, code in
                if let bird = fleet.pairing(device) { person.display(bird, code) }
            },
            cancel: person.cancel)
    }

    /// Sends machine `id`'s Connect (the gate let it through), unless the
    /// machine gave it up while discovery was being stopped.
    private func connect(_ id: BirdFleet.MachineID, _ device: ObjectPath) {
        guard !core.isFinished else { return }
        guard fleet.awaitsConnect(id, device) else {
            return apply { $0.connectReplied(id, .failure(BlueZError(.other, message: "not sent: given up"))) }
        }
        let connected = client.tree.device(device)?.connected == true
        apply { $0.connectSent(device, whileConnected: connected) }
        let timeout = fleet.configuration.connectTimeout + .seconds(1)
        let adapter = AdapterPool.adapter(of: device)
        counters.count(adapter) { $0.connectAttempts += 1 }
        client.perform(.connect(device: device, timeout: timeout)) { [self] result in
            // A reply after the deadline (which counted it) is nobody's.
            let taken = fleet.awaitsConnect(id, device)
            if taken, case .failure(let error) = result { counters.connectFailed(adapter, error.kind.label) }
            apply { $0.connectReplied(id, result) }
            // ServicesResolved may already be true (cached GATT): no change event will come.
            if taken, case .success = result, client.tree.device(device)?.servicesResolved == true { resolved(device) }
        }
    }

    private func timerFired(_ timer: BirdFleet.Timer) {
        guard !core.isFinished else { return }
        apply { $0.timerFired(timer) }
    }

    private func cancelTimer(_ timer: BirdFleet.Timer) {
        if let id = timers.removeValue(forKey: timer) { loop.cancel(id) }
    }
}
