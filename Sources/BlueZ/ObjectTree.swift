import DBus
import Synchronization

/// BlueZ's objects as GetManagedObjects describes them: path → interface →
/// property → value. A plain value, changed only by the three ObjectManager /
/// Properties events, so it can be checked against a fresh GetManagedObjects.
public struct ObjectTree: Hashable, Sendable {
    public typealias Properties = [String: DBusValue]
    public private(set) var objects: [ObjectPath: [String: Properties]] = [:]
    /// Drawn anew whenever a key is added to or removed from `objects`, an
    /// object's interfaces or an interface's properties. While it stays,
    /// indices into those dictionaries stay valid (in copies too):
    /// `NotificationSlots` keeps some. Not part of the tree's value (== and
    /// hash are `objects`').
    private(set) var structure = ObjectTree.newStructure()

    public init() {}

    public static func == (a: ObjectTree, b: ObjectTree) -> Bool { a.objects == b.objects }

    public func hash(into hasher: inout Hasher) { hasher.combine(objects) }

    private static let structures = Atomic<Int>(0)

    private static func newStructure() -> Int { structures.add(1, ordering: .relaxed).newValue }

    /// GetManagedObjects' reply as `Message.managedObjects()` decodes it.
    init(objects: [ObjectPath: [String: Properties]]) {
        self.objects = objects
    }

    /// Parses a GetManagedObjects reply (`a{oa{sa{sv}}}`) decoded as one value.
    public init(managedObjects value: DBusValue) throws(BlueZError) {
        guard let entries = value.dictionaryEntries else {
            throw BlueZError(.unexpectedReply, message: "GetManagedObjects returned \(value.signature)")
        }
        objects.reserveCapacity(entries.count)
        for entry in entries {
            guard let path = entry.key.objectPath, let interfaces = ObjectTree.interfaces(entry.value) else {
                throw BlueZError(.unexpectedReply, message: "GetManagedObjects entry of type \(entry.value.signature)")
            }
            objects[path] = interfaces
        }
    }

    /// `a{sa{sv}}` as nested dictionaries; nil for any other shape.
    static func interfaces(_ value: DBusValue) -> [String: Properties]? {
        guard let entries = value.dictionaryEntries else { return nil }
        var result: [String: Properties] = [:]
        for entry in entries {
            guard let name = entry.key.string, let properties = entry.value.propertyMap else { return nil }
            result[name] = properties
        }
        return result
    }

    // MARK: Changes

    /// InterfacesAdded: merges the interfaces into the object (creating it).
    public mutating func add(_ path: ObjectPath, interfaces: [String: Properties]) {
        structure = Self.newStructure()
        objects[path, default: [:]].merge(interfaces) { old, new in old.merging(new) { $1 } }
    }

    /// A GetAll reply: the interface's properties as they are now (the object is created).
    mutating func set(_ path: ObjectPath, interface: String, properties: Properties) {
        structure = Self.newStructure()
        objects[path, default: [:]][interface] = properties
    }

    /// InterfacesRemoved: drops the interfaces, and the object once it has none.
    /// Returns the interfaces that were there.
    @discardableResult
    public mutating func remove(_ path: ObjectPath, interfaces: [String]) -> [String] {
        guard objects[path] != nil else { return [] }
        structure = Self.newStructure()
        var removed: [String] = []
        for name in interfaces where objects[path]?.removeValue(forKey: name) != nil {
            removed.append(name)
        }
        if objects[path]?.isEmpty == true {
            objects[path] = nil
            // A dictionary keeps the room it once needed: after a crowd has
            // come and gone (devices BlueZ forgets), give it back.
            if objects.capacity > 1024, objects.count < objects.capacity / 8 {
                var shrunk: [ObjectPath: [String: Properties]] = .init(minimumCapacity: objects.count)
                for (path, interfaces) in objects { shrunk[path] = interfaces }
                objects = shrunk
            }
        }
        return removed
    }

    /// PropertiesChanged. Returns false when the object or interface is not in
    /// the tree (BlueZ would not send that; the change is ignored).
    @discardableResult
    public mutating func change(
        _ path: ObjectPath, interface: String, changed: Properties, invalidated: [String] = []
    ) -> Bool {
        // One lookup of the path and the interface.
        guard let object = objects.index(forKey: path),
            let slot = objects.values[object].index(forKey: interface)
        else { return false }
        var keysChanged = false
        for (name, value) in changed where objects.values[object].values[slot].updateValue(value, forKey: name) == nil {
            keysChanged = true
        }
        for name in invalidated where objects.values[object].values[slot].removeValue(forKey: name) != nil {
            keysChanged = true
        }
        if keysChanged { structure = Self.newStructure() }
        return true
    }

    /// Where the characteristic at `path` keeps its properties (indices
    /// valid while `structure` stays); nil when the tree does not have it.
    func characteristicSlot(_ path: ObjectPath) -> NotificationSlots.Slot? {
        guard let object = objects.index(forKey: path),
            let interface = objects.values[object].index(forKey: BlueZNames.gattCharacteristic)
        else { return nil }
        return NotificationSlots.Slot(
            path: objects.keys[object], structure: structure, object: object, interface: interface,
            value: objects.values[object].values[interface].index(forKey: "Value"))
    }

