/// ESPHome's native API frames, read from a TCP stream as it comes, in
/// pieces or several at once. Plaintext: `00`, a varint length, a varint
/// message type, the payload. Noise: `01`, a 16-bit big-endian length, that
/// many bytes. Each frame is bounded; bytes that are no frame end the client.
public struct FrameReader {
    public enum Framing: Sendable { case plaintext, noise }

    public enum Frame: Equatable, Sendable {
        case plaintext(type: UInt32, payload: [UInt8])
        case noise([UInt8])
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// A frame starts with another indicator byte than the framing's.
        case badIndicator(UInt8)
        /// A frame longer than `maximumSize`.
        case tooLarge(Int)
        /// A varint over five bytes (more than 32 bits).
        case badVarint

        public var description: String {
            switch self {
            case .badIndicator: "Bad indicator byte"
            case .tooLarge(let size): "a frame of \(size) bytes is over the bound"
            case .badVarint: "a length or type is not a 32-bit varint"
            }
        }
    }

    public let framing: Framing
    public let maximumSize: Int
    private var buffer: [UInt8] = []
    private var start = 0

    /// `maximumSize`: the most payload bytes a frame may carry.
    public init(_ framing: Framing, maximumSize: Int = 65535) {
        self.framing = framing
        self.maximumSize = maximumSize
    }

    /// Bytes as they came from the socket.
    public mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The bytes held that are not yet a whole frame.
    public var pending: Int { buffer.count - start }

    /// The next whole frame, nil until more bytes come.
    public mutating func next() throws(Failure) -> Frame? {
        guard start < buffer.count else { return nil }
        let indicator = buffer[start]
        switch framing {
        case .noise:
            guard indicator == 1 else { throw .badIndicator(indicator) }
            guard buffer.count - start >= 3 else { return nil }
            let size = Int(buffer[start + 1]) << 8 | Int(buffer[start + 2])
            guard size <= maximumSize else { throw .tooLarge(size) }
            guard buffer.count - start >= 3 + size else { return nil }
            let payload = Array(buffer[(start + 3)..<(start + 3 + size)])
            consume(3 + size)
            return .noise(payload)
        case .plaintext:
            guard indicator == 0 else { throw .badIndicator(indicator) }
            var index = start + 1
            guard let size = try varint(at: &index) else { return nil }
            guard size <= maximumSize else { throw .tooLarge(Int(size)) }
            guard let type = try varint(at: &index) else { return nil }
            guard buffer.count - index >= Int(size) else { return nil }
            let payload = Array(buffer[index..<(index + Int(size))])
            consume(index + Int(size) - start)
            return .plaintext(type: type, payload: payload)
        }
    }

    private mutating func consume(_ count: Int) {
        start += count
        // A client that never pauses must not grow the buffer without end.
        if start > 65536 && start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
    }

    /// A varint at `index` (moved past it), nil if it is not all here yet.
    private func varint(at index: inout Int) throws(Failure) -> UInt32? {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 35, by: 7) {
            guard index < buffer.count else { return nil }
            let byte = buffer[index]
            index += 1
            value |= UInt64(byte & 0x7F) << UInt64(shift)
            if byte & 0x80 == 0 {
                guard value <= UInt64(UInt32.max) else { throw .badVarint }
                return UInt32(value)
            }
        }
        throw .badVarint
    }
}

/// Frames to send, the same two ways.
public enum FrameWriter {
    public static func plaintext(type: UInt32, payload: [UInt8]) -> [UInt8] {
        [0] + varint(UInt32(payload.count)) + varint(type) + payload
    }

    /// A Noise frame around `payload` (at most 65535 bytes).
    public static func noise(_ payload: [UInt8]) -> [UInt8] {
        precondition(payload.count <= 65535, "a Noise frame holds at most 65535 bytes")
        return [1, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
    }

    static func varint(_ value: UInt32) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
        return bytes
    }
}
