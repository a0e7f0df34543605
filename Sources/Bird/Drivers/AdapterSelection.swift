import BlueZ
import DBus

/// The adapter a command uses: the one named, or the first powered one.
public struct AdapterChoice: Hashable, Sendable {
    public var path: ObjectPath
    public var name: String
    public var powered: Bool
    /// Its Bluetooth address (the controller's, kept across restarts and renames).
    public var address: BluetoothAddress?

    public init(path: ObjectPath, name: String, powered: Bool, address: BluetoothAddress? = nil) {
        self.path = path
        self.name = name
        self.powered = powered
        self.address = address
    }

    /// nil when there is no adapter (or not the one named). With no name,
    /// prefers a powered adapter, else the first (so "powered off" can be said).
    public static func choose(from adapters: [AdapterChoice], named wanted: String?) -> AdapterChoice? {
        if let wanted { return adapters.first { $0.name == wanted } }
        return adapters.first(where: \.powered) ?? adapters.first
    }
}

/// Which adapter a command uses, and whether it may power it on.
public struct AdapterOptions: Sendable {
    /// `hci1`; nil: the first powered adapter. With a pool, the names as given (`hci0,hci1`, `all`).
    public var adapterName: String?
    /// Power the adapter on if it is off.
    public var powerOn: Bool
    /// Several adapters as one pool (`watch --all`, `scan`): their names, or
    /// nil for every adapter BlueZ has (those added later too); nil with `isPool` false.
    public var pool: [String]?
    public private(set) var isPool = false
    /// Discovery hears every LE device, not only Birds, and passes on each
    /// change of its RSSI (a Bluetooth proxy forwards them all).
    public var hearsEveryDevice = false

    public init(adapterName: String? = nil, powerOn: Bool = false) {
        self.adapterName = adapterName
        self.powerOn = powerOn
    }

    /// Several adapters as one pool: these names, or every adapter (`names` nil).
    public init(pool names: [String]?, powerOn: Bool = false) {
        self.adapterName = names?.joined(separator: ",") ?? "all"
        self.powerOn = powerOn
        self.pool = names
        self.isPool = true
    }

    /// The adapters of the pool among these (all of them with `all`), in the order given.
    public func members(of adapters: [AdapterChoice]) -> [AdapterChoice] {
        guard let pool else { return adapters }
        return pool.compactMap { name in adapters.first { $0.name == name } }
    }
}

/// Where the chosen adapter stands when a command starts (shared by scan,
/// read/watch/set and serve so they behave alike).
enum AdapterStep {
    /// No adapter, or none with the name asked for.
    case missing
    /// Powered off and `--power-on` not given.
    case off(AdapterChoice)
    /// Powered off; a power-on was requested: wait for Powered to change.
    case poweringOn(AdapterChoice)
    case ready(AdapterChoice)

    /// Chooses the adapter in `client`'s tree and, if it is off and the options
    /// say so, asks BlueZ to power it on (`onFailure` runs if it refuses).
    static func select(
        _ client: BlueZClient, _ options: AdapterOptions,
        onFailure: @escaping @Sendable (CommandFailure) -> Void
    ) -> AdapterStep {
        guard let choice = AdapterChoice.choose(from: client.tree.adapterChoices, named: options.adapterName) else {
            return .missing
        }
        guard !choice.powered else { return .ready(choice) }
        guard options.powerOn else { return .off(choice) }
        client.perform(.setPowered(adapter: choice.path, true)) { result in
            if case .failure(let error) = result { onFailure(.failed("power on \(choice.name)", error)) }
        }
        return .poweringOn(choice)
    }
}
