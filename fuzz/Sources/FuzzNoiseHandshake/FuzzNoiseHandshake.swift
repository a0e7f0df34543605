import Crypto
import FuzzSupport
import Proxy

/// The proxy's side of Noise_NNpsk0_25519_ChaChaPoly_SHA256 as ESPHome's API
/// runs it (the client's hello frame in the prologue), with a fixed
/// pre-shared key. Two ways in, chosen by the first byte:
///
/// - raw: any hello and any handshake message. A message of another length
///   than 48 is malformed; any outcome is a `Failure` or a handshake that
///   completes; the ciphers then take any bytes as frames, and what opens
///   is 16 bytes shorter than its frame.
/// - through an initiator of the target's own (below, from the spec), with
///   the fuzzer's ephemeral key (a private key, or any 32 bytes as its
///   public key), hello, and edits to its message; the initiator may hold
///   another key or bind another prologue. The proxy accepts exactly the
///   unedited message made with its key and prologue (and refuses it with
///   `badKey` only when the client's key is a low-order point); then the
///   initiator reads the proxy's answer (its tag must hold), and frames go
///   both ways: each frame the client seals opens to its plaintext, a
///   tampered, truncated, replayed or made-up one does not open and does not
///   move the nonce on, and each the proxy seals opens at the client.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNoiseHandshake(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(Array(UnsafeBufferPointer(start: data, count: size)))
    if input.bool() { throughInitiator(&input) } else { raw(&input) }
    return 0
}

private let presharedKey = Array(UInt8(0)...UInt8(31))

/// ESPHome's prologue: "NoiseAPIInit", the hello frame's 16-bit length, its payload.
private func prologue(_ hello: [UInt8]) -> [UInt8] {
    Array("NoiseAPIInit".utf8) + [UInt8(hello.count >> 8), UInt8(hello.count & 0xFF)] + hello
}

private func privateKey(_ input: inout FuzzInput) -> Curve25519.KeyAgreement.PrivateKey {
    var bytes: [UInt8] = []
    for _ in 0..<32 { bytes.append(input.byte()) }
    return try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: bytes)
}

private func raw(_ input: inout FuzzInput) {
    let hello = input.bytes(upTo: 255)
    let message = input.bytes(upTo: 255)
    let ours = privateKey(&input)
    var handshake = NoiseHandshake(presharedKey: presharedKey, prologue: prologue(hello))
    do throws(NoiseHandshake.Failure) {
        try handshake.readInitiatorMessage(message)
    } catch {
        require(message.count == 48 || error == .malformed, "a message of \(message.count) bytes: \(error)")
        require(!error.description.isEmpty)
        return
    }
    require(message.count == 48, "a message of \(message.count) bytes accepted")
    guard let (answer, opened, _) = try? handshake.writeResponderMessage(ephemeral: ours) else { return }
    require(answer.count == 48, "an answer of \(answer.count) bytes")
    var receive = opened
    while !input.isEmpty {
        let frame = input.bytes(upTo: 255)
        if let opened = receive.open(frame) { require(opened.count == frame.count - 16, "\(frame.count) bytes opened to \(opened.count)") }
    }
}

