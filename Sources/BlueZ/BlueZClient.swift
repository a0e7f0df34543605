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
/// there, and `tree` may be read there (tests read it from elsewhere
/// through FakeBlueZSupport's `snapshot()`).
public final class BlueZClient: @unchecked Sendable {
    public typealias EventHandler = @Sendable (BlueZEvent) -> Void
    /// bluetoothd's name on the system bus, for messages to people.
    public static let busName = BlueZNames.busName

    public let connection: Connection
    private let onEvent: EventHandler

    /// What the client loads of BlueZ's objects at start (and when bluetoothd
    /// returns). GetManagedObjects' reply grows with every device BlueZ ever
    /// cached; the other two do not.
    public enum Scope: Hashable, Sendable {
        /// Every object (GetManagedObjects).
        case everything
        /// The adapters, and the device at this address with its GATT
        /// objects (`FocusedLoad`); other devices only as bluetoothd announces them.
        case device(address: String)
        /// The adapters only (`FocusedLoad`): devices enter as bluetoothd
        /// announces them (InterfacesAdded) or as they are heard again
        /// (`HeardDevices`: the first advertising change of a device the tree lacks).
        case adapters
    }

    public let scope: Scope
    /// The address of `.device`: load only this device (and the adapters), not BlueZ's whole cache.
    public var focus: String? {
        if case .device(let address) = scope { address } else { nil }
    }
    /// Whether the tree holds every device BlueZ has (else what needs them
    /// all asks GetManagedObjects).
    public var holdsEveryDevice: Bool { scope == .everything }

    // Loop-confined state.
    public internal(set) var tree = ObjectTree()
    var pendingEvents: [BlueZEvent] = []
    /// Where the tree keeps the Values of the characteristics that notified last.
    private var notificationSlots = NotificationSlots()
    private enum State { case idle, loading(generation: Int), ready, unavailable }
    private var state = State.idle
    private var generation = 0
    /// Devices heard again whose GetAll is in flight (`.adapters`).
    var heardDevices = HeardDevices()

    public init(connection: Connection, scope: Scope, onEvent: @escaping EventHandler) {
        self.connection = connection
        self.scope = scope
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

    // MARK: Loading

    /// Calls GetManagedObjects; signals that arrive before its reply are
    /// already reflected in it, so they are ignored while loading. With
    /// another scope, a `FocusedLoad` instead, under which signals are applied.
    private func load() {
        connection.loop.assertInLoop()
        generation += 1
        let current = generation
        state = .loading(generation: current)
        tree = ObjectTree()
        heardDevices = HeardDevices()
        if scope == .everything {
            perform(.getManagedObjects()) { [self] result in loaded(generation: current, result) }
        } else {
            let load = FocusedLoad(client: self, address: focus) { [self] in
                if case .loading(let loading) = state { loading == current } else { false }
            }
            load.start { [self] result in
                loaded(generation: current, result.map { tree })
            }
        }
    }

    /// The generation of the tree now: a reply asked for under an older one changes nothing.
    var treeGeneration: Int { generation }

    private func loaded(generation current: Int, _ result: Result<ObjectTree, BlueZError>) {
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

    /// Whether signals are applied now: once ready, and under a focused load.
    private var appliesSignals: Bool {
        switch state {
        case .ready: true
        case .loading: scope != .everything
        case .idle, .unavailable: false
        }
    }

    private func nameOwnerChanged(_ message: Message) {
        guard let arguments = try? message.arguments(), arguments.count == 3,
            let newOwner = arguments[2].string
        else { return }
        if newOwner.isEmpty {
            generation += 1
            tree = ObjectTree()
            heardDevices = HeardDevices()
            state = .unavailable
            onEvent(.unavailable(BlueZError(.bluetoothdNotRunning, message: "bluetoothd left the bus")))
        } else {
            load()
        }
    }

    // MARK: Signals

    private func objectManagerSignal(_ message: Message) {
        guard appliesSignals else { return }
        tree.applyObjectManagerSignal(message) { pendingEvents.append($0) }
        deliverPendingEvents()
    }

    private func propertiesChanged(_ message: Message) {
        guard appliesSignals else { return }
        // A notification: one event, handed on once the tree has it.
        switch tree.applyNotification(message, slots: &notificationSlots) {
        case .applied(let path, let value):
            if isReady { onEvent(.valueChanged(characteristic: path, value: value)) }
        case .unknownObject:
            break
        case .notAValueChange:
            let known = tree.applyOtherPropertiesChanged(message) { pendingEvents.append($0) }
            deliverPendingEvents()
            if !known, scope == .adapters, let device = tree.unknownDeviceHeard(message) { heard(device) }
        }
    }

    /// Events go out once the tree is updated (handlers read it), from a
    /// buffer kept between signals (this runs per notification).
    func deliverPendingEvents() {
        // Not before `.ready`: handlers expect a loaded tree.
        if isReady { for event in pendingEvents { onEvent(event) } }
        pendingEvents.removeAll(keepingCapacity: true)
    }
}
