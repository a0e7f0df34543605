import BlueZ
import DBus

/// A connected device's GATT database as the API numbers it, made from
/// BlueZ's objects: services, characteristics and descriptors by handle, and
/// the handles a client's requests name, back to BlueZ's objects.
///
/// Handles are the peer's attribute handles, as an ESP32 proxy gives them
/// (Home Assistant caches a device's services for every proxy alike): a
/// service by its declaration's handle, a characteristic by its **value's**
/// handle (BlueZ's `Handle` is the declaration's; the value's is the next),
/// a descriptor by its own. A newer bluetoothd says them as `Handle`; an
/// older bluetoothd (Debian 12's 5.66) says them only in its objects' names
/// (`service000a/char000b/desc000d`, in hex), where they are taken from.
/// Objects with neither get numbers of this table's own, in path order,
/// from 0x10000: past any peer's 16-bit handles, so that services Home
/// Assistant kept from another proxy never name one of them.
public struct GATTTable: Sendable {
    public enum Target: Equatable, Sendable {
        case characteristic(ObjectPath)
        /// A descriptor; `configuresNotifications`: the Client Characteristic
        /// Configuration (0x2902) of `characteristic`, which BlueZ does not
        /// let a client write (its StartNotify does).
        case descriptor(ObjectPath, characteristic: ObjectPath, configuresNotifications: Bool)
    }

    public let services: [BluetoothGATTService]
    private let targets: [UInt32: Target]

    /// The Client Characteristic Configuration descriptor's UUID.
    static let clientConfiguration = "00002902-0000-1000-8000-00805f9b34fb"

    public init(services: [GattService], characteristics: [GattCharacteristic], descriptors: [GattDescriptor]) {
        let said: [ObjectPath: UInt16] = Dictionary(
            services.map { ($0.path, $0.handle ?? Self.named($0.path)) }
                + characteristics.map { ($0.path, $0.handle ?? Self.named($0.path)) }
                + descriptors.map { ($0.path, $0.handle ?? Self.named($0.path)) },
            uniquingKeysWith: { first, _ in first }
        ).compactMapValues { $0 }
        let known = said.count == services.count + characteristics.count + descriptors.count
        var next: UInt32 = 0x1_0000
        /// The handle BlueZ says of `path` (plus `offset`), or the next of our own.
        func handle(_ path: ObjectPath, offset: UInt32 = 0) -> UInt32 {
            if known, let handle = said[path] { return UInt32(handle) + offset }
            defer { next += 1 }
            return next
        }
        var targets: [UInt32: Target] = [:]
        var built: [BluetoothGATTService] = []
        for service in services {
            var api = BluetoothGATTService()
            api.handle = handle(service.path)
            api.uuid = Self.uuidWords(service.uuid)
            for characteristic in characteristics where characteristic.service == service.path {
                var apiCharacteristic = BluetoothGATTCharacteristic()
                apiCharacteristic.handle = handle(characteristic.path, offset: 1)
                apiCharacteristic.uuid = Self.uuidWords(characteristic.uuid)
                apiCharacteristic.properties = Self.properties(characteristic.flags)
                targets[apiCharacteristic.handle] = .characteristic(characteristic.path)
                for descriptor in descriptors where descriptor.characteristic == characteristic.path {
                    var apiDescriptor = BluetoothGATTDescriptor()
                    apiDescriptor.handle = handle(descriptor.path)
                    apiDescriptor.uuid = Self.uuidWords(descriptor.uuid)
                    targets[apiDescriptor.handle] = .descriptor(
                        descriptor.path, characteristic: characteristic.path,
                        configuresNotifications: descriptor.uuid == Self.clientConfiguration)
                    apiCharacteristic.descriptors.append(apiDescriptor)
                }
                api.characteristics.append(apiCharacteristic)
            }
            built.append(api)
        }
        self.services = built
        self.targets = targets
    }

    /// What a request's handle names; nil for a handle of nothing here.
    public func target(_ handle: UInt32) -> Target? { targets[handle] }

    /// The API handle of a characteristic (its notifications are sent under it).
    public func handle(of characteristic: ObjectPath) -> UInt32? {
        targets.first { $0.value == .characteristic(characteristic) }?.key
    }

    /// The handle in the last element of a bluetoothd object's name
    /// (`service`, `char` or `desc` and four hex digits); nil for another name.
    static func named(_ path: ObjectPath) -> UInt16? {
        let last = path.rawValue.split(separator: "/").last ?? ""
        for prefix in ["service", "char", "desc"] where last.hasPrefix(prefix) {
            let digits = last.dropFirst(prefix.count)
            guard digits.utf8.count == 4, digits.allSatisfy(\.isHexDigit) else { return nil }
            return UInt16(digits, radix: 16)
        }
        return nil
    }

    /// A UUID as the API carries it: its 128 bits as two words, high first
    /// (a 16-bit UUID on the Bluetooth base, as BlueZ writes it, is already
    /// 128 bits). Text that is no UUID is all zeros.
    static func uuidWords(_ text: String) -> [UInt64] {
        let hex = text.filter { $0 != "-" }
        guard hex.utf8.count == 32, let high = UInt64(hex.prefix(16), radix: 16), let low = UInt64(hex.suffix(16), radix: 16)
        else { return [0, 0] }
        return [high, low]
    }

    /// The characteristic's properties as GATT's property byte, from BlueZ's flags.
    static func properties(_ flags: [String]) -> UInt32 {
        let bits: [String: UInt32] = [
            "broadcast": 0x01, "read": 0x02, "write-without-response": 0x04, "write": 0x08, "notify": 0x10,
            "indicate": 0x20, "authenticated-signed-writes": 0x40, "extended-properties": 0x80,
        ]
        return flags.reduce(0) { $0 | (bits[$1] ?? 0) }
    }
}
