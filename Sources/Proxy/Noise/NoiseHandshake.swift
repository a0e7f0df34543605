import Crypto

/// The responder's side of `Noise_NNpsk0_25519_ChaChaPoly_SHA256`, the
/// handshake ESPHome's native API encrypts with (noiseprotocol.org, revision
/// 34): the client proves it holds the pre-shared key in its first message
/// (`psk, e`), the proxy answers with its own ephemeral key (`e, ee`), and
/// each side then has one cipher per direction.
public struct NoiseHandshake {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The first message is not 32 key bytes and a 16-byte tag.
        case malformed
        /// Its tag does not authenticate: the client holds another key.
        case macFailure
        /// The client's ephemeral key is not a usable X25519 point.
        case badKey

        public var description: String {
            switch self {
            case .malformed: "Bad handshake packet len"
            case .macFailure: "Handshake MAC failure"
            case .badKey: "Handshake error"
            }
        }
    }

    static let protocolName = Array("Noise_NNpsk0_25519_ChaChaPoly_SHA256".utf8)

    private var chainingKey: [UInt8]
    private var hash: [UInt8]
    private var cipher: NoiseCipher?
    private let presharedKey: [UInt8]
    private var remoteEphemeral: Curve25519.KeyAgreement.PublicKey?

    /// `presharedKey`: 32 bytes. `prologue`: what both sides bind the
    /// handshake to (ESPHome: "NoiseAPIInit", then the client's hello frame).
    public init(presharedKey: [UInt8], prologue: [UInt8]) {
        precondition(presharedKey.count == 32, "a Noise pre-shared key is 32 bytes")
        // The name is longer than a hash: it is hashed (Noise §5.2, InitializeSymmetric).
        hash = Array(SHA256.hash(data: Self.protocolName))
        chainingKey = hash
        self.presharedKey = presharedKey
        mixHash(prologue)
    }

    /// The client's message: `psk`, then its ephemeral key `e`, then the tag
    /// of an empty payload, which only a client holding the key can make.
    public mutating func readInitiatorMessage(_ message: [UInt8]) throws(Failure) {
        guard message.count == 32 + 16 else { throw .malformed }
        mixKeyAndHash(presharedKey)
        let ephemeral = Array(message[..<32])
        guard let key = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: ephemeral) else { throw .badKey }
        remoteEphemeral = key
        mixHash(ephemeral)
        mixKey(ephemeral)  // psk mode: `e` also mixes the key (Noise §9.2)
        _ = try decryptAndHash(Array(message[32...]))
    }

    /// The proxy's answer (`e, ee` and the tag of an empty payload) and the
    /// ciphers: `receive` opens what the client sends, `send` seals ours.
    public mutating func writeResponderMessage(ephemeral: Curve25519.KeyAgreement.PrivateKey = .init()) throws(Failure)
        -> (message: [UInt8], receive: NoiseCipher, send: NoiseCipher)
    {
        guard let remoteEphemeral else { throw .malformed }
        let ours = Array(ephemeral.publicKey.rawRepresentation)
        mixHash(ours)
        mixKey(ours)
        guard let shared = try? ephemeral.sharedSecretFromKeyAgreement(with: remoteEphemeral) else { throw .badKey }
        mixKey(shared.withUnsafeBytes { Array($0) })
        let tag = encryptAndHash([])
        let (initiatorToResponder, responderToInitiator) = Self.hkdf2(chainingKey, [])
        return (ours + tag, NoiseCipher(key: initiatorToResponder), NoiseCipher(key: responderToInitiator))
    }

    // MARK: The symmetric state (Noise §5.2)

    private mutating func mixHash(_ data: [UInt8]) {
        hash = Array(SHA256.hash(data: hash + data))
    }

    private mutating func mixKey(_ input: [UInt8]) {
        let (chaining, key) = Self.hkdf2(chainingKey, input)
        chainingKey = chaining
        cipher = NoiseCipher(key: key)
    }

    private mutating func mixKeyAndHash(_ input: [UInt8]) {
        let outputs = Self.hkdf(chainingKey, input, count: 3)
        chainingKey = outputs[0]
        mixHash(outputs[1])
        cipher = NoiseCipher(key: outputs[2])
    }

    private mutating func encryptAndHash(_ plaintext: [UInt8]) -> [UInt8] {
        let ciphertext = cipher!.seal(plaintext, authenticating: hash)
        mixHash(ciphertext)
        return ciphertext
    }

    private mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(Failure) -> [UInt8] {
        guard let plaintext = cipher?.open(ciphertext, authenticating: hash) else { throw .macFailure }
        mixHash(ciphertext)
        return plaintext
    }

    /// Noise's HKDF (§4.3): HMAC-SHA256 keyed by the chaining key, `count` outputs of 32 bytes.
    static func hkdf(_ chainingKey: [UInt8], _ input: [UInt8], count: Int) -> [[UInt8]] {
        let temporary = SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: chainingKey))))
        var outputs: [[UInt8]] = []
        var previous: [UInt8] = []
        for index in 1...count {
            previous = Array(HMAC<SHA256>.authenticationCode(for: previous + [UInt8(index)], using: temporary))
            outputs.append(previous)
        }
        return outputs
    }

    static func hkdf2(_ chainingKey: [UInt8], _ input: [UInt8]) -> ([UInt8], [UInt8]) {
        let outputs = hkdf(chainingKey, input, count: 2)
        return (outputs[0], outputs[1])
    }
}

/// One direction's ChaCha20-Poly1305 with Noise's nonce: four zero bytes and
/// a 64-bit little-endian counter, one per message.
public struct NoiseCipher {
    private let key: SymmetricKey
    private var counter: UInt64 = 0

    init(key: [UInt8]) {
        self.key = SymmetricKey(data: key)
    }

    /// The ciphertext and its 16-byte tag.
    public mutating func seal(_ plaintext: [UInt8], authenticating data: [UInt8] = []) -> [UInt8] {
        let box = try! ChaChaPoly.seal(plaintext, using: key, nonce: nonce(), authenticating: data)
        counter += 1
        return Array(box.ciphertext) + Array(box.tag)
    }

    /// The plaintext, or nil if the tag does not authenticate.
    public mutating func open(_ message: [UInt8], authenticating data: [UInt8] = []) -> [UInt8]? {
        guard message.count >= 16,
            let box = try? ChaChaPoly.SealedBox(nonce: nonce(), ciphertext: message.dropLast(16), tag: message.suffix(16)),
            let plaintext = try? ChaChaPoly.open(box, using: key, authenticating: data)
        else { return nil }
        counter += 1
        return Array(plaintext)
    }

    private func nonce() -> ChaChaPoly.Nonce {
        var bytes: [UInt8] = [0, 0, 0, 0]
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: counter >> UInt64(shift))) }
        return try! ChaChaPoly.Nonce(data: bytes)
    }
}
