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
    public typealias FinishHandler = @Sendable (CommandOutcome, [ScanResult]) -> Void

    private let core: DriverCore
    private let minimumRSSI: Int?
    private let timeout: Duration?
    private let onFound: FoundHandler
    private let onFinish: FinishHandler
    private var discovery: Discovery!

    private var results: [String: ScanResult] = [:]
    private var announced: Set<String> = []
    private var scanning = false

    public init(
        connection: Connection, options: AdapterOptions, minimumRSSI: Int?, timeout: Duration?,
        onFound: @escaping FoundHandler, onFinish: @escaping FinishHandler
    ) {
        core = DriverCore(connection: connection, options: options)
        self.minimumRSSI = minimumRSSI
        self.timeout = timeout
        self.onFound = onFound
        self.onFinish = onFinish
    }

    public func start() {
        core.start(prepare: { [self] client in discovery = Discovery(client: client) }) { [self] event in handle(event) }
    }

    /// Ctrl-C: the list so far is the result.
    public func stop() {
        core.connection.loop.execute { [self] in finish(results.isEmpty ? .interrupted : .success) }
    }

    private func handle(_ event: BlueZEvent) {
        guard !core.isFinished else { return }
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

    private func begin() {
        guard !scanning else { return }
        guard let choice = core.usableAdapter(fail: { [self] failure in finish(.failed(failure)) }) else { return }
        scanning = true
        discovery.start(
            on: choice.path, onStarted: { [self] heard in heard.forEach(sighted) },
            onFailure: { [self] error in finish(.failed(.failed("start discovery", error))) })
        if let timeout {
            core.connection.loop.schedule(after: timeout) { [self] in finish(results.isEmpty ? .failed(.notFound) : .success) }
        }
    }

    private func sighted(_ sighting: Sighting) {
        guard sighting.isBird, sighting.device.isDescendant(of: core.adapter?.path ?? "/nowhere") else { return }
        let key = sighting.address.uppercased()
        let now = MonotonicInstant.now
        var result = results[key] ?? ScanResult(address: sighting.address, name: sighting.name, rssi: nil, history: RSSIHistory())
        if let rssi = sighting.rssi { result.history.add(rssi, at: now) }
        result.rssi = result.history.smoothed(at: now)
        if let name = sighting.name { result.name = name }
        results[key] = result
        if let minimumRSSI, (result.rssi ?? Int.min) < minimumRSSI { return }
        if announced.insert(key).inserted { onFound(result) }
    }

    private func finish(_ outcome: CommandOutcome) {
        guard !core.isFinished else { return }
        let now = MonotonicInstant.now
        let list = results.values
            .filter { minimumRSSI == nil || ($0.rssi ?? Int.min) >= minimumRSSI! }
            .map { result -> ScanResult in
                var updated = result
                updated.rssi = result.history.smoothed(at: now)
                return updated
            }
            .sorted { ($0.rssi ?? Int.min, $1.address) > ($1.rssi ?? Int.min, $0.address) }
        if scanning {
            scanning = false
            core.cleanup { done in discovery.stop(done: done) }
        }
        core.finish { [onFinish] in onFinish(outcome, list) }
    }
}
