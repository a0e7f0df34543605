import DBus

// Typed views of the BlueZ interfaces birdctl uses. Each is built from a
// property map and tolerates properties it does not know; a missing or
// mistyped required property makes the view nil rather than a crash.

/// org.bluez.Adapter1
public struct Adapter: Hashable, Sendable {
    public var path: ObjectPath
    public var address: String
    public var name: String
    public var alias: String
    public var powered: Bool
    public var discovering: Bool

    /// The adapter's short name, e.g. `hci0`.
    public var interfaceName: String { String(path.rawValue.split(separator: "/").last ?? "") }

    init?(path: ObjectPath, _ p: ObjectTree.Properties) {
        guard let address = p["Address"]?.string else { return nil }
        self.path = path
        self.address = address
        self.name = p["Name"]?.string ?? ""
        self.alias = p["Alias"]?.string ?? name
        self.powered = p["Powered"]?.bool ?? false
        self.discovering = p["Discovering"]?.bool ?? false
    }
}

/// org.bluez.Device1
public struct Device: Hashable, Sendable {
    public var path: ObjectPath
    public var adapter: ObjectPath
    public var address: String
    public var addressType: String?
    public var name: String?
    public var alias: String?
    /// Signal strength in dBm; nil when BlueZ has none or the controller said
    /// "not available" (HCI's 127, which emulated controllers always send).
    public var rssi: Int16?
    /// BlueZ has an RSSI for the device: it heard it in the current (or the
    /// just-ended) discovery. BlueZ drops the RSSI of every device when a
    /// discovery is cleaned up, so cached devices out of range have none.
    public var hasSignal: Bool
    public var txPower: Int16?
    /// Lower-case UUIDs, advertised or resolved.
    public var uuids: [String]
    public var connected: Bool
    public var servicesResolved: Bool
    public var paired: Bool
    public var manufacturerData: [UInt16: [UInt8]]
    public var serviceData: [String: [UInt8]]

    init?(path: ObjectPath, _ p: ObjectTree.Properties) {
        guard let address = p["Address"]?.string else { return nil }
        self.path = path
        self.address = address
        self.adapter = p["Adapter"]?.objectPath ?? path.parent ?? "/"
        self.addressType = p["AddressType"]?.string
        self.name = p["Name"]?.string
        self.alias = p["Alias"]?.string
        self.hasSignal = p["RSSI"] != nil
        self.rssi = p["RSSI"]?.integer.flatMap { Int16(exactly: $0) }.flatMap { $0 == 127 ? nil : $0 }
        self.txPower = p["TxPower"]?.integer.flatMap { Int16(exactly: $0) }
        self.uuids = (p["UUIDs"]?.stringArray ?? []).map { $0.lowercased() }
        self.connected = p["Connected"]?.bool ?? false
        self.servicesResolved = p["ServicesResolved"]?.bool ?? false
        self.paired = p["Paired"]?.bool ?? false
        var manufacturerData: [UInt16: [UInt8]] = [:]
        for entry in p["ManufacturerData"]?.dictionaryEntries ?? [] {
            if let id = entry.key.integer.flatMap({ UInt16(exactly: $0) }), let bytes = entry.value.bytes {
                manufacturerData[id] = bytes
            }
        }
        self.manufacturerData = manufacturerData
        var serviceData: [String: [UInt8]] = [:]
        for entry in p["ServiceData"]?.dictionaryEntries ?? [] {
            if let uuid = entry.key.string, let bytes = entry.value.bytes { serviceData[uuid.lowercased()] = bytes }
        }
        self.serviceData = serviceData
    }

    /// Whether the device advertises (or has resolved) a service, compared case-insensitively.
    public func offers(service uuid: String) -> Bool { uuids.contains(uuid.lowercased()) }
}

/// org.bluez.GattService1
public struct GattService: Hashable, Sendable {
    public var path: ObjectPath
    public var uuid: String
    public var device: ObjectPath
    public var primary: Bool
    /// Its attribute handle on the peer (the service declaration's), if BlueZ says.
    public var handle: UInt16?

    init?(path: ObjectPath, _ p: ObjectTree.Properties) {
        guard let uuid = p["UUID"]?.string, let device = p["Device"]?.objectPath else { return nil }
        self.path = path
        self.uuid = uuid.lowercased()
        self.device = device
        self.primary = p["Primary"]?.bool ?? true
        self.handle = p["Handle"]?.integer.flatMap { UInt16(exactly: $0) }
    }
}

/// org.bluez.GattCharacteristic1
public struct GattCharacteristic: Hashable, Sendable {
    public var path: ObjectPath
    public var uuid: String
    public var service: ObjectPath
    public var flags: [String]
    public var notifying: Bool
    /// The last value BlueZ has cached (read or notified).
    public var value: [UInt8]
    /// The link's ATT MTU, if BlueZ says (5.62 and later).
    public var mtu: Int?
    /// Whether a client holds the notifications through AcquireNotify; nil
    /// when BlueZ does not offer AcquireNotify for this characteristic.
    public var notifyAcquired: Bool?
    /// The characteristic declaration's attribute handle on the peer, if
    /// BlueZ says; its value's handle is the next one.
    public var handle: UInt16?

    init?(path: ObjectPath, _ p: ObjectTree.Properties) {
        guard let uuid = p["UUID"]?.string, let service = p["Service"]?.objectPath else { return nil }
        self.handle = p["Handle"]?.integer.flatMap { UInt16(exactly: $0) }
        self.path = path
        self.uuid = uuid.lowercased()
        self.service = service
        self.flags = p["Flags"]?.stringArray ?? []
        self.notifying = p["Notifying"]?.bool ?? false
        self.value = p["Value"]?.bytes ?? []
        self.mtu = p["MTU"]?.integer.flatMap { Int(exactly: $0) }
        self.notifyAcquired = p["NotifyAcquired"]?.bool
    }

    public var canRead: Bool { flags.contains("read") }
    public var canNotify: Bool { flags.contains("notify") || flags.contains("indicate") }
}

/// org.bluez.GattDescriptor1
public struct GattDescriptor: Hashable, Sendable {
    public var path: ObjectPath
    public var uuid: String
    public var characteristic: ObjectPath
    /// Its attribute handle on the peer, if BlueZ says.
    public var handle: UInt16?

    init?(path: ObjectPath, _ p: ObjectTree.Properties) {
        guard let uuid = p["UUID"]?.string, let characteristic = p["Characteristic"]?.objectPath else { return nil }
        self.path = path
        self.uuid = uuid.lowercased()
        self.characteristic = characteristic
        self.handle = p["Handle"]?.integer.flatMap { UInt16(exactly: $0) }
    }
}
