import BlueZ
import FakeBlueZSupport
import DBus
import Synchronization
import Testing

/// Our Agent1 as bluetoothd (the fake) uses it when a pairing needs a person.
@Suite("Pairing agent")
struct PairingAgentTests {
    /// What the agent's person was asked or shown.
    struct Asked: Sendable, Equatable {
        var confirmed: [String] = []
        var shown: [String] = []
        var withdrawn = 0
    }

    /// Pairs the bird (which asks in `mode`: see the fake's RequireSecurity)
    /// through an agent whose person answers `accept` after a moment (the
    /// agent replies later).
    static func pair(_ mode: String = "confirm", accepting accept: Bool) async throws -> (Result<Void, BlueZError>, Asked) {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        try await fake.call("RequireSecurity", .string(birdAddress), .string(mode))
        try await fake.call("SetPasskey", .string(birdAddress), .uint32(4321))
        let test = try ClientUnderTest(fake)
        try await test.ready()
        let asked = Mutex(Asked())
        let loop = test.client.connection.loop
        let person = PairingAgent.Person(
            confirm: { device, passkey, answer in
                asked.withLock { $0.confirmed.append("\(device) \(PairingAgent.passkeyText(passkey))") }
                loop.schedule(after: .milliseconds(200)) { answer(accept) }
            },
            display: { device, code in asked.withLock { $0.shown.append("\(device) \(code)") } },
            cancel: { asked.withLock { $0.withdrawn += 1 } })
        let agent = PairingAgent(connection: test.client.connection, person: person)
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
        return (result, asked.withLock { $0 })
    }

    @Test func aConfirmedPasskeyPairs() async throws {
        let (result, asked) = try await Self.pair(accepting: true)
        #expect(asked == Asked(confirmed: ["\(birdPath) 004321"]), "the device asked about, and its passkey in six digits")
        if case .failure(let error) = result { Issue.record("pairing failed: \(error)") }
    }

    @Test func aRejectedPasskeyFailsThePairing() async throws {
        let (result, asked) = try await Self.pair(accepting: false)
        #expect(asked.confirmed == ["\(birdPath) 004321"])
        guard case .failure(let error) = result else {
            Issue.record("pairing succeeded")
            return
        }
        #expect(error.kind == .authenticationFailed && error.name == "org.bluez.Error.AuthenticationRejected", "\(error)")
    }

    @Test func aPasskeyToTypeOnTheBirdIsShown() async throws {
        let (result, asked) = try await Self.pair("display", accepting: true)
        #expect(asked == Asked(shown: ["\(birdPath) 004321"]))
        if case .failure(let error) = result { Issue.record("pairing failed: \(error)") }
    }

    @Test func aQuestionBlueZWithdrawsIsCancelled() async throws {
        let (result, asked) = try await Self.pair("withdrawn", accepting: true)
        #expect(asked.confirmed.count == 1 && asked.withdrawn == 1, "\(asked)")
        guard case .failure(let error) = result else {
            Issue.record("pairing succeeded")
            return
        }
        #expect(error.name == "org.bluez.Error.AuthenticationCanceled", "\(error)")
    }

    @Test(arguments: [
        [DBusValue.objectPath("/org/bluez/hci0/dev_X"), .uint32(7), .uint16(0)],
        [DBusValue.objectPath("/org/bluez/hci0/dev_X"), .string("0000")],
    ])
    func codesToShowAreReadFromEitherDisplayMethod(_ arguments: [DBusValue]) {
        #expect(PairingAgent.codeToShow(arguments)?.1 == (arguments.count == 3 ? "000007" : "0000"))
    }

    @Test func malformedCodesAreRefused() {
        let device = DBusValue.objectPath("/org/bluez/hci0/dev_X")
        #expect(PairingAgent.codeToShow([device, .uint32(1_000_000), .uint16(0)]) == nil)
        #expect(PairingAgent.codeToShow([device, .string("")]) == nil)
        #expect(PairingAgent.codeToShow([device, .string(String(repeating: "9", count: 17))]) == nil)
        #expect(PairingAgent.codeToShow([.string("x"), .string("0000")]) == nil)
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
