extension SafeText {
    /// The escaping rule read backwards, as a reader of birdctl's output
    /// would: `\\`, `\t`, `\n`, `\r`, `\xHH`, `\uHHHH`, `\u{H…}`; nil for
    /// anything else after a backslash. The tests and the fuzzer check
    /// `escaped` against it (one copy of the rule's inverse).
    public static func unescaped(_ text: String) -> String? {
        var out = String.UnicodeScalarView()
        var rest = Substring(text).unicodeScalars
        func scalar(_ digits: Substring.UnicodeScalarView, count: Int? = nil) -> Unicode.Scalar? {
            guard count.map({ digits.count == $0 }) ?? !digits.isEmpty,
                digits.allSatisfy({ $0.properties.isASCIIHexDigit })
            else { return nil }
            return UInt32(String(digits), radix: 16).flatMap(Unicode.Scalar.init)
        }
        while let next = rest.popFirst() {
            guard next == "\\" else {
                out.append(next)
                continue
            }
            switch rest.popFirst() {
            case "\\": out.append("\\")
            case "t": out.append("\t")
            case "n": out.append("\n")
            case "r": out.append("\r")
            case "x":
                guard let value = scalar(rest.prefix(2), count: 2) else { return nil }
                out.append(value)
                rest = rest.dropFirst(2)
            case "u" where rest.first == "{":
                guard let close = rest.firstIndex(of: "}"), let value = scalar(rest[rest.index(after: rest.startIndex)..<close])
                else { return nil }
                out.append(value)
                rest = rest[rest.index(after: close)...]
            case "u":
                guard let value = scalar(rest.prefix(4), count: 4) else { return nil }
                out.append(value)
                rest = rest.dropFirst(4)
            default: return nil
            }
        }
        return String(out)
    }
}
