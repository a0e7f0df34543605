import BlueZ
import DBus

/// Runs BirdCentral machines against BlueZ: feeds them BlueZ events, performs
/// their actions, keeps their timers on the connection's loop. One machine for
/// one peripheral; with `all`, one per Bird found (`watch --all`).
///
/// Loop-confined; `start` and `stop` may be called from anywhere.
public final class CentralDriver: @unchecked Sendable {
    public struct Options: Sendable {
        /// `hci1`; nil: the first powered adapter.
        public var adapterName: String?
        /// Power the adapter on if it is off.
        public var powerOn: Bool
        /// Follow every Bird in range (watch only).
        public var all: Bool

        public init(adapterName: String? = nil, powerOn: Bool = false, all: Bool = false) {
            self.adapterName = adapterName
            self.powerOn = powerOn
            self.all = all
        }
    }

    public typealias ReportHandler = @Sendable (BirdCentral.Report) -> Void
    public typealias FinishHandler = @Sendable (BirdCentral.Outcome) -> Void

    private let connection: Connection
    private let configuration: BirdCentral.Configuration
    private let options: Options
    private let onReport: ReportHandler
    private let onFinish: FinishHandler
    private var client: BlueZClient!
    private var discovery: Discovery!

    // Loop-confined state.
    private var machines: [Int: BirdCentral] = [:]
    private var nextMachine = 0
    private var timers: [TimerKey: EventLoop.TimerID] = [:]
    private var adapter: AdapterChoice?
    private var outcome: BirdCentral.Outcome?
    private var cleanupInFlight = 0
    private var connectQueue: [(machine: Int, device: ObjectPath)] = []
    private var connectInFlight = false
    /// Devices that were connected before our Connect: not ours to disconnect.
    private var borrowedLinks: Set<ObjectPath> = []
    /// Machines that were offered their bird from BlueZ's cache (once each).
    private var offeredKnown: Set<Int> = []
    private var fleetReadings = 0
    /// --all: discovery is on for the fleet; `everReady`: it was at least once.
    private var fleetReady = false
    private var everReady = false
    private var delivery: Once?

    private struct TimerKey: Hashable {
        var machine: Int
        var timer: BirdCentral.Timer
    }
    /// The fleet's own timers (machine -1): scan deadline and duration.
    private static let fleet = -1

    public init(
        connection: Connection, configuration: BirdCentral.Configuration, options: Options = Options(),
        onReport: @escaping ReportHandler, onFinish: @escaping FinishHandler
    ) {
        self.connection = connection
        self.configuration = configuration
        self.options = options
        self.onReport = onReport
        self.onFinish = onFinish
    }

    public func start() {
        connection.loop.execute { [self] in
            client = BlueZClient(connection: connection) { [self] event in handle(event) }
            discovery = Discovery(client: client)
            if !options.all { addMachine(configuration) }
            client.start()
        }
    }

    /// SIGINT/SIGTERM: undo what was done, then finish.
    public func stop() {
        connection.loop.execute { [self] in
            guard outcome == nil else { return }
            if options.all {
                finishFleet(.success)
            } else {
                for id in Array(machines.keys) { apply(id) { $0.stopRequested() } }
            }
        }
    }

    // MARK: Events from BlueZ

