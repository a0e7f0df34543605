import BlueZ
import DBus

/// One Bird heard by `scan`, with its smoothed signal strength.
public struct ScanResult: Hashable, Sendable {
    public var address: BluetoothAddress
    public var name: String?
    /// Recency-weighted average of the recent RSSI samples, in dBm.
    public var rssi: Int?
    public var history: RSSIHistory

    public init(address: BluetoothAddress, name: String?, rssi: Int?, history: RSSIHistory) {
        self.address = address
        self.name = name
        self.rssi = rssi
        self.history = history
    }
}

/// `birdctl scan`: discovery with the Bird filter, re-checked here, reporting
/// each Bird the first time it is heard and the whole list, strongest first, at the end.
/// A Bird unheard for `forgetAfter` is forgotten (`ScanResults`), and reported
/// again when it is heard again.
///
/// Its client loads the adapters only (`BlueZClient.Scope.adapters`): devices
/// come in as bluetoothd announces them or as they are heard again, so the
/// scan's cost does not grow with the devices BlueZ remembers.
/// Loop-confined; `start` and `stop` may be called from anywhere.
public final class ScanDriver: @unchecked Sendable {
    public typealias FoundHandler = @Sendable (ScanResult) -> Void
    public typealias FinishHandler = @Sendable (CommandOutcome, [ScanResult]) -> Void

    /// How long a Bird may go unheard before a scan forgets it, unless told otherwise.
    public static let defaultForgetAfter = BirdFleet.defaultForgetAfter

    private let core: DriverCore
    private let timeout: Duration?
    private let onFound: FoundHandler
    private let onFinish: FinishHandler
    private var discovery: Discovery!
    /// Several adapters as one pool (`--adapter hci0,hci1`, `all`): discovery on each; nil for one adapter.
    private var pool: PoolAdapters?

    private var results: ScanResults
    /// The timer that forgets unheard Birds; armed while any is remembered.
    private var sweep: EventLoop.TimerID?
    private var scanning = false
    /// Whether any Bird was reported (the exit status), forgotten since or not.
    private var foundAny = false
    /// Per adapter: Bird advertisements heard and discovery starts (`--metrics`).
    private var counters = AdapterCounters()

    public init(
        connection: Connection, options: AdapterOptions, minimumRSSI: Int?, timeout: Duration?,
        forgetAfter: Duration = ScanDriver.defaultForgetAfter,
        onFound: @escaping FoundHandler, onFinish: @escaping FinishHandler
    ) {
        core = DriverCore(connection: connection, options: options, scope: .adapters)
        results = ScanResults(forgetAfter: forgetAfter, minimumRSSI: minimumRSSI)
        self.timeout = timeout
        self.onFound = onFound
        self.onFinish = onFinish
    }

    public func start() {
        core.start(prepare: { [self] client in
            discovery = Discovery(client: client)
            if core.options.isPool { pool = PoolAdapters(client: client, options: core.options) }
        }) { [self] event in handle(event) }
    }

    /// What each adapter heard (`--metrics`; on the loop). A scan makes no links.
    public func adapterHealth() -> [AdapterHealth] {
        core.connection.loop.assertInLoop()
        let members = pool?.members.map(\.path) ?? core.adapter.map { [$0.path] } ?? []
        return counters.health(with: members).map(\.health)
    }

    /// Ctrl-C: the list so far is the result.
    public func stop() {
        core.connection.loop.execute { [self] in finish(foundAny ? .success : .interrupted) }
    }

    private func handle(_ event: BlueZEvent) {
        core.connection.loop.assertInLoop()
        guard !core.isFinished else { return }
        if let pool { return handlePooled(event, pool) }
        if let adapter = core.powerChange(event) {
            if adapter.powered { begin() } else if scanning { finish(.failed(.adapterOff(adapter.name))) }
            return
        }
        switch event {
        case .ready:
            begin()
        case .unavailable(let error):
            finish(.failed(.unavailable(error)))
        case .adapterRemoved(let path) where path == core.adapter?.path:
            finish(.failed(.noAdapter(core.adapter?.name)))
        default:
            if scanning, let sighting = Sighting(event) { sighted(sighting) }
        }
    }

