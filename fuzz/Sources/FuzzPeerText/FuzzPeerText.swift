import BirdctlCLI
import FoundationEssentials
import FuzzSupport

/// Any text a peer could send (names, values, error messages): escaped for a
/// terminal it holds no unsafe scalar, is unchanged when it held none (and no
/// backslash), and reads back exactly by the documented rule (a peer's `\`
/// is `\\`, so every other backslash starts an escape birdctl wrote);
/// quoted for JSON it holds none either and a JSON parser gets the text back
/// exactly.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPeerText(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let escaped = SafeText.escaped(text)
    require(!escaped.unicodeScalars.contains(where: SafeText.isUnsafe), "unsafe scalar left in \(escaped.debugDescription)")
    require(unescaped(escaped) == text, "\(text.debugDescription) escaped as \(escaped.debugDescription) does not read back")
    if !text.unicodeScalars.contains(where: { $0 == "\\" || SafeText.isUnsafe($0) }) {
        require(escaped == text, "safe text changed: \(text.debugDescription)")
    }
    let quoted = JSONObject.quoted(text)
    require(!quoted.unicodeScalars.contains(where: SafeText.isUnsafe), "unsafe scalar in JSON \(quoted.debugDescription)")
    let parsed = try? JSONDecoder().decode(String.self, from: Data(quoted.utf8))
    require(parsed == text, "JSON \(quoted.debugDescription) parsed as \(parsed.debugDescription)")
    return 0
}

/// SafeText's rule read backwards: `\\`, `\t`, `\n`, `\r`, `\xHH`, `\uHHHH`,
/// `\u{H…}`; nil for anything else after a backslash.
func unescaped(_ text: String) -> String? {
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
