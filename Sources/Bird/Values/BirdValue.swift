/// An RGB colour with an optional alpha byte, as the `color` characteristic carries it.
public struct RGBColor: Hashable, Sendable, CustomStringConvertible {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8
    public var alpha: UInt8?

    public init(red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8? = nil) {
        self.red = red
        self.green = green
        self.blue = blue
        self.alpha = alpha
    }

    /// `#RRGGBB` or `#RRGGBBAA`, upper case.
    public var hex: String {
        var text = "#" + Self.hexByte(red) + Self.hexByte(green) + Self.hexByte(blue)
        if let alpha { text += Self.hexByte(alpha) }
        return text
    }

    public var description: String { hex }

    private static func hexByte(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }
}

/// A decoded Bird characteristic value.
public enum BirdValue: Hashable, Sendable {
    case name(String)
    case color(RGBColor)
    /// Transparency in percent, 0…100.
    case alpha(percent: UInt8)

    public var field: BirdField {
        switch self {
        case .name: .name
        case .color: .color
        case .alpha: .alpha
        }
    }

    /// The value as a person or a script reads it: `Robin`, `#FF8800`, `0.8`.
    public var text: String {
        switch self {
        case .name(let name): name
        case .color(let color): color.hex
        case .alpha(let percent): BirdValue.fractionText(percent)
        }
    }

    /// For alpha: the fraction 0.0…1.0.
    public var fraction: Double? {
        if case .alpha(let percent) = self { return Double(percent) / 100 }
        return nil
    }

    /// `0`, `0.8`, `0.05`, `1` — exact, from the integer percent. Looked
    /// up: a `watch` prints one per notification, and interpolating the
    /// number cost more than the rest of the line.
    static func fractionText(_ percent: UInt8) -> String {
        percent <= 100 ? fractionTexts[Int(percent)] : formatFraction(percent)
    }

    private static let fractionTexts = (0...100).map { formatFraction(UInt8($0)) }

    private static func formatFraction(_ percent: UInt8) -> String {
        switch percent {
        case 100: "1"
        case 0: "0"
        case let p where p % 10 == 0: "0.\(p / 10)"
        case let p where p < 10: "0.0\(p)"
        default: "0.\(percent)"
        }
    }
}

/// A value that does not decode. Carries the raw bytes so they can be shown.
public struct BirdValueError: Error, Hashable, Sendable, CustomStringConvertible {
    public var field: BirdField
    public var raw: [UInt8]
    public var reason: String

    public init(field: BirdField, raw: [UInt8], reason: String) {
        self.field = field
        self.raw = raw
        self.reason = reason
    }

    /// The raw bytes as lower-case hex, e.g. `23ff`.
    public var rawHex: String { hexString(raw) }

    public var description: String {
        "bad \(field) value: \(reason) (raw: \(raw.isEmpty ? "empty" : rawHex))"
    }
}

/// Bytes as lower-case hex without separators.
public func hexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    var out = ""
    out.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0xF)])
    }
    return out
}