private func throughInitiator(_ input: inout FuzzInput) {
    let hello = input.bytes(upTo: 64)
    let options = input.byte()
    let knowsPrivateKey = options & 1 == 0
    let otherKey = options & 2 != 0
    let otherPrologue = options & 4 != 0
    var initiator: Initiator
    if knowsPrivateKey {
        initiator = Initiator(key: otherKey ? Array(repeating: 7, count: 32) : presharedKey,
                              prologue: prologue(otherPrologue ? hello + [0] : hello), ephemeral: .privateKey(privateKey(&input)))
    } else {
        var publicKey: [UInt8] = []
        for _ in 0..<32 { publicKey.append(input.byte()) }
        initiator = Initiator(key: otherKey ? Array(repeating: 7, count: 32) : presharedKey,
                              prologue: prologue(otherPrologue ? hello + [0] : hello), ephemeral: .publicKey(publicKey))
    }
    let made = initiator.writeMessage()
    var message = made
    for _ in 0..<Int(options >> 5) {
        let position = Int(input.byte())
        let change = input.byte()
        if position < message.count { message[position] ^= change } else if position & 1 == 0 { message.append(change) } else { message.removeLast() }
    }
    let proxyEphemeral = privateKey(&input)

    var handshake = NoiseHandshake(presharedKey: presharedKey, prologue: prologue(hello))
    let genuine = message == made && !otherKey && !otherPrologue
    do throws(NoiseHandshake.Failure) {
        try handshake.readInitiatorMessage(message)
    } catch {
        require(!genuine, "the genuine message refused: \(error)")
        require(error == (message.count == 48 ? .macFailure : .malformed), "\(message.count) bytes refused as \(error)")
        return
    }
    require(genuine, "a message not made with the proxy's key and prologue, or edited, accepted")
    let (answer, receive, send): ([UInt8], NoiseCipher, NoiseCipher)
    do throws(NoiseHandshake.Failure) {
        (answer, receive, send) = try handshake.writeResponderMessage(ephemeral: proxyEphemeral)
    } catch {
        // Only a client's key whose product with ours is all zeros (a low-order point) has no shared secret.
        require(error == .badKey, "the answer failed: \(error)")
        require(Initiator.isLowOrder(made.prefix(32), with: proxyEphemeral), "a usable key refused")
        return
    }
    require(answer.count == 48)
    guard knowsPrivateKey else { return }
    guard var (clientSend, clientReceive) = initiator.readAnswer(answer) else {
        fatalError("the client cannot read the proxy's answer")
    }
    var (proxyReceive, proxySend) = (receive, send)

    var sealed: [[UInt8]] = []
    var frames = 0
    while !input.isEmpty, frames < 64 {
        frames += 1
        let kind = input.byte() % 6
        let plaintext = input.bytes(upTo: 255)
        switch kind {
        case 0, 1:
            // The client's frame, delivered as sealed.
            let frame = clientSend.seal(plaintext)
            sealed.append(frame)
            require(proxyReceive.open(frame) == plaintext, "a sealed frame does not open to its plaintext")
        case 2:
            // The client's frame, tampered or cut, then as sealed (the nonce did not move).
            let frame = clientSend.seal(plaintext)
            sealed.append(frame)
            var bad = frame
            let position = Int(input.byte()) % (frame.count + 1)
            if position < frame.count { bad[position] ^= max(1, input.byte()) } else { bad.removeLast(1 + Int(input.byte()) % frame.count) }
            require(proxyReceive.open(bad) == nil, "a tampered frame opened")
            require(proxyReceive.open(frame) == plaintext, "a frame after a tampered one does not open")
        case 3:
            // An earlier frame again: a replay.
            guard !sealed.isEmpty else { continue }
            require(proxyReceive.open(sealed[Int(input.byte()) % sealed.count]) == nil, "a replayed frame opened")
        case 4:
            // Bytes made up as a frame.
            require(proxyReceive.open(plaintext) == nil, "made-up bytes opened")
        default:
            // The proxy's frame to the client.
            let frame = proxySend.seal(plaintext)
            require(frame.count == plaintext.count + 16)
            require(clientReceive.open(frame) == plaintext, "the client cannot open the proxy's frame")
        }
    }
}

/// The initiator's side of Noise_NNpsk0_25519_ChaChaPoly_SHA256 (noiseprotocol.org,
/// revision 34), from the spec and not from the proxy's code: `psk, e` then
/// `e, ee`.
private struct Initiator {
    enum Ephemeral {
        case privateKey(Curve25519.KeyAgreement.PrivateKey)
        /// Any 32 bytes sent as the key (the initiator cannot go past its first message).
        case publicKey([UInt8])
    }

    var chainingKey: [UInt8]
    var hash: [UInt8]
    var key: [UInt8] = []
    var nonce: UInt64 = 0
    let presharedKey: [UInt8]
    let ephemeral: Ephemeral

    init(key: [UInt8], prologue: [UInt8], ephemeral: Ephemeral) {
        hash = Array(SHA256.hash(data: Array("Noise_NNpsk0_25519_ChaChaPoly_SHA256".utf8)))
        chainingKey = hash
        presharedKey = key
        self.ephemeral = ephemeral
        mixHash(prologue)
    }

    var ephemeralPublic: [UInt8] {
        switch ephemeral {
        case .privateKey(let key): Array(key.publicKey.rawRepresentation)
        case .publicKey(let bytes): bytes
        }
    }

