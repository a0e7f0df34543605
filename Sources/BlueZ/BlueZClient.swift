import DBus

/// A typed client of org.bluez: keeps the object tree current and turns the
/// bus traffic into `BlueZEvent`s.
///
/// Start-up follows the only order that loses nothing: add the match rules,
/// then call GetManagedObjects once, then apply signals. When bluetoothd
/// leaves the bus the tree is dropped (`.unavailable`); when it returns the
/// tree is loaded again (`.ready`).
///
/// The client lives on its connection's loop: events and completions run
/// there, and `tree` may be read there. From elsewhere use `snapshot()`.
public final class BlueZClient: @unchecked Sendable {
    public typealias EventHandler = @Sendable (BlueZEvent) -> Void
    /// bluetoothd's name on the system bus, for messages to people.
    public static let busName = BlueZNames.busName

    public let connection: Connection
    private let onEvent: EventHandler

    // Loop-confined state.
    public private(set) var tree = ObjectTree()
    private enum State { case idle, loading(generation: Int), ready, unavailable }
    private var state = State.idle
    private var generation = 0

    public init(connection: Connection, onEvent: @escaping EventHandler) {
        self.connection = connection
        self.onEvent = onEvent
    }

    /// True (on the loop) once the tree is loaded and bluetoothd is present.
    public var isReady: Bool {
        if case .ready = state { return true }
        return false
    }

    /// Subscribes and loads the tree; the first event is `.ready` or `.unavailable`.
    public func start() {
        connection.subscribe(
            MatchRule(
                sender: BlueZNames.busDriver, interface: BlueZNames.busDriver, member: "NameOwnerChanged",
                arg0: BlueZNames.busName)
        ) { [self] message in nameOwnerChanged(message) }
        connection.subscribe(MatchRule(sender: BlueZNames.busName, interface: BlueZNames.objectManager)) {
            [self] message in objectManagerSignal(message)
        }
        connection.subscribe(
            MatchRule(
                sender: BlueZNames.busName, interface: BlueZNames.properties, member: "PropertiesChanged",
                pathNamespace: ObjectPath(BlueZNames.root))
        ) { [self] message in propertiesChanged(message) }
        connection.loop.execute { [self] in load() }
    }

    /// The tree as it is now, from any thread.
    public func snapshot() async -> ObjectTree {
        await withCheckedContinuation { continuation in
            connection.loop.execute { [self] in continuation.resume(returning: tree) }
        }
    }

    // MARK: Loading

    /// Calls GetManagedObjects; signals that arrive before its reply are
    /// already reflected in it, so they are ignored while loading.
    private func load() {
        generation += 1
        let current = generation
        state = .loading(generation: current)
        perform(.getManagedObjects()) { [self] result in
            guard case .loading(let loading) = state, loading == current else { return }
            switch result {
            case .success(let loaded):
                tree = loaded
                state = .ready
                onEvent(.ready)
            case .failure(let error):
                tree = ObjectTree()
                state = .unavailable
                onEvent(.unavailable(error))
            }
        }
    }

    private func nameOwnerChanged(_ message: Message) {
        guard let arguments = try? message.arguments(), arguments.count == 3,
            let newOwner = arguments[2].string
        else { return }
        if newOwner.isEmpty {
            generation += 1
            tree = ObjectTree()
            state = .unavailable
            onEvent(.unavailable(BlueZError(.bluetoothdNotRunning, message: "bluetoothd left the bus")))
        } else {
            load()
        }
    }

    // MARK: Signals

    private func objectManagerSignal(_ message: Message) {
        guard isReady, let path = message.path, path == "/" else { return }
        guard let arguments = try? message.arguments(), arguments.count == 2,
            let objectPath = arguments[0].objectPath
        else { return }
        if message.member == "InterfacesAdded", let interfaces = ObjectTree.interfaces(arguments[1]) {
            tree.add(objectPath, interfaces: interfaces)
            for name in interfaces.keys.sorted() { announceAdded(objectPath, interface: name) }
        } else if message.member == "InterfacesRemoved", let names = arguments[1].stringArray {
            for name in tree.remove(objectPath, interfaces: names) {
                announceRemoved(objectPath, interface: name)
            }
        }
    }

    private func propertiesChanged(_ message: Message) {
        guard isReady, let path = message.path,
            let arguments = try? message.arguments(), arguments.count >= 2,
            let interface = arguments[0].string, let changed = arguments[1].propertyMap
        else { return }
        let invalidated = arguments.count > 2 ? arguments[2].stringArray ?? [] : []
        guard tree.change(path, interface: interface, changed: changed, invalidated: invalidated) else { return }

        // The hot path: a notification changes Value alone.
        if interface == BlueZNames.gattCharacteristic, changed.count == 1, invalidated.isEmpty,
            let value = changed["Value"]?.bytes
        {
            onEvent(.valueChanged(characteristic: path, value: value))
            return
        }
        let names = Array(changed.keys) + invalidated
        switch interface {
        case BlueZNames.gattCharacteristic:
            if let value = changed["Value"]?.bytes {
                onEvent(.valueChanged(characteristic: path, value: value))
            }
            let others = GattCharacteristic.Changes(names)
            if !others.isEmpty, let characteristic = tree.characteristic(path) {
                onEvent(.characteristicChanged(characteristic, changed: others))
            }
        case BlueZNames.device:
            if let device = tree.device(path) { onEvent(.deviceChanged(device, changed: Device.Changes(names))) }
        case BlueZNames.adapter:
            if let adapter = tree.adapter(path) { onEvent(.adapterChanged(adapter, changed: Adapter.Changes(names))) }
        default:
            break
        }
    }

    private func announceAdded(_ path: ObjectPath, interface: String) {
        switch interface {
        case BlueZNames.adapter: tree.adapter(path).map { onEvent(.adapterAdded($0)) }
        case BlueZNames.device: tree.device(path).map { onEvent(.deviceAdded($0)) }
        case BlueZNames.gattService: tree.service(path).map { onEvent(.serviceAdded($0)) }
        case BlueZNames.gattCharacteristic: tree.characteristic(path).map { onEvent(.characteristicAdded($0)) }
        default: break
        }
    }

    private func announceRemoved(_ path: ObjectPath, interface: String) {
        switch interface {
        case BlueZNames.adapter: onEvent(.adapterRemoved(path))
        case BlueZNames.device: onEvent(.deviceRemoved(path))
        case BlueZNames.gattService: onEvent(.serviceRemoved(path))
        case BlueZNames.gattCharacteristic: onEvent(.characteristicRemoved(path))
        default: break
        }
    }
}
