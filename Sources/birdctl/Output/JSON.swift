/// A JSON object written key by key, in the order given (stable output for
/// people reading JSON Lines, and no Foundation).
struct JSONObject {
    private var text = "{"
    private var empty = true

    enum Value {
        case string(String)
        case number(String)
        case integer(Int)
        case bool(Bool)
        case object(JSONObject)
        case array([JSONObject])
    }

    mutating func add(_ key: String, _ value: Value) {
        if !empty { text += "," }
        empty = false
        text += JSONObject.quoted(key) + ":"
        switch value {
        case .string(let s): text += JSONObject.quoted(s)
        case .number(let n): text += n
        case .integer(let i): text += String(i)
        case .bool(let b): text += b ? "true" : "false"
        case .object(let o): text += o.rendered
        case .array(let items): text += "[" + items.map(\.rendered).joined(separator: ",") + "]"
        }
    }

    mutating func add(_ key: String, _ value: String) { add(key, .string(value)) }

    mutating func add(_ key: String, ifPresent value: String?) {
        if let value { add(key, .string(value)) }
    }

    var rendered: String { text + "}" }

    static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20 || c.value == 0x7F:
                let hex = String(c.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
