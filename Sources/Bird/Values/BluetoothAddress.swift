/// A Bluetooth device address: 48 bits, parsed and normalised once where
/// text enters (the command line, BlueZ, MQTT topics) and written one way,
/// `AA:BB:CC:DD:EE:FF` in upper case.
public struct BluetoothAddress: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The address as a number, most significant octet first (the one written first).
    public let value: UInt64

    /// From `AA:BB:CC:DD:EE:FF` in either case; nil for anything else.
    public init?(_ text: some StringProtocol) {
        self.init(String(text))
    }

    /// The same for a `String` (each device BlueZ signals is one: read here
    /// without the generic view's cost).
    public init?(_ text: String) {
        guard text.utf8.count == 17 else { return nil }
        var value: UInt64 = 0
        var index = 0
        for byte in text.utf8 {
            defer { index += 1 }
            if index % 3 == 2 {
                guard byte == UInt8(ascii: ":") else { return nil }
                continue
            }
            guard let digit = Self.hexValue(byte) else { return nil }
            value = value << 4 | UInt64(digit)
        }
        self.value = value
    }

    /// From a number of at most 48 bits (the ESPHome API's form); nil above.
    public init?(value: UInt64) {
        guard value >> 48 == 0 else { return nil }
        self.value = value
    }

    public var description: String { String(decoding: bytes, as: UTF8.self) }

    /// The twelve hex digits without colons (`C0B12D000001`), for ids.
    public var hexDigits: String { String(decoding: bytes.lazy.filter { $0 != UInt8(ascii: ":") }, as: UTF8.self) }

    /// The written form appended as bytes (a line being built).
    public func append(to line: inout [UInt8]) {
        for octet in (0..<6).reversed() {
            let byte = UInt8(truncatingIfNeeded: value >> (UInt64(octet) * 8))
            line.append(Self.digit(byte >> 4))
            line.append(Self.digit(byte & 0x0F))
            if octet > 0 { line.append(UInt8(ascii: ":")) }
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.value < rhs.value }

    private var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(17)
        append(to: &bytes)
        return bytes
    }

    /// An upper-case hex digit (computed: a watch line appends twelve).
    private static func digit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
    }

    /// A hex digit's value (either case), from its ASCII byte; nil for another byte.
    public static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}

extension BluetoothAddress: ExpressibleByStringLiteral {
    /// An address written in code (a test's bird). A literal that is no
    /// address is a programming error and stops the program; text from
    /// anywhere else goes through `init?(_:)`.
    public init(stringLiteral text: String) {
        guard let address = BluetoothAddress(text) else { preconditionFailure("'\(text)' is not a Bluetooth address") }
        self = address
    }
}
