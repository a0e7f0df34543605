import Testing

@testable import Proxy

@Suite("ESPHome API frames")
struct FrameReaderTests {
    @Test func plaintextFramesComeWholeFromPiecesAndBatches() throws {
        let hello = FrameWriter.plaintext(type: 1, payload: Array("hi".utf8))
        let big = FrameWriter.plaintext(type: 300, payload: Array(repeating: 7, count: 200))
        #expect(hello == [0, 2, 1, 0x68, 0x69])
        #expect(Array(big.prefix(5)) == [0, 0xC8, 0x01, 0xAC, 0x02])
        var reader = FrameReader(.plaintext)
        let stream = hello + big + hello
        var frames: [FrameReader.Frame] = []
        for byte in stream {
            reader.append([byte])
            while let frame = try reader.next() { frames.append(frame) }
        }
        #expect(frames == [
            .plaintext(type: 1, payload: Array("hi".utf8)), .plaintext(type: 300, payload: Array(repeating: 7, count: 200)),
            .plaintext(type: 1, payload: Array("hi".utf8)),
        ])
        #expect(reader.pending == 0)
    }

    @Test func noiseFramesComeWholeToo() throws {
        var reader = FrameReader(.noise)
        reader.append(FrameWriter.noise([]) + FrameWriter.noise([1, 2, 3]) + [1, 0])
        #expect(try reader.next() == .noise([]))
        #expect(try reader.next() == .noise([1, 2, 3]))
        #expect(try reader.next() == nil)
        reader.append([1, 9])
        #expect(try reader.next() == .noise([9]))
    }

    /// A plaintext client at an encrypted proxy starts with 00: refused with
    /// ESPHome's reason, which tells aioesphomeapi encryption is required.
    @Test func theOtherFramingIsABadIndicator() {
        var noise = FrameReader(.noise)
        noise.append(FrameWriter.plaintext(type: 1, payload: []))
        #expect(throws: FrameReader.Failure.badIndicator(0)) { try noise.next() }
        var plain = FrameReader(.plaintext)
        plain.append(FrameWriter.noise([]))
        #expect(throws: FrameReader.Failure.badIndicator(1)) { try plain.next() }
    }

    @Test func framesOverTheBoundAndLongVarintsAreRefusedBeforeTheyArrive() {
        var noise = FrameReader(.noise, maximumSize: 1024)
        noise.append([1, 0x04, 0x01])
        #expect(throws: FrameReader.Failure.tooLarge(1025)) { try noise.next() }
        var plain = FrameReader(.plaintext, maximumSize: 1024)
        plain.append([0, 0x81, 0x08])
        #expect(throws: FrameReader.Failure.tooLarge(1025)) { try plain.next() }
        var endless = FrameReader(.plaintext)
        endless.append([0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01])
        #expect(throws: FrameReader.Failure.badVarint) { try endless.next() }
    }
}
