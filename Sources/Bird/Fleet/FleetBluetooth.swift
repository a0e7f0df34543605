import BlueZ
import DBus

/// Bluetooth as the fleet sees it: the adapter chosen, and with `all`
/// whether the fleet's discovery is on, whether Bluetooth was ever ready,
/// and the watchdog on discovery that hears nothing. A value, no I/O: part
/// of `BirdFleet`, which turns its answers into actions.
struct FleetBluetooth: Sendable {
    /// What the fleet does now that Bluetooth is ready (or not).
    enum Start: Equatable, Sendable {
        /// No usable adapter before Bluetooth was ever ready: the command fails.
        case failed(CommandFailure)
        /// Nothing: discovery is on already, or an outage is waited out.
        case nothing
        /// Discovery on, the first time (`first`) or again after an outage.
        case discovery(first: Bool)
    }

    /// The adapter chosen (with a pool, its first usable one); nil if none.
    var adapter: AdapterChoice?
    /// `all`: discovery is on for the fleet.
    private(set) var discovering = false
    /// `all`: discovery was on at least once.
    private(set) var everReady = false
    /// `all`: restarts discovery that hears nothing (nil: off).
    private(set) var watchdog: DiscoveryWatchdog?

    init(watchdog window: Duration? = nil) {
        watchdog = window.map { DiscoveryWatchdog(window: $0) }
    }

    /// `all`: the adapter is usable (again), or not (`requested`: the
    /// adapter the user named): whether discovery goes on now.
    mutating func ready(requested: String?) -> Start {
        guard let adapter, adapter.powered else {
            if everReady { return .nothing }
            return .failed(adapter.map { .adapterOff($0.name) } ?? .noAdapter(requested))
        }
        guard !discovering else { return .nothing }
        discovering = true
        defer { everReady = true }
        return .discovery(first: !everReady)
    }

    /// The adapter can no longer be used: discovery went with it.
    /// `adapter`: as it is now, if still there (powered off); nil: gone
    /// (removed, or bluetoothd with it), so what the watchdog knew of it
    /// is forgotten (another controller may come under its name).
    mutating func lost(_ adapter: AdapterChoice?) {
        self.adapter = adapter
        discovering = false
        if adapter == nil { watchdog?.forget() }
    }

    /// One adapter of a pool was removed.
    mutating func removed(_ adapter: ObjectPath) { watchdog?.forget(adapter) }

    /// A Bird was heard. `live`: heard now, not found in BlueZ's cache as
    /// discovery started; with its RSSI (BlueZ invalidates the RSSI as
    /// discovery stops: no sign), it shows its adapter hears.
    mutating func heard(_ sighting: Sighting, live: Bool) {
        guard live, sighting.rssi != nil else { return }
        watchdog?.heard(on: AdapterPool.adapter(of: sighting.device))
    }

    /// A window of the watchdog ended (see `DiscoveryWatchdog.windowEnded`):
    /// the deaf adapters among `adapters`; nil without a watchdog.
    mutating func windowEnded(_ adapters: [ObjectPath], lookingFor: Bool) -> [DiscoveryWatchdog.Deafness]? {
        watchdog?.windowEnded(discovering: discovering ? adapters : [], lookingFor: lookingFor)
    }
}
