import Crypto
import Testing

@testable import Proxy

/// The responder's side of Noise_NNpsk0_25519_ChaChaPoly_SHA256 against a
/// reference: the messages below are what Python's noiseprotocol 0.3.1 (the
/// library aioesphomeapi encrypts with) wrote for both sides, with the
/// ephemeral keys fixed (all bytes 1 for the client, 2 for the proxy), the
/// pre-shared key 0…31 and ESPHome's prologue.
@Suite("Noise NNpsk0, the proxy's side")
struct NoiseHandshakeTests {
    static let presharedKey = Array(UInt8(0)...UInt8(31))
    static let prologue = Array("NoiseAPIInit".utf8) + [0, 0]
    static let clientMessage = hex("a4e09292b651c278b9772c569f5fa9bb13d906b46ab68c9df9dc2b4409f8a209f0c00e96458473006479a4a6d2f4c0b6")
    static let proxyMessage = hex("ce8d3ad1ccb633ec7b70c17814a5c76ecd029685050d344745ba05870e587d596861a524ec5a0c60694277c72b6e7035")
    static let clientHello = hex("648f9d8c6791cc378228a0e0b005f62a18ab1975b0")
    static let proxyWorld = hex("af1af2aaf422690e8b94d916be63f2a733f873b1a5")
    static let clientAgain = hex("6ce4afbc13c500035334d4550f1ea988be010957c8")

    static func hex(_ text: String) -> [UInt8] {
        stride(from: 0, to: text.count, by: 2).map { offset in
            let start = text.index(text.startIndex, offsetBy: offset)
            return UInt8(text[start..<text.index(start, offsetBy: 2)], radix: 16)!
        }
    }

    static let proxyEphemeral = try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: [UInt8](repeating: 2, count: 32))

    @Test func theHandshakeAndItsCiphersMatchTheReference() throws {
        var handshake = NoiseHandshake(presharedKey: Self.presharedKey, prologue: Self.prologue)
        try handshake.readInitiatorMessage(Self.clientMessage)
        var (message, receive, send) = try handshake.writeResponderMessage(ephemeral: Self.proxyEphemeral)
        #expect(message == Self.proxyMessage)
        #expect(receive.open(Self.clientHello) == Array("hello".utf8))
        #expect(send.seal(Array("world".utf8)) == Self.proxyWorld)
        // Each message moves its direction's nonce on.
        #expect(receive.open(Self.clientAgain) == Array("again".utf8))
    }

    @Test func aClientWithAnotherKeyFailsTheMAC() {
        var handshake = NoiseHandshake(presharedKey: Array(repeating: 7, count: 32), prologue: Self.prologue)
        #expect(throws: NoiseHandshake.Failure.macFailure) { try handshake.readInitiatorMessage(Self.clientMessage) }
        #expect(NoiseHandshake.Failure.macFailure.description == "Handshake MAC failure")
    }

    @Test func anotherPrologueFailsTheMACToo() {
        var handshake = NoiseHandshake(presharedKey: Self.presharedKey, prologue: Array("NoiseAPIInit".utf8) + [0, 1, 9])
        #expect(throws: NoiseHandshake.Failure.macFailure) { try handshake.readInitiatorMessage(Self.clientMessage) }
    }

    @Test(arguments: [0, 47, 49, 200])
    func aFirstMessageOfAnotherSizeIsMalformed(_ size: Int) {
        var handshake = NoiseHandshake(presharedKey: Self.presharedKey, prologue: Self.prologue)
        #expect(throws: NoiseHandshake.Failure.malformed) { try handshake.readInitiatorMessage(Array(repeating: 1, count: size)) }
    }

    @Test func aTamperedOrReplayedMessageDoesNotOpen() throws {
        var handshake = NoiseHandshake(presharedKey: Self.presharedKey, prologue: Self.prologue)
        try handshake.readInitiatorMessage(Self.clientMessage)
        var (_, receive, _) = try handshake.writeResponderMessage(ephemeral: Self.proxyEphemeral)
        var tampered = Self.clientHello
        tampered[0] ^= 1
        #expect(receive.open(tampered) == nil)
        #expect(receive.open(Array(Self.clientHello.prefix(15))) == nil)
        #expect(receive.open(Self.clientHello) == Array("hello".utf8))
        // The same message again is under the next nonce: it no longer opens.
        #expect(receive.open(Self.clientHello) == nil)
    }
}
