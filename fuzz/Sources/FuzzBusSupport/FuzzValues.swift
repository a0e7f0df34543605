import DBus
import FuzzSupport

extension FuzzInput {
    /// A D-Bus value tree: every basic type, byte arrays, arrays, a{sv}
    /// dictionaries, structures and variants, nested at most `depth` deep.
    /// Invalid ones (a bad object path, a mixed array) are what the encoder
    /// refuses; callers skip them.
    public mutating func value(depth: Int = 3) -> DBusValue {
        let kind = byte() % (depth > 0 ? 18 : 13)
        switch kind {
        case 0: return .byte(byte())
        case 1: return .bool(bool())
        case 2: return .int16(Int16(truncatingIfNeeded: integer(2)))
        case 3: return .uint16(UInt16(truncatingIfNeeded: integer(2)))
        case 4: return .int32(Int32(truncatingIfNeeded: integer(4)))
        case 5: return .uint32(UInt32(truncatingIfNeeded: integer(4)))
        case 6: return .int64(Int64(truncatingIfNeeded: integer(8)))
        case 7: return .uint64(integer(8))
        case 8: return .double(Double(bitPattern: integer(8)))
        case 9: return .string(text())
        case 10: return .objectPath(objectPath())
        case 11: return .bytes(bytes(upTo: 255))
        case 12: return .signature(Signature(pick(["s", "ay", "a{sv}", "v", "(ii)"]) { $0.text(upTo: 8) }))
        case 13: return .propertyMap(properties(depth: depth - 1))
        case 14:
            let count = Int(byte() % 5)
            let items = (0..<count).map { _ in value(depth: depth - 1) }
            let element = items.first?.signature ?? Signature("s")
            return .array(element: element, items)
        case 15: return .structure((0..<(1 + Int(byte() % 3))).map { _ in value(depth: depth - 1) })
        case 16: return .variant(value(depth: depth - 1))
        default: return .strings((0..<Int(byte() % 4)).map { _ in text() })
        }
    }

    /// An a{sv} such as BlueZ's options: known keys (offset, type, device,
    /// mtu, prepare-authorize) or any, with values of any type.
    public mutating func properties(depth: Int = 2) -> [String: DBusValue] {
        var map: [String: DBusValue] = [:]
        for _ in 0..<Int(byte() % 4) {
            let key = pick(["offset", "type", "device", "mtu", "link", "prepare-authorize"]) { $0.text(upTo: 16) }
            map[key] = value(depth: max(0, depth))
        }
        return map
    }

    /// A path from a few elements (valid or not).
    public mutating func objectPath() -> ObjectPath {
        pick(["/", "/org/bluez", "/org/bluez/hci0"] as [ObjectPath]) { ObjectPath("/" + $0.text(upTo: 24)) }
    }
}
