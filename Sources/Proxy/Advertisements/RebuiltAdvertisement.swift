import Bird
import BlueZ

/// An advertisement as the API carries it (`BluetoothLERawAdvertisement`:
/// AD structures), rebuilt from what BlueZ keeps of a device, for a proxy
/// that cannot read the kernel's management socket. What Home Assistant's
/// parser reads is kept: the name, the TX power, each service UUID,
/// manufacturer data and service data, one AD structure each (its parser
/// takes only the first UUID of a structure). What is lost: the order of the
/// structures, flags and appearance, 32-bit UUID lists (written as 128-bit),
/// which bytes came in the scan response, and repeats BlueZ does not pass on
/// (unchanged data raises no signal).
public enum RebuiltAdvertisement {
    /// The most AD bytes one advertisement carries here: a peer's data is
    /// bounded where it is kept (BlueZ's own bound is larger).
    public static let maximumBytes = 512

    /// The advertisement of a device heard.
    public static func of(_ device: HeardDevice) -> BluetoothLERawAdvertisement {
        var advertisement = BluetoothLERawAdvertisement()
        advertisement.address = device.address.value
        // 127 is HCI's "not available" (BlueZ's views make it nil): the weakest there is.
        advertisement.rssi = Int32(device.rssi ?? -127)
        advertisement.addressType = device.randomAddress ? 1 : 0
        advertisement.data = .init(structures(of: device))
        return advertisement
    }

    /// The AD structures, in a fixed order (name, TX power, UUIDs, manufacturer
    /// data, service data), as many as fit in `maximumBytes`.
    static func structures(of device: HeardDevice) -> [UInt8] {
        var data: [UInt8] = []
        func add(_ type: UInt8, _ bytes: [UInt8]) {
            guard bytes.count <= 254, data.count + 2 + bytes.count <= maximumBytes else { return }
            data += [UInt8(bytes.count + 1), type] + bytes
        }
        if let name = device.name, !name.isEmpty {
            let bytes = Array(name.utf8)
            // A name cut short is AD's "shortened local name".
            if bytes.count <= 248 { add(0x09, bytes) } else { add(0x08, Array(bytes.prefix(248))) }
        }
        if let power = device.txPower, let byte = Int8(exactly: power) { add(0x0A, [UInt8(bitPattern: byte)]) }
        for uuid in device.uuids {
            guard let bytes = uuidBytes(uuid) else { continue }
            add(bytes.count == 2 ? 0x03 : 0x07, bytes)
        }
        for (company, bytes) in device.manufacturerData.sorted(by: { $0.key < $1.key }) {
            add(0xFF, [UInt8(company & 0xFF), UInt8(company >> 8)] + bytes)
        }
        for (uuid, bytes) in device.serviceData.sorted(by: { $0.key < $1.key }) {
            guard let id = uuidBytes(uuid) else { continue }
            add(id.count == 2 ? 0x16 : 0x21, id + bytes)
        }
        return data
    }

    /// The Bluetooth base UUID's bytes past its 16-bit part (the last 12 of 16).
    static let baseTail: [UInt8] = [0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB]

    /// A UUID as AD writes it, little-endian: 2 bytes for a 16-bit one (on the
    /// base UUID), else all 16; nil for text that is no UUID. Read from the
    /// text's bytes: each device signalled has its UUIDs turned so.
    static func uuidBytes(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        var high: UInt8?
        for byte in text.utf8 where byte != UInt8(ascii: "-") {
            guard let digit = BluetoothAddress.hexValue(byte), bytes.count < 16 else { return nil }
            if let first = high {
                bytes.append(first << 4 | digit)
                high = nil
            } else {
                high = digit
            }
        }
        guard bytes.count == 16, high == nil else { return nil }
        if bytes[0] == 0, bytes[1] == 0, bytes[4...].elementsEqual(baseTail) { return [bytes[3], bytes[2]] }
        return bytes.reversed()
    }
}

/// What BlueZ keeps of a device heard advertising, as the proxy passes it on.
public struct HeardDevice: Sendable, Equatable {
    public var address: BluetoothAddress
    public var randomAddress: Bool
    public var name: String?
    public var rssi: Int16?
    public var txPower: Int16?
    /// Lower-case UUIDs, as BlueZ writes them.
    public var uuids: [String]
    public var manufacturerData: [UInt16: [UInt8]]
    public var serviceData: [String: [UInt8]]

    public init(
        address: BluetoothAddress, randomAddress: Bool = false, name: String? = nil, rssi: Int16?, txPower: Int16? = nil,
        uuids: [String] = [], manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [String: [UInt8]] = [:]
    ) {
        (self.address, self.randomAddress, self.name, self.rssi, self.txPower) = (address, randomAddress, name, rssi, txPower)
        (self.uuids, self.manufacturerData, self.serviceData) = (uuids, manufacturerData, serviceData)
    }

    /// A device of BlueZ's tree, if it has a usable address and was heard
    /// (it has an RSSI) in the current discovery.
    public init?(_ device: Device) {
        guard device.hasSignal, let address = BluetoothAddress(device.address) else { return nil }
        self.init(
            address: address, randomAddress: device.addressType == "random", name: device.name, rssi: device.rssi,
            txPower: device.txPower, uuids: device.uuids, manufacturerData: device.manufacturerData, serviceData: device.serviceData)
    }
}