    private func handle(_ event: BlueZEvent) {
        guard outcome == nil else { return }
        switch event {
        case .valueChanged(let path, let value):
            for id in Array(machines.keys) { apply(id) { $0.valueChanged(path, value) } }
            return
        case .ready:
            discovery.forget()
            chooseAdapter()
        case .unavailable(let error):
            discovery.forget()
            adapter = nil
            fleetReady = false
            for id in Array(machines.keys) { apply(id) { $0.bluetoothUnavailable(error) } }
            if options.all, !everReady { finishFleet(.failed(.bluetoothUnavailable(error))) }
        case .adapterAdded:
            if adapter == nil { chooseAdapter() }
        case .adapterChanged(let changed, let names) where changed.path == adapter?.path && names.contains(.powered):
            adapter = AdapterChoice(changed)
            if changed.powered {
                readyAll()
            } else {
                discovery.forget()
                fleetReady = false
                for id in Array(machines.keys) { apply(id) { $0.adapterPowered(false, adapter: AdapterChoice(changed)) } }
            }
        case .adapterRemoved(let path) where path == adapter?.path:
            let name = adapter?.name ?? ""
            adapter = nil
            discovery.forget()
            fleetReady = false
            for id in Array(machines.keys) { apply(id) { $0.adapterRemoved(name: name) } }
        case .deviceRemoved(let path):
            for id in Array(machines.keys) { apply(id) { $0.deviceRemoved(path) } }
        case .deviceChanged(let device, let changed):
            if changed.contains(.connected), !device.connected {
                for id in Array(machines.keys) { apply(id) { $0.deviceDisconnected(device.path) } }
            }
            if changed.contains(.servicesResolved), device.servicesResolved {
                resolved(device.path)
            }
        case .characteristicRemoved(let path):
            // A dropping link unresolves its services before the objects go:
            // that is the disconnect's business, not a changed GATT database.
            for id in Array(machines.keys) {
                guard let device = machines[id]?.currentDevice, path.isDescendant(of: device),
                    client.tree.device(device)?.servicesResolved == true
                else { continue }
                apply(id) { $0.characteristicRemoved(path) }
            }
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
        if let sighting = Sighting(event), sighting.device.isDescendant(of: adapter?.path ?? "/nowhere") {
            sighted(sighting)
        }
    }

    private func chooseAdapter() {
        guard client.isReady else { return }
        // The machines decide what a missing or powered-off adapter means
        // (fail at start, wait later); powering on waits for Powered to change.
        switch AdapterStep.select(client, options, onFailure: { [self] failure in finishAll(failure) }) {
        case .missing: adapter = nil
        case .off(let choice): adapter = choice
        case .poweringOn(let choice):
            adapter = choice
            return
        case .ready(let choice): adapter = choice
        }
        readyAll()
    }

    private func readyAll() {
        if options.all {
            readyFleet()
        }
        for id in Array(machines.keys) {
            apply(id) { [adapter, options] in $0.bluetoothReady(adapter: adapter, requested: options.adapterName) }
        }
    }

    private func sighted(_ sighting: Sighting) {
        if options.all, fleetReady, sighting.matches(address: nil, minimumRSSI: configuration.minimumRSSI),
            !machines.values.contains(where: { $0.configuration.address?.uppercased() == sighting.address.uppercased() })
        {
            cancelTimer(TimerKey(machine: Self.fleet, timer: .scan))
            var perBird = configuration
            perBird.address = sighting.address
            perBird.scanTimeout = nil
            perBird.maximumReadings = nil
            perBird.duration = nil
            let id = addMachine(perBird)
            apply(id) { $0.bluetoothReady(adapter: adapter) }
        }
        for id in Array(machines.keys) { apply(id) { $0.deviceSighted(sighting) } }
    }

    /// The bird a machine asks for by address, if BlueZ already knows it on
    /// this adapter and has not offered it to that machine before.
    private func knownTarget(of id: Int, on adapter: ObjectPath) -> Sighting? {
        guard !options.all, let address = machines[id]?.configuration.address,
            !offeredKnown.contains(id),
            let device = client.tree.devices(on: adapter).first(where: { $0.address.uppercased() == address.uppercased() })
        else { return nil }
        offeredKnown.insert(id)
        let sighting = Sighting(known: device)
        return sighting.isBird ? sighting : nil
    }

    private func resolved(_ device: ObjectPath) {
        let characteristics = client.tree.birdCharacteristics(of: device)
        for id in Array(machines.keys) {
            apply(id) { $0.servicesResolved(device: device, characteristics: characteristics) }
        }
    }

    // MARK: Machines and their actions

    @discardableResult
    private func addMachine(_ configuration: BirdCentral.Configuration) -> Int {
        let id = nextMachine
        nextMachine += 1
        machines[id] = BirdCentral(configuration)
        return id
    }

    /// Runs one event on a machine and performs the actions it returns.
    private func apply(_ id: Int, _ event: (inout BirdCentral) -> [BirdCentral.Action]) {
        guard outcome == nil, machines[id] != nil else { return }
        let actions = event(&machines[id]!)
        for action in actions { perform(action, machine: id) }
    }

    private func perform(_ action: BirdCentral.Action, machine id: Int) {
        switch action {
        case .startScanning:
            guard let adapter, !options.all || !discovery.isOn else { return }
            if let known = knownTarget(of: id, on: adapter.path) {
                // After the actions of this event: the machine is scanning by then.
                connection.loop.execute { [self] in apply(id) { $0.deviceKnown(known) } }
                return
            }
            discovery.start(
                on: adapter.path, onStarted: { [self] heard in heard.forEach(sighted) },
                onFailure: { [self] error in apply(id) { $0.scanFailed(error) } })
        case .stopScanning:
            if !options.all { cleanup { done in discovery.stop(done: done) } }
        case .connect(let device):
            connectQueue.append((id, device))
            // Connect once a StopDiscovery just asked for is answered, as a
            // person does with bluetoothctl (scan off, then connect): a Connect
            // sent while the kernel is still stopping discovery was seen to
            // wait for a scan that never came back on (the VM tier, kernel 6.1).
            discovery.afterPending { [self] in connectNext() }
        case .disconnect(let device):
            connectQueue.removeAll { $0.device == device }
            // A link that was up before we connected belongs to someone else
            // (another birdctl, bluetoothctl): leave it up.
            guard borrowedLinks.remove(device) == nil else { return }
            cleanup { done in client.perform(.disconnect(device: device)) { _ in done() } }
        case .read(let field, let characteristic):
            client.perform(.readValue(characteristic: characteristic)) { [self] result in
                apply(id) { $0.readCompleted(field, result) }
            }
        case .write(_, let characteristic, let bytes):
            client.perform(.writeValue(characteristic: characteristic, bytes, type: .request)) { [self] result in
                apply(id) { $0.writeCompleted(result) }
            }
        case .startNotify(let field, let characteristic):
            client.perform(.startNotify(characteristic: characteristic)) { [self] result in
                apply(id) { $0.notifyStarted(field, result.map { _ in }) }
            }
        case .stopNotify(let characteristic):
            cleanup { done in client.perform(.stopNotify(characteristic: characteristic)) { _ in done() } }
        case .armTimer(let timer, let delay):
            let key = TimerKey(machine: id, timer: timer)
            cancelTimer(key)
            timers[key] = connection.loop.schedule(after: delay) { [self] in
                timers[key] = nil
                apply(id) { $0.timerFired(timer) }
            }
        case .cancelTimer(let timer):
            cancelTimer(TimerKey(machine: id, timer: timer))
        case .report(let report):
            onReport(report)
            switch report {
            case .reading: countFleetReading()
            default: break
            }
        case .finish(let result):
            machineFinished(id, result)
        }
    }

    /// One Connect at a time: an LE controller creates one connection at a
    /// time, and bluetoothd 5.66 was seen to die on two concurrent ones
    /// (`watch --all` in the VM tier). Later ones wait, inside their deadline.
    private func connectNext() {
        guard !connectInFlight, !connectQueue.isEmpty else { return }
        let (id, device) = connectQueue.removeFirst()
        guard machines[id] != nil else { return connectNext() }
        connectInFlight = true
        if client.tree.device(device)?.connected == true { borrowedLinks.insert(device) }
        client.perform(.connect(device: device, timeout: configuration.connectTimeout + .seconds(1))) { [self] result in
            connectInFlight = false
            apply(id) { $0.connectReplied(result) }
            // ServicesResolved may already be true (cached GATT): no change event will come.
            if case .success = result, client.tree.device(device)?.servicesResolved == true { resolved(device) }
            connectNext()
        }
    }

    private func cancelTimer(_ key: TimerKey) {
        if let timer = timers.removeValue(forKey: key) { connection.loop.cancel(timer) }
    }

    // MARK: Finishing

    private func machineFinished(_ id: Int, _ result: BirdCentral.Outcome) {
        if options.all {
            // One bird lost is not the end of the fleet: forget it so it can be found again.
            machines[id] = nil
            if case .failed(let failure) = result { onReport(.gaveUp(failure)) }
            return
        }
        finish(result)
    }

    /// How long the way out waits for cleanup replies. bluetoothd holds every
    /// Disconnect for 2 s (DISCONNECT_TIMER, for profiles to let go) and
    /// replies once the link is down: waiting for that reply means the next
    /// command finds the bird disconnected, not a link about to drop under it.
    static let cleanupGrace = Duration.seconds(3)

    /// Called for cleanup calls (StopNotify, Disconnect, StopDiscovery): the
    /// process waits for them, briefly, before it ends.
    private func cleanup(_ body: (@escaping @Sendable () -> Void) -> Void) {
        cleanupInFlight += 1
        body { [self] in
            connection.loop.execute { [self] in
                cleanupInFlight -= 1
                if cleanupInFlight == 0 { delivery?.run() }
            }
        }
    }

    private func finish(_ result: BirdCentral.Outcome) {
        guard outcome == nil else { return }
        outcome = result
        for (_, timer) in timers { connection.loop.cancel(timer) }
        timers.removeAll()
        let delivery = Once { [onFinish] in onFinish(result) }
        self.delivery = delivery
        if cleanupInFlight == 0 {
            delivery.run()
        } else {
            // Never wait long for an unresponsive bluetoothd on the way out.
            connection.loop.schedule(after: Self.cleanupGrace) { delivery.run() }
        }
    }

    private func finishAll(_ failure: BirdCentral.Failure) {
        if options.all { finishFleet(.failed(failure)) } else { finish(.failed(failure)) }
    }

    // MARK: The fleet (watch --all)

    /// The adapter is usable (again): keep discovery on to hear every Bird.
    private func readyFleet() {
        guard let adapter, adapter.powered else {
            if !everReady { finishFleet(.failed(adapter.map { .adapterOff($0.name) } ?? .noAdapter(options.adapterName))) }
            return
        }
        guard !fleetReady else { return }
        fleetReady = true
        startFleetDiscovery()
        if !everReady {
            if let timeout = configuration.scanTimeout { armFleetTimer(.scan, timeout) }
            if let duration = configuration.duration { armFleetTimer(.duration, duration) }
        }
        everReady = true
    }

    private func startFleetDiscovery() {
        guard let adapter, !connectInFlight else { return }
        discovery.start(
            on: adapter.path, onStarted: { [self] heard in heard.forEach(sighted) },
            onFailure: { [self] error in finishFleet(.failed(.failed("start discovery", error))) })
    }

    private func armFleetTimer(_ timer: BirdCentral.Timer, _ delay: Duration) {
        let key = TimerKey(machine: Self.fleet, timer: timer)
        timers[key] = connection.loop.schedule(after: delay) { [self] in
            timers[key] = nil
            switch timer {
            case .scan where machines.isEmpty: finishFleet(.failed(.notFound))
            case .duration: finishFleet(.success)
            default: break
            }
        }
    }

    private func countFleetReading() {
        guard options.all, let maximum = configuration.maximumReadings else { return }
        fleetReadings += 1
        if fleetReadings == maximum {
            // After the machine's current actions, not in the middle of them.
            connection.loop.schedule(after: .zero) { [self] in finishFleet(.success) }
        }
    }

    /// Stops every machine (StopNotify, Disconnect) and discovery, then finishes.
    private func finishFleet(_ result: BirdCentral.Outcome) {
        guard outcome == nil else { return }
        for id in Array(machines.keys) {
            let actions = machines[id]!.stopRequested()
            for action in actions {
                if case .finish = action { continue }
                perform(action, machine: id)
            }
        }
        machines.removeAll()
        cleanup { done in discovery.stop(done: done) }
        finish(result)
    }
}
