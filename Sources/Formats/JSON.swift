import Bird

/// A JSON object written key by key, in the order given (stable output for
/// people reading JSON Lines, and no Foundation). Built as UTF-8 bytes: a
/// `watch --json` line and a gateway's state message are made per reading.
public struct JSONObject {
    private var bytes: [UInt8]

    public init() {
        bytes = []
        bytes.reserveCapacity(192)  // a reading's line or a bird's state, without growing
        bytes.append(UInt8(ascii: "{"))
    }

    public indirect enum Value {
        case string(String)
        /// An address, written as a string without making one (once per reading).
        case address(BluetoothAddress)
        case number(String)
        case integer(Int)
        case bool(Bool)
        case null
        case object(JSONObject)
        case array([JSONObject])
        case list([Value])

        func append(to out: inout [UInt8]) {
            switch self {
            case .string(let s): JSONObject.appendQuoted(s, to: &out)
            case .address(let address):
                out.append(UInt8(ascii: "\""))
                address.append(to: &out)
                out.append(UInt8(ascii: "\""))
            case .number(let n): out += n.utf8
            case .integer(let i): out += String(i).utf8
            case .bool(let b): out += (b ? "true" : "false").utf8
            case .null: out += "null".utf8
            case .object(let o): out += o.renderedBytes
            case .array(let items): Value.list(items.map(Value.object)).append(to: &out)
            case .list(let items):
                out.append(UInt8(ascii: "["))
                for (index, item) in items.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    item.append(to: &out)
                }
                out.append(UInt8(ascii: "]"))
            }
        }
    }

    public mutating func add(_ key: String, _ value: Value) {
        if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
        JSONObject.appendQuoted(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        value.append(to: &bytes)
    }

    public mutating func add(_ key: String, _ value: String) { add(key, .string(value)) }

    public mutating func add(_ key: String, _ address: BluetoothAddress) { add(key, .address(address)) }

    public mutating func add(_ key: String, ifPresent value: String?) {
        if let value { add(key, .string(value)) }
    }

    public var renderedBytes: [UInt8] { bytes + [UInt8(ascii: "}")] }

    public var rendered: String { String(decoding: renderedBytes, as: UTF8.self) }

    /// `s` as a JSON string. Besides what JSON requires, it escapes what
    /// `SafeText` does (C1, bidi controls, format characters), so a JSON line
    /// shown on a terminal is as safe as text; a JSON parser still gets `s`
    /// back exactly (a backslash is `\\` as JSON requires, nothing more).
    public static func quoted(_ s: String) -> String {
        var out: [UInt8] = []
        appendQuoted(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    public static func appendQuoted(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Keys, addresses, colours and numbers are printable ASCII without a
        // quote or backslash: their bytes go as they are.
        var text = s
        let plain = text.withUTF8 { utf8 in
            guard utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
            else { return false }
            out.append(contentsOf: utf8)
            return true
        }
        if !plain {
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": out += #"\""#.utf8
                case "\\": out += #"\\"#.utf8
                case "\n": out += #"\n"#.utf8
                case "\r": out += #"\r"#.utf8
                case "\t": out += #"\t"#.utf8
                case let c where SafeText.isUnsafe(c): appendEscaped(c, to: &out)
                default: UTF8.encode(scalar) { out.append($0) }
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// `\uXXXX`, or above U+FFFF its UTF-16 surrogate pair (`\udb40\udc41`
    /// for the tag U+E0041), the only way JSON escapes such a scalar.
    private static func appendEscaped(_ scalar: Unicode.Scalar, to out: inout [UInt8]) {
        for unit in String(scalar).utf16 { out += ("\\u" + SafeText.hex(UInt32(unit), digits: 4)).utf8 }
    }
}
