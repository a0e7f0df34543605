/// A JSON object written key by key, in the order given (stable output for
/// people reading JSON Lines, and no Foundation).
public struct JSONObject {
    private var text = "{"
    private var empty = true

    indirect enum Value {
        case string(String)
        case number(String)
        case integer(Int)
        case bool(Bool)
        case object(JSONObject)
        case array([JSONObject])
        case list([Value])

        var rendered: String {
            switch self {
            case .string(let s): JSONObject.quoted(s)
            case .number(let n): n
            case .integer(let i): String(i)
            case .bool(let b): b ? "true" : "false"
            case .object(let o): o.rendered
            case .array(let items): "[" + items.map(\.rendered).joined(separator: ",") + "]"
            case .list(let items): "[" + items.map(\.rendered).joined(separator: ",") + "]"
            }
        }
    }

    mutating func add(_ key: String, _ value: Value) {
        if !empty { text += "," }
        empty = false
        text += JSONObject.quoted(key) + ":"
        text += value.rendered
    }

    mutating func add(_ key: String, _ value: String) { add(key, .string(value)) }

    mutating func add(_ key: String, ifPresent value: String?) {
        if let value { add(key, .string(value)) }
    }

    var rendered: String { text + "}" }

    /// `s` as a JSON string. Besides what JSON requires, it escapes what
    /// `SafeText` does (C1, bidi controls), so a JSON line shown on a terminal
    /// is as safe as text.
    public static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where SafeText.isUnsafe(c):
                out += "\\u" + SafeText.hex(c.value, digits: 4)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
