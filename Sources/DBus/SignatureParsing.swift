/// Splitting and checking D-Bus signatures without libdbus (which aborts on
/// invalid input instead of reporting it).
extension Signature {
    /// The complete types of this signature, e.g. `sa{sv}as` → `s`, `a{sv}`, `as`.
    /// Nil when the signature is not well formed.
    public var completeTypes: [Signature]? {
        let bytes = Array(rawValue.utf8)
        var result: [Signature] = []
        var index = 0
        while index < bytes.count {
            guard let end = Signature.endOfCompleteType(bytes, from: index, depth: 0) else { return nil }
            result.append(Signature(String(decoding: bytes[index..<end], as: UTF8.self)))
            index = end
        }
        return result
    }

    /// True when this is exactly one complete type.
    public var isSingleCompleteType: Bool { completeTypes?.count == 1 }

    private static let basicCodes = Set("ybnqiuxtdsogh".utf8)

    /// Index just past the complete type that starts at `start`; nil if malformed.
    private static func endOfCompleteType(_ b: [UInt8], from start: Int, depth: Int) -> Int? {
        guard start < b.count, depth < 64 else { return nil }
        let c = b[start]
        if basicCodes.contains(c) || c == UInt8(ascii: "v") { return start + 1 }
        switch c {
        case UInt8(ascii: "a"):
            if start + 1 < b.count, b[start + 1] == UInt8(ascii: "{") {
                // Dict entry: a basic key, then one complete value type, then '}'.
                let keyIndex = start + 2
                guard keyIndex < b.count, basicCodes.contains(b[keyIndex]) else { return nil }
                guard let valueEnd = endOfCompleteType(b, from: keyIndex + 1, depth: depth + 1),
                    valueEnd < b.count, b[valueEnd] == UInt8(ascii: "}")
                else { return nil }
                return valueEnd + 1
            }
            return endOfCompleteType(b, from: start + 1, depth: depth + 1)
        case UInt8(ascii: "("):
            var index = start + 1
            guard index < b.count, b[index] != UInt8(ascii: ")") else { return nil }
            while index < b.count, b[index] != UInt8(ascii: ")") {
                guard let next = endOfCompleteType(b, from: index, depth: depth + 1) else { return nil }
                index = next
            }
            return index < b.count ? index + 1 : nil
        default:
            return nil
        }
    }
}

extension DBusValue {
    /// Why this value cannot be sent, or nil if it can. libdbus treats these
    /// mistakes as programming errors and aborts, so they are caught here.
    public var invalidReason: String? {
        switch self {
        case .string(let s):
            return s.utf8.contains(0) ? "string contains a NUL byte" : nil
        case .objectPath(let p):
            return p.isValid ? nil : "invalid object path '\(p)'"
        case .signature(let s):
            return s.rawValue.isEmpty || s.completeTypes != nil ? nil : "invalid signature '\(s)'"
        case .array(let element, let items):
            guard element.isSingleCompleteType else { return "invalid array element signature '\(element)'" }
            for item in items {
                if item.signature != element { return "array of '\(element)' holds a '\(item.signature)'" }
                if let reason = item.invalidReason { return reason }
            }
            return nil
        case .dictionary(let key, let value, let entries):
            guard key.isSingleCompleteType, value.isSingleCompleteType,
                Signature("a{\(key)\(value)}").isSingleCompleteType
            else { return "invalid dictionary signature '{\(key)\(value)}'" }
            for entry in entries {
                if entry.key.signature != key || entry.value.signature != value {
                    return "dictionary of '{\(key)\(value)}' holds '{\(entry.key.signature)\(entry.value.signature)}'"
                }
                if let reason = entry.key.invalidReason ?? entry.value.invalidReason { return reason }
            }
            return nil
        case .structure(let fields):
            if fields.isEmpty { return "empty struct" }
            for field in fields { if let reason = field.invalidReason { return reason } }
            return nil
        case .variant(let inner):
            return inner.invalidReason
        default:
            return nil
        }
    }
}
