/// A compact, readable rendering for `--verbose` traces and test failures:
/// `"Robin"`, `/org/bluez/hci0`, `[1, 2]`, `{"RSSI": <-50>}`, `0x3830` for bytes.
extension DBusValue: CustomStringConvertible {
    public var description: String {
        switch self {
        case .byte(let v): return "0x" + String(v, radix: 16)
        case .bool(let v): return String(v)
        case .int16(let v): return String(v)
        case .uint16(let v): return String(v)
        case .int32(let v): return String(v)
        case .uint32(let v): return String(v)
        case .int64(let v): return String(v)
        case .uint64(let v): return String(v)
        case .double(let v): return String(v)
        case .string(let s): return "\"" + s + "\""
        case .objectPath(let p): return p.rawValue
        case .signature(let s): return "signature '\(s)'"
        case .unixFD(let fd): return "fd \(fd)"
        case .bytes(let bytes):
            let digits = Array("0123456789abcdef")
            return "0x" + String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
        case .array(_, let items): return "[" + items.map(\.description).joined(separator: ", ") + "]"
        case .dictionary(_, _, let entries):
            return "{" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .structure(let fields): return "(" + fields.map(\.description).joined(separator: ", ") + ")"
        case .variant(let inner): return "<\(inner)>"
        }
    }
}
