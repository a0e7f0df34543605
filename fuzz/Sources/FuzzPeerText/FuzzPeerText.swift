import Formats
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
    require(SafeText.unescaped(escaped) == text, "\(text.debugDescription) escaped as \(escaped.debugDescription) does not read back")
    if !text.unicodeScalars.contains(where: { $0 == "\\" || SafeText.isUnsafe($0) }) {
        require(escaped == text, "safe text changed: \(text.debugDescription)")
    }
    let quoted = JSONObject.quoted(text)
    require(!quoted.unicodeScalars.contains(where: SafeText.isUnsafe), "unsafe scalar in JSON \(quoted.debugDescription)")
    let parsed = try? JSONDecoder().decode(String.self, from: Data(quoted.utf8))
    require(parsed == text, "JSON \(quoted.debugDescription) parsed as \(parsed.debugDescription)")
    return 0
}
