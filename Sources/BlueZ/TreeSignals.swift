import DBus

// What BlueZ's signals do to the tree, and the events they stand for: pure,
// so every sequence of signals can be tested and fuzzed without a bus.

extension ObjectTree {
    /// InterfacesAdded / InterfacesRemoved from BlueZ's object manager (at "/").
    public mutating func applyObjectManagerSignal(_ message: Message, emit: (BlueZEvent) -> Void) {
        guard let path = message.path, path == "/", let arguments = try? message.arguments(), arguments.count == 2,
            let objectPath = arguments[0].objectPath
        else { return }
        if message.member == "InterfacesAdded", let interfaces = ObjectTree.interfaces(arguments[1]) {
            add(objectPath, interfaces: interfaces)
            for name in interfaces.keys.sorted() { announceAdded(objectPath, interface: name, emit) }
        } else if message.member == "InterfacesRemoved", let names = arguments[1].stringArray {
            for name in remove(objectPath, interfaces: names) { ObjectTree.announceRemoved(objectPath, interface: name, emit) }
        }
    }

    private static let characteristicInterface = CString(BlueZNames.gattCharacteristic)
    private static let value = CString("Value")

    /// What `applyNotification` did with a PropertiesChanged.
    public enum NotificationOutcome: Equatable {
        /// A characteristic's Value alone changed: the tree has it, and
        /// `characteristic` is the tree's own key.
        case applied(characteristic: ObjectPath, value: [UInt8])
        /// A Value change of an object the tree does not have (ignored).
        case unknownObject
        /// Anything else: for `applyOtherPropertiesChanged`.
        case notAValueChange
    }

    /// The hot path, every notification: a PropertiesChanged of Value alone,
    /// read without a value tree. Returned, not emitted, so that the client
    /// hands it on without buffering events. `slots`, kept by the caller
    /// from one notification to the next, find where the tree keeps the
    /// characteristic's Value without a lookup.
    public mutating func applyNotification(_ message: Message, slots: inout NotificationSlots) -> NotificationOutcome {
        guard let bytes = message.singleBytePropertyChange(interface: Self.characteristicInterface, property: Self.value)
        else { return .notAValueChange }
        if let slot = slots.slot(for: message, structure: structure) {
            setValue(bytes, at: slot)
            return .applied(characteristic: slot.path, value: bytes)
        }
        guard let path = message.path else { return .notAValueChange }
        guard let slot = characteristicSlot(path) else { return .unknownObject }
        setValue(bytes, at: slot)
        slots.remember(slot)
        return .applied(characteristic: slot.path, value: bytes)
    }

    /// PropertiesChanged of an object under /org/bluez (the hot path included).
    public mutating func applyPropertiesChanged(
        _ message: Message, slots: inout NotificationSlots, emit: (BlueZEvent) -> Void
    ) {
        switch applyNotification(message, slots: &slots) {
        case .applied(let path, let value): emit(.valueChanged(characteristic: path, value: value))
        case .unknownObject: break
        case .notAValueChange: applyOtherPropertiesChanged(message, emit: emit)
        }
    }

    /// A PropertiesChanged `applyNotification` declined, decoded whole.
    /// Returns false when the tree lacks the object or interface (or the
    /// signal is malformed): nothing changed.
    @discardableResult
    public mutating func applyOtherPropertiesChanged(_ message: Message, emit: (BlueZEvent) -> Void) -> Bool {
        guard let path = message.path, let arguments = try? message.arguments(), arguments.count >= 2,
            let interface = arguments[0].string, let changed = arguments[1].propertyMap
        else { return false }
        let invalidated = arguments.count > 2 ? arguments[2].stringArray ?? [] : []
        guard change(path, interface: interface, changed: changed, invalidated: invalidated) else { return false }
        let names = Array(changed.keys) + invalidated
        switch interface {
        case BlueZNames.gattCharacteristic:
            if let value = changed["Value"]?.bytes {
                emit(.valueChanged(characteristic: path, value: value))
            }
            let others = GattCharacteristic.Changes(names)
            if !others.isEmpty, let characteristic = characteristic(path) {
                emit(.characteristicChanged(characteristic, changed: others))
            }
        case BlueZNames.device:
            if let device = device(path) { emit(.deviceChanged(device, changed: Device.Changes(names))) }
        case BlueZNames.adapter:
            if let adapter = adapter(path) { emit(.adapterChanged(adapter, changed: Adapter.Changes(names))) }
        default:
            break
        }
        return true
    }

    /// A device the tree lacks, directly under one of its adapters, whose
    /// advertising data changed (RSSI, ManufacturerData, …; `Device.Changes.advertisement`):
    /// BlueZ cached it before the tree was loaded, and it was just heard
    /// again. Its path; nil for any other signal.
    public func unknownDeviceHeard(_ message: Message) -> ObjectPath? {
        guard let path = message.path, objects[path] == nil, let adapter = path.parent,
            properties(adapter, BlueZNames.adapter) != nil,
            let arguments = try? message.arguments(), arguments.count >= 2,
            arguments[0].string == BlueZNames.device, let changed = arguments[1].propertyMap,
            !Device.Changes(changed.keys).isDisjoint(with: .advertisement)
        else { return nil }
        return path
    }

    private func announceAdded(_ path: ObjectPath, interface: String, _ emit: (BlueZEvent) -> Void) {
        switch interface {
        case BlueZNames.adapter: adapter(path).map { emit(.adapterAdded($0)) }
        case BlueZNames.device: device(path).map { emit(.deviceAdded($0)) }
        case BlueZNames.gattService: service(path).map { emit(.serviceAdded($0)) }
        case BlueZNames.gattCharacteristic: characteristic(path).map { emit(.characteristicAdded($0)) }
        default: break
        }
    }

    private static func announceRemoved(_ path: ObjectPath, interface: String, _ emit: (BlueZEvent) -> Void) {
        switch interface {
        case BlueZNames.adapter: emit(.adapterRemoved(path))
        case BlueZNames.device: emit(.deviceRemoved(path))
        case BlueZNames.gattService: emit(.serviceRemoved(path))
        case BlueZNames.gattCharacteristic: emit(.characteristicRemoved(path))
        default: break
        }
    }
}