    mutating func writeMessage() -> [UInt8] {
        let outputs = Self.hkdf(chainingKey, presharedKey, 3)
        chainingKey = outputs[0]
        mixHash(outputs[1])
        (key, nonce) = (outputs[2], 0)
        let e = ephemeralPublic
        mixHash(e)
        mixKey(e)
        let tag = seal([])
        mixHash(tag)
        return e + tag
    }

    /// The proxy's `e, ee` and tag: the ciphers (send, receive), nil if the tag fails.
    mutating func readAnswer(_ answer: [UInt8]) -> (send: Cipher, receive: Cipher)? {
        guard answer.count == 48, case .privateKey(let ours) = ephemeral,
            let theirs = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: answer.prefix(32)),
            let shared = try? ours.sharedSecretFromKeyAgreement(with: theirs)
        else { return nil }
        let e = Array(answer.prefix(32))
        mixHash(e)
        mixKey(e)
        mixKey(shared.withUnsafeBytes { Array($0) })
        let tag = Array(answer.suffix(16))
        guard open(tag) != nil else { return nil }
        mixHash(tag)
        let split = Self.hkdf(chainingKey, [], 2)
        return (Cipher(key: split[0]), Cipher(key: split[1]))
    }

    static func isLowOrder(_ publicKey: ArraySlice<UInt8>, with ours: Curve25519.KeyAgreement.PrivateKey) -> Bool {
        guard let theirs = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: publicKey) else { return true }
        return (try? ours.sharedSecretFromKeyAgreement(with: theirs)) == nil
    }

    private mutating func mixHash(_ data: [UInt8]) { hash = Array(SHA256.hash(data: hash + data)) }

    private mutating func mixKey(_ input: [UInt8]) {
        let outputs = Self.hkdf(chainingKey, input, 2)
        (chainingKey, key, nonce) = (outputs[0], outputs[1], 0)
    }

    private mutating func seal(_ plaintext: [UInt8]) -> [UInt8] {
        var cipher = Cipher(key: key, nonce: nonce)
        defer { nonce += 1 }
        return cipher.seal(plaintext, hash)
    }

    private mutating func open(_ ciphertext: [UInt8]) -> [UInt8]? {
        var cipher = Cipher(key: key, nonce: nonce)
        defer { nonce += 1 }
        return cipher.open(ciphertext, hash)
    }

    static func hkdf(_ chainingKey: [UInt8], _ input: [UInt8], _ count: Int) -> [[UInt8]] {
        let temporary = Array(HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: chainingKey)))
        var outputs: [[UInt8]] = []
        var previous: [UInt8] = []
        for index in 1...count {
            previous = Array(HMAC<SHA256>.authenticationCode(for: previous + [UInt8(index)], using: SymmetricKey(data: temporary)))
            outputs.append(previous)
        }
        return outputs
    }

    /// ChaCha20-Poly1305 with Noise's nonce (4 zero bytes, a 64-bit little-endian counter).
    struct Cipher {
        let key: SymmetricKey
        var nonce: UInt64

        init(key: [UInt8], nonce: UInt64 = 0) {
            self.key = SymmetricKey(data: key)
            self.nonce = nonce
        }

        private var chachaNonce: ChaChaPoly.Nonce {
            var bytes: [UInt8] = [0, 0, 0, 0]
            withUnsafeBytes(of: nonce.littleEndian) { bytes += $0 }
            return try! ChaChaPoly.Nonce(data: bytes)
        }

        mutating func seal(_ plaintext: [UInt8], _ associated: [UInt8] = []) -> [UInt8] {
            let box = try! ChaChaPoly.seal(plaintext, using: key, nonce: chachaNonce, authenticating: associated)
            nonce += 1
            return Array(box.ciphertext) + Array(box.tag)
        }

        mutating func open(_ message: [UInt8], _ associated: [UInt8] = []) -> [UInt8]? {
            guard message.count >= 16,
                let box = try? ChaChaPoly.SealedBox(nonce: chachaNonce, ciphertext: message.dropLast(16), tag: message.suffix(16)),
                let plaintext = try? ChaChaPoly.open(box, using: key, authenticating: associated)
            else { return nil }
            nonce += 1
            return Array(plaintext)
        }
    }
}
