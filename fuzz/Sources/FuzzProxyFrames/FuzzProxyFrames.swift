import FuzzSupport
import Proxy

/// Any bytes as a Home Assistant client's TCP stream, plaintext or Noise
/// framing, under a fuzzer-chosen bound, cut into pieces at fuzzer-chosen
/// points (or, where the fuzzer says, repeated past 64 KiB, where the
/// reader drops what it has read). Whatever the cuts, the reader gives the frames, and the
/// failure or the bytes left over, that a reference parse of the whole
/// stream at once gives; no frame is over the bound; each frame written
/// again by FrameWriter reads back as itself.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxyFrames(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(Array(UnsafeBufferPointer(start: data, count: size)))
    let framing: FrameReader.Framing = input.bool() ? .noise : .plaintext
    let maximumSize = input.pick([0, 1, 4, 16, 255, 256, 1024, 65535]) { Int($0.integer(2)) }
    // Rarely (it costs 64 KiB a run), the stream repeated past 64 KiB.
    let past64K = input.byte() == 0x40
    var cuts: [Int] = []
    for _ in 0..<Int(input.byte() % 16) { cuts.append(Int(input.byte())) }
    var stream: [UInt8] = []
    let unit = input.rest()
    stream += unit
    while past64K, !unit.isEmpty, stream.count <= 65536 + 3 { stream += unit }

    let expected = Reference.parse(stream, framing, maximumSize)
    var reader = FrameReader(framing, maximumSize: maximumSize)
    require(reader.framing == framing && reader.maximumSize == maximumSize)
    var frames: [FrameReader.Frame] = []
    var failure: FrameReader.Failure?
    var offset = 0, cut = 0
    feeding: while offset < stream.count {
        // The next piece: a fuzzer-chosen length (0 is the rest), cycling through the cuts.
        let wanted = cuts.isEmpty ? 0 : cuts[cut % cuts.count]
        cut += 1
        let end = wanted == 0 ? stream.count : min(stream.count, offset + wanted)
        reader.append(stream[offset..<end])
        offset = end
        do {
            while let frame = try reader.next() {
                frames.append(frame)
                require(frames.count <= expected.frames.count, "more frames than the stream holds")
            }
        } catch {
            failure = error
            break feeding
        }
    }
    require(frames == expected.frames, "frames differ from the whole stream's: \(frames.count) vs \(expected.frames.count)")
    require(failure == expected.failure, "failure \(String(describing: failure)) vs \(String(describing: expected.failure))")
    if failure == nil { require(reader.pending == expected.left, "\(reader.pending) bytes pending, \(expected.left) left over") }
    if let failure { require(!failure.description.isEmpty) }

    for frame in frames {
        let written: [UInt8]
        switch frame {
        case .plaintext(let type, let payload):
            require(payload.count <= maximumSize, "a plaintext frame of \(payload.count) bytes over \(maximumSize)")
            written = FrameWriter.plaintext(type: type, payload: payload)
        case .noise(let payload):
            require(payload.count <= maximumSize, "a Noise frame of \(payload.count) bytes over \(maximumSize)")
            written = FrameWriter.noise(payload)
        }
        var again = FrameReader(framing, maximumSize: maximumSize)
        again.append(written)
        require((try? again.next()) == frame, "a frame written again does not read back")
        require(again.pending == 0 && (try? again.next()) == .some(nil), "a frame written again leaves bytes")
    }
    return 0
}

/// An independent parse of the whole stream: its frames, then the failure
/// or the count of bytes that are not yet a whole frame.
private enum Reference {
    static func parse(_ stream: [UInt8], _ framing: FrameReader.Framing, _ maximumSize: Int)
        -> (frames: [FrameReader.Frame], failure: FrameReader.Failure?, left: Int)
    {
        var frames: [FrameReader.Frame] = []
        var at = 0
        while at < stream.count {
            let remaining = stream.count - at
            switch framing {
            case .noise:
                if stream[at] != 1 { return (frames, .badIndicator(stream[at]), 0) }
                if remaining < 3 { return (frames, nil, remaining) }
                let size = Int(stream[at + 1]) * 256 + Int(stream[at + 2])
                if size > maximumSize { return (frames, .tooLarge(size), 0) }
                if remaining < 3 + size { return (frames, nil, remaining) }
                frames.append(.noise(Array(stream[(at + 3)..<(at + 3 + size)])))
                at += 3 + size
            case .plaintext:
                if stream[at] != 0 { return (frames, .badIndicator(stream[at]), 0) }
                var index = at + 1
                let size: UInt64
                switch varint(stream, &index) {
                case .incomplete: return (frames, nil, remaining)
                case .bad: return (frames, .badVarint, 0)
                case .value(let value): size = value
                }
                if size > UInt64(maximumSize) { return (frames, .tooLarge(Int(size)), 0) }
                let type: UInt64
                switch varint(stream, &index) {
                case .incomplete: return (frames, nil, remaining)
                case .bad: return (frames, .badVarint, 0)
                case .value(let value): type = value
                }
                if stream.count - index < Int(size) { return (frames, nil, remaining) }
                frames.append(.plaintext(type: UInt32(type), payload: Array(stream[index..<(index + Int(size))])))
                at = index + Int(size)
            }
        }
        return (frames, nil, 0)
    }

    enum Varint { case incomplete, bad, value(UInt64) }

    /// Protobuf's base-128 varint, at most five bytes and 32 bits.
    static func varint(_ stream: [UInt8], _ index: inout Int) -> Varint {
        var value: UInt64 = 0
        for count in 0..<5 {
            guard index < stream.count else { return .incomplete }
            let byte = stream[index]
            index += 1
            value += UInt64(byte & 0x7F) << (7 * UInt64(count))
            if byte < 0x80 { return value > 0xFFFF_FFFF ? .bad : .value(value) }
        }
        return .bad
    }
}