    /// A pool: discovery on each of its powered adapters, those that come
    /// later too; the scan ends when none is left (as with one adapter).
    private func handlePooled(_ event: BlueZEvent, _ pool: PoolAdapters) {
        switch event {
        case .ready:
            beginPooled(pool)
        case .unavailable(let error):
            finish(.failed(.unavailable(error)))
        case .adapterAdded(let adapter) where pool.isMember(adapter):
            beginPooled(pool)
        case .adapterChanged(let adapter, let names) where names.contains(.powered) && pool.isMember(adapter):
            beginPooled(pool)
        case .adapterRemoved(let path) where pool.members.contains(where: { $0.path == path }):
            beginPooled(pool)
        default:
            if scanning, let sighting = Sighting(event) { sighted(sighting) }
        }
    }

    private func beginPooled(_ pool: PoolAdapters) {
        let members = pool.refresh { [self] failure in finish(.failed(failure)) }
        guard members.contains(where: \.powered) else {
            // Being powered on (--power-on): its Powered change comes back here.
            if core.options.powerOn && !members.isEmpty && !scanning { return }
            return finish(.failed(members.first.map { .adapterOff($0.name) } ?? .noAdapter(pool.requested)))
        }
        for adapter in pool.adaptersNotDiscovering { counters.count(adapter) { $0.discoveryStarts += 1 } }
        pool.startDiscovery(
            onStarted: { [self] heard in heard.forEach(sighted) },
            onFailure: { [self] error in
                // One adapter of the pool being powered off: its power event decides.
                if error.kind != .notReady { finish(.failed(.failed("start discovery", error))) }
            })
        guard !scanning else { return }
        scanning = true
        if let timeout {
            core.connection.loop.schedule(after: timeout) { [self] in finish(foundAny ? .success : .failed(.notFound)) }
        }
    }

    private func begin() {
        guard !scanning else { return }
        guard let choice = core.usableAdapter(fail: { [self] failure in finish(.failed(failure)) }) else { return }
        scanning = true
        counters.count(choice.path) { $0.discoveryStarts += 1 }
        discovery.start(
            on: choice.path, onStarted: { [self] heard in heard.forEach(sighted) },
            onFailure: { [self] error in finish(.failed(.failed("start discovery", error))) })
        if let timeout {
            core.connection.loop.schedule(after: timeout) { [self] in finish(foundAny ? .success : .failed(.notFound)) }
        }
    }

    private func sighted(_ sighting: Sighting) {
        guard !core.isFinished, sighting.isBird,
            pool?.holds(sighting.device) ?? sighting.device.isDescendant(of: core.adapter?.path ?? "/nowhere")
        else { return }
        counters.count(AdapterPool.adapter(of: sighting.device)) { $0.advertisements += 1 }
        let found = results.heard(address: sighting.address, name: sighting.name, rssi: sighting.rssi, at: .now)
        if sweep == nil { armSweep() }
        if let found {
            foundAny = true
            onFound(found)
        }
    }

    /// Forgets unheard Birds every `sweepInterval` while any is remembered:
    /// one pass over them per interval, none per sighting.
    private func armSweep() {
        sweep = core.connection.loop.schedule(after: results.sweepInterval) { [self] in
            sweep = nil
            guard !core.isFinished else { return }
            results.forgetUnheard(at: .now)
            if !results.isEmpty { armSweep() }
        }
    }

    private func finish(_ outcome: CommandOutcome) {
        core.connection.loop.assertInLoop()
        guard !core.isFinished else { return }
        let list = results.list(at: .now)
        if let sweep { core.connection.loop.cancel(sweep) }
        sweep = nil
        if scanning {
            scanning = false
            if let pool { pool.stopDiscovery(core.cleanup) } else { core.cleanup { done in discovery.stop(done: done) } }
        }
        core.finish { [onFinish] in onFinish(outcome, list) }
    }
}
