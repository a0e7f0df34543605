/// Fuzz bytes read as a sequence of choices: each read takes what it needs
/// from the front and gives zeros once the bytes run out, so every input is
/// a complete (if short) program.
public struct FuzzInput {
    private let bytes: [UInt8]
    private var position = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var isEmpty: Bool { position >= bytes.count }

    public mutating func byte() -> UInt8 {
        defer { position += 1 }
        return position < bytes.count ? bytes[position] : 0
    }

    public mutating func bool() -> Bool { byte() & 1 == 1 }

    /// A little-endian integer of `width` bytes.
    public mutating func integer(_ width: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<width { value |= UInt64(byte()) << (8 * UInt64(index)) }
        return value
    }

    /// Up to `limit` bytes, the count read first.
    public mutating func bytes(upTo limit: Int) -> [UInt8] {
        let wanted = Int(byte())
        guard position < bytes.count else { return [] }
        let count = min(wanted, limit, bytes.count - position)
        defer { position += count }
        return Array(bytes[position..<(position + count)])
    }

    /// Text of up to `limit` bytes (not necessarily valid UTF-8: repaired).
    public mutating func text(upTo limit: Int = 64) -> String {
        String(decoding: bytes(upTo: limit), as: UTF8.self)
    }

    /// One of `choices`, or (when the choice byte falls past them) `other()`.
    public mutating func pick<T>(_ choices: [T], else other: (inout FuzzInput) -> T) -> T {
        let index = Int(byte())
        return index < choices.count ? choices[index] : other(&self)
    }

    /// Everything not yet read.
    public mutating func rest() -> [UInt8] {
        defer { position = bytes.count }
        return position < bytes.count ? Array(bytes[position...]) : []
    }
}
