/// Strict decoding of the bytes on the air, and encoding for the peripheral side.
public enum BirdCodec {
    /// The largest value an ATT attribute can hold.
    public static let maximumLength = 512

    public static func decode(_ field: BirdField, _ raw: [UInt8]) -> Result<BirdValue, BirdValueError> {
        func failure(_ reason: String) -> Result<BirdValue, BirdValueError> {
            .failure(BirdValueError(field: field, raw: raw, reason: reason))
        }
        guard raw.count <= maximumLength else { return failure("longer than \(maximumLength) bytes") }
        // ASCII (every valid colour and alpha) needs no UTF-8 validation.
        if !raw.allSatisfy({ $0 < 0x80 }), String(validating: raw, as: UTF8.self) == nil {
            return failure("not valid UTF-8")
        }
        let result: Result<BirdValue, Reason>
        switch field {
        case .name: result = decodeName(String(decoding: raw, as: UTF8.self))
        case .color: result = decodeColor(trimmingASCIIWhitespace(raw[...]))
        case .alpha: result = decodeAlpha(trimmingASCIIWhitespace(raw[...]))
        }
        return result.mapError { BirdValueError(field: field, raw: raw, reason: $0.text) }
    }

    /// Parses a value typed by a person (flags, stdin lines): the same rules as on the air.
    public static func parse(_ field: BirdField, _ text: String) -> Result<BirdValue, BirdValueError> {
        decode(field, Array(text.utf8))
    }

    /// The bytes a peripheral sends for a value.
    public static func encode(_ value: BirdValue) -> [UInt8] {
        switch value {
        case .name(let name): Array(name.utf8)
        case .color(let color): Array(color.hex.utf8)
        case .alpha(let percent): Array(String(percent).utf8)
        }
    }

    struct Reason: Error { let text: String }

    private static func decodeName(_ text: String) -> Result<BirdValue, Reason> {
        var scalars = Substring(text).unicodeScalars
        while scalars.last == "\0" { scalars.removeLast() }
        let name = String(scalars)
        if name.isEmpty { return .failure(Reason(text: "empty name")) }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return .failure(Reason(text: "name contains control characters"))
        }
        return .success(.name(name))
    }

    private static func decodeColor(_ text: ArraySlice<UInt8>) -> Result<BirdValue, Reason> {
        let bytes = Array(text.first == UInt8(ascii: "#") ? text.dropFirst() : text)
        guard bytes.count == 6 || bytes.count == 8 else {
            return .failure(Reason(text: "expected #RRGGBB or #RRGGBBAA"))
        }
        var components: [UInt8] = []
        for index in stride(from: 0, to: bytes.count, by: 2) {
            guard let high = hexDigit(bytes[index]), let low = hexDigit(bytes[index + 1]) else {
                return .failure(Reason(text: "not a hex colour"))
            }
            components.append(high << 4 | low)
        }
        return .success(.color(RGBColor(
            red: components[0], green: components[1], blue: components[2],
            alpha: components.count == 4 ? components[3] : nil)))
    }

    private static func decodeAlpha(_ digits: ArraySlice<UInt8>) -> Result<BirdValue, Reason> {
        guard !digits.isEmpty else { return .failure(Reason(text: "empty")) }
        guard digits.count <= 3, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return .failure(Reason(text: "expected an integer 0…100"))
        }
        let value = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard value <= 100 else { return .failure(Reason(text: "\(value) is above 100")) }
        return .success(.alpha(percent: UInt8(value)))
    }

    private static func hexDigit(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    /// Without leading and trailing ASCII whitespace (tab, LF, VT, FF, CR, space).
    private static func trimmingASCIIWhitespace(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || (0x09...0x0D).contains($0) }
        let start = bytes.firstIndex { !isSpace($0) } ?? bytes.endIndex
        let end = bytes.lastIndex { !isSpace($0) }.map { $0 + 1 } ?? start
        return bytes[start..<max(start, end)]
    }
}
