import DBus

/// `watch --all`: discovery that is on but hears nothing. bluetoothd and
/// controllers sometimes stop passing advertisements on while `Discovering`
/// stays true, and a bird that needs finding again (its link lost) is then
/// never found. Time is cut in windows of `window`; an adapter that heard a
/// Bird before, whose discovery is on, and that heard no Bird at all in a
/// window during which a bird was looked for (at its start and at its end)
/// is deaf:
///
/// - its first deaf window, its discovery is restarted (off and on: the
///   controller's scan is set up afresh);
/// - the second in a row, and then the 4th, 8th, … (at most every 64th), it
///   is *stalled*: said, and powered off and on if nothing is connected on it
///   (a power cycle would end those links; else its discovery is restarted);
/// - the windows between restart its discovery again.
///
/// Silence while no bird is looked for is no sign (held birds often stop
/// advertising), and ends the count; an adapter that never heard a Bird is
/// not watched (no bird may be in its range). Pure: the fleet feeds it and
/// performs its steps. Bounded by the adapters.
struct DiscoveryWatchdog: Sendable {
    /// habluetooth's scanner watchdog waits 90 s; birdctl listens only for
    /// the Bird Service, so its own advertisements are what it hears.
    static let defaultWindow = Duration.seconds(60)

    enum Step: Equatable, Sendable {
        /// Discovery off and on.
        case restart
        /// Still deaf after a restart: said; powered off and on if nothing is connected on it.
        case stalled
    }

    /// A deaf adapter: what to do, and for how long it has heard nothing.
    struct Deafness: Equatable, Sendable {
        var adapter: ObjectPath
        var step: Step
        var silentFor: Duration
    }

    let window: Duration
    /// Adapters that heard a Bird in this window.
    private var heardNow: Set<ObjectPath> = []
    /// Adapters that heard a Bird since they came (the watched ones).
    private var heardEver: Set<ObjectPath> = []
    /// Deaf windows in a row, per watched adapter.
    private var deafWindows: [ObjectPath: Int] = [:]
    /// Whether a bird was looked for when the last window ended (this one's start).
    private var lookingForAtStart = false

    init(window: Duration) { self.window = window }

    /// A Bird's advertisement came through `adapter` (once a window costs more than a set lookup).
    mutating func heard(on adapter: ObjectPath) {
        if heardNow.insert(adapter).inserted { heardEver.insert(adapter) }
    }

    /// A window ended. `discovering`: the adapters whose discovery is on;
    /// `lookingFor`: whether a bird is looked for (or being connected to:
    /// Linux makes the link once it hears the bird). Returns each deaf
    /// adapter's step, in path order.
    mutating func windowEnded(discovering: [ObjectPath], lookingFor: Bool) -> [Deafness] {
        defer { (heardNow, lookingForAtStart) = ([], lookingFor) }
        let watched = lookingFor && lookingForAtStart ? Set(discovering).intersection(heardEver).subtracting(heardNow) : []
        // A window not watched (a Bird heard, none looked for, discovery off) ends the count.
        deafWindows = deafWindows.filter { watched.contains($0.key) }
        return watched.sorted { $0.rawValue < $1.rawValue }.map { adapter in
            let deaf = deafWindows[adapter, default: 0] + 1
            deafWindows[adapter] = deaf
            return Deafness(adapter: adapter, step: Self.isStalled(deaf) ? .stalled : .restart, silentFor: window * deaf)
        }
    }

    /// The adapter went (removed, or bluetoothd gone; nil: all): what it
    /// heard is no longer a sign of what it will. (Powered off and on, it is
    /// the same controller in the same place: still watched.)
    mutating func forget(_ adapter: ObjectPath? = nil) {
        guard let adapter else {
            (heardNow, heardEver, deafWindows) = ([], [], [:])
            return
        }
        heardNow.remove(adapter)
        heardEver.remove(adapter)
        deafWindows[adapter] = nil
    }

    /// Deaf windows in a row that count as a stall: 2, 4, 8, …, 64, then every 64th.
    static func isStalled(_ windows: Int) -> Bool {
        windows >= 2 && (windows % 64 == 0 || windows & (windows - 1) == 0)
    }
}
