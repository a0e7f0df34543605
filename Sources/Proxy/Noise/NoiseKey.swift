#if canImport(FoundationEssentials)
import FoundationEssentials
#endif

/// The proxy's pre-shared key: 32 bytes, written in base64 as Home
/// Assistant asks for it (and as ESPHome's `api: encryption: key:` holds it).
public struct NoiseKey: Sendable, Equatable {
    public let bytes: [UInt8]

    /// nil unless exactly 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// From its base64 text (whitespace around it ignored); nil for anything
    /// that is not 32 bytes in base64.
    public init?(base64 text: String) {
        let trimmed = text.filter { !$0.isWhitespace }
        guard trimmed.count == 44, let data = Data(base64Encoded: trimmed) else { return nil }
        self.init(bytes: Array(data))
    }
}
