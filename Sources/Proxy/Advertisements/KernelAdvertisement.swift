/// An advertisement as the kernel reported it to bluetoothd: a Device Found
/// event off the management channel (`BluetoothManagement`), its AD
/// structures as they came off the air (for an active scan, the
/// advertisement's and then its scan response's, as the kernel joins them).
public enum KernelAdvertisement {
    /// Device Found's event code on the management channel.
    static let deviceFound: UInt16 = 0x0012
    /// The event header (code, adapter index, length) and Device Found's
    /// fixed fields (address, address type, RSSI, flags, data length).
    static let headerSize = 6, fixedSize = 14

    /// A Device Found event of an LE device: the index of the adapter that
    /// heard it (hciN's N) and the advertisement as the API carries it; nil
    /// for another event, a BR/EDR device, or one whose lengths do not add
    /// up. Data past `RebuiltAdvertisement.maximumBytes` is cut at the last
    /// whole AD structure that fits.
    public static func parse(_ event: [UInt8]) -> (adapter: UInt16, advertisement: BluetoothLERawAdvertisement)? {
        guard event.count >= headerSize + fixedSize, word(event, 0) == deviceFound,
            Int(word(event, 4)) == event.count - headerSize
        else { return nil }
        let fields = headerSize
        // 1: LE public, 2: LE random (0 is BR/EDR).
        let type = event[fields + 6]
        guard type == 1 || type == 2, fields + fixedSize + Int(word(event, fields + 12)) == event.count else { return nil }
        var advertisement = BluetoothLERawAdvertisement()
        // The address little-endian, as HCI carries it (its last octet is written first): 48 bits.
        advertisement.address = (0..<6).reduce(UInt64(0)) { $0 | UInt64(event[fields + $1]) << (8 * UInt64($1)) }
        advertisement.addressType = type == 2 ? 1 : 0
        advertisement.rssi = Int32(Int8(bitPattern: event[fields + 7]))
        advertisement.data = .init(wholeStructures(event[(fields + fixedSize)...], within: RebuiltAdvertisement.maximumBytes))
        return (word(event, 2), advertisement)
    }

    /// The AD structures of `data` that fit whole in `limit` bytes (all of it if it fits).
    static func wholeStructures(_ data: ArraySlice<UInt8>, within limit: Int) -> ArraySlice<UInt8> {
        guard data.count > limit else { return data }
        var end = data.startIndex
        while end < data.endIndex {
            let next = end + 1 + Int(data[end])
            guard next - data.startIndex <= limit else { break }
            end = next
        }
        return data[data.startIndex..<end]
    }

    private static func word(_ bytes: [UInt8], _ at: Int) -> UInt16 { UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8 }
}
