import DBus

/// The Birds a scan has heard, by address: each one's RSSI history and when
/// it was last heard. A Bird unseen for `forgetAfter` is forgotten with its
/// history, so a scan that runs for ever holds only what has been around
/// lately; heard again, it is new, and announced again. A value, no I/O:
/// `ScanDriver` forgets from a timer (`sweepInterval`), never per sighting.
public struct ScanResults: Sendable {
    /// How long a Bird may go unheard before it is forgotten.
    public let forgetAfter: Duration
    /// Birds heard weaker (smoothed) are remembered but not announced or listed.
    public let minimumRSSI: Int?
    private var entries: [BluetoothAddress: Entry] = [:]

    private struct Entry: Sendable {
        var result: ScanResult
        var lastHeard: MonotonicInstant
        var announced: Bool
    }

    public init(forgetAfter: Duration, minimumRSSI: Int? = nil) {
        self.forgetAfter = forgetAfter
        self.minimumRSSI = minimumRSSI
    }

    /// How many Birds are remembered.
    public var count: Int { entries.count }

    public var isEmpty: Bool { entries.isEmpty }

    /// How often the driver forgets: a Bird is forgotten between
    /// `forgetAfter` and `forgetAfter` + this after it was last heard.
    public var sweepInterval: Duration { max(forgetAfter / 10, .milliseconds(10)) }

    /// A Bird heard: its result, updated. Returned when it is to be announced:
    /// the first time it is heard strongly enough since it was (re)learnt.
    public mutating func heard(address: BluetoothAddress, name: String?, rssi: Int16?, at now: MonotonicInstant) -> ScanResult? {
        var entry = entries[address]
            ?? Entry(result: ScanResult(address: address, name: name, rssi: nil, history: RSSIHistory()), lastHeard: now,
                     announced: false)
        if let rssi { entry.result.history.add(rssi, at: now) }
        entry.result.rssi = entry.result.history.smoothed(at: now)
        if let name { entry.result.name = name }
        entry.lastHeard = now
        let announce = !entry.announced && isStrongEnough(entry.result)
        if announce { entry.announced = true }
        entries[address] = entry
        return announce ? entry.result : nil
    }

    /// Forgets the Birds last heard more than `forgetAfter` before `now`;
    /// returns how many.
    @discardableResult
    public mutating func forgetUnheard(at now: MonotonicInstant) -> Int {
        let before = entries.count
        let cutoff = now - forgetAfter
        entries = entries.filter { $0.value.lastHeard >= cutoff }
        return before - entries.count
    }

    /// The Birds heard strongly enough, their RSSI smoothed as of `now`, strongest first.
    public func list(at now: MonotonicInstant) -> [ScanResult] {
        entries.values.map(\.result)
            .filter(isStrongEnough)
            .map { result -> ScanResult in
                var updated = result
                updated.rssi = result.history.smoothed(at: now)
                return updated
            }
            .sorted { ($0.rssi ?? Int.min, $1.address) > ($1.rssi ?? Int.min, $0.address) }
    }

    private func isStrongEnough(_ result: ScanResult) -> Bool {
        guard let minimumRSSI else { return true }
        return (result.rssi ?? Int.min) >= minimumRSSI
    }
}
