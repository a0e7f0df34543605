import BlueZ
import BlueZTestSupport
import DBus
import Synchronization
import Testing

/// Our Agent1 as bluetoothd (the fake) uses it when a pairing needs a person.
@Suite("Pairing agent")
struct PairingAgentTests {
    /// Pairs the bird (which asks for a confirmed passkey) through an agent
    /// whose person answers `accept` after a moment (the agent replies later).
    static func pair(accepting accept: Bool) async throws -> (Result<Void, BlueZError>, passkey: UInt32?) {
        let fake = try FakeBlueZ()
        try await fake.addBird(cached: true)
        try await fake.call("RequireSecurity", .string(birdAddress), .string("confirm"))
        let test = try ClientUnderTest(fake)
        try await test.ready()
        let shown = Mutex<UInt32?>(nil)
        let loop = test.client.connection.loop
        let agent = PairingAgent(connection: test.client.connection) { _, passkey, answer in
            shown.withLock { $0 = passkey }
            loop.schedule(after: .milliseconds(200)) { answer(accept) }
        }
        #expect(agent.capability == .displayYesNo)
        agent.export()
        try await test.perform(.registerAgent(agent))
        let result: Result<Void, BlueZError>
        do {
            try await test.perform(.pair(device: birdPath, timeout: .seconds(10)))
            result = .success(())
        } catch {
            result = .failure(error)
        }
        return (result, shown.withLock { $0 })
    }

    @Test func aConfirmedPasskeyPairs() async throws {
        let (result, passkey) = try await Self.pair(accepting: true)
        #expect(passkey == 123456)
        if case .failure(let error) = result { Issue.record("pairing failed: \(error)") }
    }

    @Test func aRejectedPasskeyFailsThePairing() async throws {
        let (result, passkey) = try await Self.pair(accepting: false)
        #expect(passkey == 123456)
        guard case .failure(let error) = result else {
            Issue.record("pairing succeeded")
            return
        }
        #expect(error.kind == .authenticationFailed && error.name == "org.bluez.Error.AuthenticationRejected", "\(error)")
    }

    @Test(arguments: [
        (BlueZError(.notPermitted, message: "Not paired"), true),
        (BlueZError(.failed, message: "Operation failed with ATT error: 0x05"), true),
        (BlueZError(.notPermitted, message: "Insufficient Encryption"), true),
        (BlueZError(.authenticationFailed), true),
        (BlueZError(.notPermitted, message: "Read not permitted"), false),
        (BlueZError(.failed, message: "le-connection-abort-by-local"), false),
        // Only whole phrases: one cut short at the end, or no message at all, is none.
        (BlueZError(.failed, message: "Operation failed with ATT error: 0x0"), false),
        (BlueZError(.notPermitted, message: ""), false),
    ])
    func whichRefusalsAskForPairing(_ error: BlueZError, _ needsPairing: Bool) {
        #expect(error.needsPairing == needsPairing, "\(error)")
    }
}
