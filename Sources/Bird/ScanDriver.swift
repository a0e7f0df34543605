import BlueZ
import DBus

/// One Bird heard by `scan`, with its smoothed signal strength.
public struct ScanResult: Hashable, Sendable {
    public var address: String
    public var name: String?
    /// Recency-weighted average of the recent RSSI samples, in dBm.
    public var rssi: Int?
    public var history: RSSIHistory

    public init(address: String, name: String?, rssi: Int?, history: RSSIHistory) {
        self.address = address
        self.name = name
        self.rssi = rssi
        self.history = history
    }
}

/// `birdctl scan`: discovery with the Bird filter, re-checked here, reporting
/// each Bird the first time it is heard and the whole list, strongest first, at the end.
/// Loop-confined; `start` and `stop` may be called from anywhere.
public final class ScanDriver: @unchecked Sendable {
    public typealias FoundHandler = @Sendable (ScanResult) -> Void
    public typealias FinishHandler = @Sendable (BirdCentral.Outcome, [ScanResult]) -> Void

    private let connection: Connection
    private let options: CentralDriver.Options
    private let minimumRSSI: Int?
    private let timeout: Duration?
    private let onFound: FoundHandler
    private let onFinish: FinishHandler
    private var client: BlueZClient!
    private var discovery: Discovery!

    private var adapter: AdapterChoice?
    private var results: [String: ScanResult] = [:]
    private var announced: Set<String> = []
    private var scanning = false
    private var finished = false

    public init(
        connection: Connection, options: CentralDriver.Options, minimumRSSI: Int?, timeout: Duration?,
        onFound: @escaping FoundHandler, onFinish: @escaping FinishHandler
    ) {
        self.connection = connection
        self.options = options
        self.minimumRSSI = minimumRSSI
        self.timeout = timeout
        self.onFound = onFound
        self.onFinish = onFinish
    }

    public func start() {
        connection.loop.execute { [self] in
            client = BlueZClient(connection: connection) { [self] event in handle(event) }
            discovery = Discovery(client: client)
            client.start()
        }
    }

    /// Ctrl-C: the list so far is the result.
    public func stop() {
        connection.loop.execute { [self] in finish(results.isEmpty ? .interrupted : .success) }
    }

    private func handle(_ event: BlueZEvent) {
        guard !finished else { return }
        switch event {
        case .ready:
            begin()
        case .unavailable(let error):
            finish(.failed(.unavailable(error)))
        case .adapterChanged(let changed, let names) where changed.path == adapter?.path && names.contains(.powered):
            if changed.powered { begin() } else if scanning { finish(.failed(.adapterOff(AdapterChoice(changed).name))) }
        case .adapterRemoved(let path) where path == adapter?.path:
            finish(.failed(.noAdapter(adapter?.name)))
        default:
            if scanning, let sighting = Sighting(event) { sighted(sighting) }
        }
    }

    private func begin() {
        guard !scanning else { return }
        let selected = AdapterStep.selectNow(client, options) { [self] failure in finish(.failed(failure)) }
        adapter = selected.adapter
        guard selected.usable, let choice = selected.adapter else { return }
        scanning = true
        discovery.start(
            on: choice.path, onStarted: { [self] heard in heard.forEach(sighted) },
            onFailure: { [self] error in finish(.failed(.failed("start discovery", error))) })
        if let timeout {
            connection.loop.schedule(after: timeout) { [self] in finish(results.isEmpty ? .failed(.notFound) : .success) }
        }
    }

    private func sighted(_ sighting: Sighting) {
        guard sighting.isBird, sighting.device.isDescendant(of: adapter?.path ?? "/nowhere") else { return }
        let key = sighting.address.uppercased()
        let now = ContinuousClock.now
        var result = results[key] ?? ScanResult(address: sighting.address, name: sighting.name, rssi: nil, history: RSSIHistory())
        if let rssi = sighting.rssi { result.history.add(rssi, at: now) }
        result.rssi = result.history.smoothed(at: now)
        if let name = sighting.name { result.name = name }
        results[key] = result
        if let minimumRSSI, (result.rssi ?? Int.min) < minimumRSSI { return }
        if announced.insert(key).inserted { onFound(result) }
    }

    private func finish(_ outcome: BirdCentral.Outcome) {
        guard !finished else { return }
        finished = true
        let now = ContinuousClock.now
        let list = results.values
            .filter { minimumRSSI == nil || ($0.rssi ?? Int.min) >= minimumRSSI! }
            .map { result -> ScanResult in
                var updated = result
                updated.rssi = result.history.smoothed(at: now)
                return updated
            }
            .sorted { ($0.rssi ?? Int.min, $1.address) > ($1.rssi ?? Int.min, $0.address) }
        let report = Once { [onFinish] in onFinish(outcome, list) }
        if scanning {
            scanning = false
            discovery.stop { report.run() }
            // Never wait long for an unresponsive bluetoothd on the way out.
            connection.loop.schedule(after: .seconds(2)) { report.run() }
        } else {
            report.run()
        }
    }
}