    /// A notification: `bytes` become the Value at `slot` (which holds for this structure).
    mutating func setValue(_ bytes: [UInt8], at slot: NotificationSlots.Slot) {
        if let value = slot.value {
            // Without hashing "Value" (see docs/performance.md, 'The signal path').
            objects.values[slot.object].values[slot.interface].values[value] = .bytes(bytes)
        } else {
            // BlueZ had not read it yet: the key is new.
            objects.values[slot.object].values[slot.interface]["Value"] = .bytes(bytes)
            structure = Self.newStructure()
        }
    }

    // MARK: Typed views

    public func properties(_ path: ObjectPath, _ interface: String) -> Properties? {
        objects[path]?[interface]
    }

    public var adapters: [Adapter] {
        objects.compactMap { path, interfaces in interfaces[BlueZNames.adapter].flatMap { Adapter(path: path, $0) } }
            .sorted { $0.path < $1.path }
    }

    public func adapter(_ path: ObjectPath) -> Adapter? {
        properties(path, BlueZNames.adapter).flatMap { Adapter(path: path, $0) }
    }

    public func device(_ path: ObjectPath) -> Device? {
        properties(path, BlueZNames.device).flatMap { Device(path: path, $0) }
    }

    /// Every device BlueZ knows on `adapter` (cached ones included).
    public func devices(on adapter: ObjectPath) -> [Device] {
        views(under: adapter, BlueZNames.device, Device.init)
    }

    /// The devices on `adapter` BlueZ heard recently (they have an RSSI) or
    /// is connected to. Only those get a view: BlueZ may cache thousands.
    public func devicesInRange(on adapter: ObjectPath) -> [Device] {
        views(under: adapter, BlueZNames.device, Device.init) { $0["RSSI"] != nil || $0["Connected"]?.bool == true }
    }

    /// The device at `address` on `adapter`, looked up by the path BlueZ
    /// names it by, else by its Address property (no view of the others).
    public func device(address: String, on adapter: ObjectPath) -> Device? {
        if let device = device(Self.devicePath(address, on: adapter)),
            device.address.uppercased() == address.uppercased()
        {
            return device
        }
        let wanted = address.uppercased()
        return views(under: adapter, BlueZNames.device, Device.init) { $0["Address"]?.string?.uppercased() == wanted }
            .first
    }

    /// The path BlueZ gives the device at `address` on `adapter`.
    public static func devicePath(_ address: String, on adapter: ObjectPath) -> ObjectPath {
        ObjectPath(adapter.rawValue + "/" + pathElement(ofDevice: address))
    }

    /// `dev_F0_0D_B1_7D_00_01`: the path element BlueZ gives a device.
    static func pathElement(ofDevice address: String) -> String {
        "dev_" + String(address.uppercased().map { $0 == ":" ? "_" : $0 })
    }

    public func service(_ path: ObjectPath) -> GattService? {
        properties(path, BlueZNames.gattService).flatMap { GattService(path: path, $0) }
    }

    public func characteristic(_ path: ObjectPath) -> GattCharacteristic? {
        properties(path, BlueZNames.gattCharacteristic).flatMap { GattCharacteristic(path: path, $0) }
    }

    /// The ATT MTU of the link a characteristic is read over (BlueZ 5.62 and
    /// later); nil when BlueZ does not say. Read on every notification, so it
    /// builds no view.
    public func mtu(ofCharacteristic path: ObjectPath) -> Int? {
        properties(path, BlueZNames.gattCharacteristic)?["MTU"]?.integer.flatMap { Int(exactly: $0) }
    }

    /// The GATT services resolved on a device.
    public func services(of device: ObjectPath) -> [GattService] {
        views(under: device, BlueZNames.gattService, GattService.init)
    }

    /// The characteristics of a service (or of all services of a device).
    public func characteristics(under parent: ObjectPath) -> [GattCharacteristic] {
        views(under: parent, BlueZNames.gattCharacteristic, GattCharacteristic.init)
    }

    /// The descriptors of a characteristic (or of everything below `parent`).
    public func descriptors(under parent: ObjectPath) -> [GattDescriptor] {
        views(under: parent, BlueZNames.gattDescriptor, GattDescriptor.init)
    }

    /// Typed views of the objects below `parent` with `interface` whose
    /// properties pass `wanted`, by path. Sorted on the paths themselves:
    /// through a key path, each comparison went through the runtime (most of
    /// a scan with a large cache; docs/performance.md, 'A scan with 10,000
    /// cached devices').
    private func views<View>(
        under parent: ObjectPath, _ interface: String, _ make: (ObjectPath, Properties) -> View?,
        where wanted: (Properties) -> Bool = { _ in true }
    ) -> [View] {
        var found: [(path: ObjectPath, view: View)] = []
        for (objectPath, interfaces) in objects where objectPath.isDescendant(of: parent) {
            guard let properties = interfaces[interface], wanted(properties), let view = make(objectPath, properties)
            else { continue }
            found.append((objectPath, view))
        }
        return found.sorted { $0.path < $1.path }.map(\.view)
    }
}
