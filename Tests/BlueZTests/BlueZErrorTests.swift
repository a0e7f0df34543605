import BlueZ
import FakeBlueZSupport
import DBus
import Testing

@Suite("BlueZ errors surface as their kinds")
struct BlueZErrorTests {
    static let injected: [(name: String, message: String, kind: BlueZError.Kind)] = [
        ("org.bluez.Error.InProgress", "In Progress", .inProgress),
        ("org.bluez.Error.Failed", "le-connection-abort-by-local", .failed),
        ("org.bluez.Error.Failed", "br-connection-canceled", .failed),
        ("org.bluez.Error.Failed", "Software caused connection abort", .failed),
        ("org.bluez.Error.NotReady", "Resource Not Ready", .notReady),
        ("org.bluez.Error.NotPermitted", "Read not permitted", .notPermitted),
        ("org.bluez.Error.NotAuthorized", "Operation Not Authorized", .notAuthorized),
        ("org.bluez.Error.NotSupported", "Operation is not supported", .notSupported),
        ("org.bluez.Error.InvalidValueLength", "Invalid Length", .invalidValueLength),
        ("org.bluez.Error.DoesNotExist", "Does Not Exist", .doesNotExist),
        ("org.bluez.Error.AlreadyConnected", "Already Connected", .alreadyConnected),
        ("org.bluez.Error.AuthenticationFailed", "Authentication Failed", .authenticationFailed),
        ("org.freedesktop.DBus.Error.AccessDenied", "Rejected send message", .permissionDenied),
        ("org.freedesktop.DBus.Error.NoReply", "Did not receive a reply", .timeout),
        ("org.bluez.Error.SomethingNew", "from a future BlueZ", .other),
    ]

    @Test("an injected error on Connect", arguments: injected)
    func injectedOnConnect(_ injected: (name: String, message: String, kind: BlueZError.Kind)) async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        try await fake.failNext("Connect", injected.name, injected.message)
        do {
            try await test.perform(.connect(device: birdPath))
            Issue.record("Connect should have failed")
        } catch {
            #expect(error.kind == injected.kind)
            #expect(error.name == injected.name)
            #expect(error.message == injected.message)
            #expect(error.isTransient == (injected.kind == .inProgress
                || ["le-connection-abort-by-local", "br-connection-canceled"].contains(injected.message)))
        }
        // The failure was for one call only.
        try await test.perform(.connect(device: birdPath))
    }

    @Test("each operation reports an injected error", arguments: [
        "SetDiscoveryFilter", "StartDiscovery", "StopDiscovery", "Set", "Connect", "Disconnect",
        "ReadValue", "WriteValue", "StartNotify", "StopNotify", "RemoveDevice",
    ])
    func everyOperationFails(_ method: String) async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        try await test.connectBird()
        let name = try #require(await test.characteristic(FakeBlueZ.nameUUID)).path
        try await fake.failNext(method, "org.bluez.Error.Failed", "injected into \(method)")
        do {
            switch method {
            case "SetDiscoveryFilter": try await test.perform(.setDiscoveryFilter(adapter: hci0, uuids: []))
            case "StartDiscovery": try await test.perform(.startDiscovery(adapter: hci0))
            case "StopDiscovery": try await test.perform(.stopDiscovery(adapter: hci0))
            case "Set": try await test.perform(.setPowered(adapter: hci0, true))
            case "Connect": try await test.perform(.connect(device: birdPath))
            case "Disconnect": try await test.perform(.disconnect(device: birdPath))
            case "ReadValue": _ = try await test.perform(.readValue(characteristic: name))
            case "WriteValue": try await test.perform(.writeValue(characteristic: name, [1]))
            case "StartNotify": try await test.perform(.startNotify(characteristic: name))
            case "StopNotify": try await test.perform(.stopNotify(characteristic: name))
            case "RemoveDevice": try await test.perform(.removeDevice(adapter: hci0, device: birdPath))
            default: Issue.record("no case for \(method)")
            }
            Issue.record("\(method) should have failed")
        } catch {
            #expect(error.kind == .failed)
            #expect(error.message == "injected into \(method)")
        }
    }

    @Test func aLocalAbortIsFoundWhereverBlueZPutsItInTheMessage() {
        #expect(BlueZError(.failed, message: "le-connection-abort-by-local").isConnectionAbortByLocal)
        #expect(BlueZError(.failed, message: "Connect: le-connection-abort-by-local (0x3e)").isConnectionAbortByLocal)
        #expect(!BlueZError(.failed, message: "le-connection-abort-by-remote").isConnectionAbortByLocal)
        #expect(!BlueZError(.failed, message: "le-connection-abort").isConnectionAbortByLocal)
        #expect(!BlueZError(.inProgress, message: "le-connection-abort-by-local").isConnectionAbortByLocal)
        #expect(BlueZError(.failed, message: "br-connection-canceled").isConnectionCanceled)
        #expect(BlueZError(.failed, message: "Connect: br-connection-canceled").isConnectionCanceled)
        #expect(!BlueZError(.failed, message: "br-connection-cancel").isConnectionCanceled)
        #expect(!BlueZError(.notReady, message: "br-connection-canceled").isConnectionCanceled)
    }

    /// bluetoothd names the ATT errors it knows (NotPermitted, InvalidOffset…);
    /// the others come as Failed "ATT error: 0x…".
    @Test func anUnnamedATTErrorIsFoundWhateverItsCase() {
        #expect(BlueZError(.failed, message: "ATT error: 0x80").isUnnamedATTError)
        #expect(BlueZError(.failed, message: "Operation failed with ATT error: 0x0e").isUnnamedATTError)
        #expect(BlueZError(.failed, message: "att error: 0x11").isUnnamedATTError)
        #expect(!BlueZError(.failed, message: "ATT: 0x80").isUnnamedATTError)
        #expect(!BlueZError(.notPermitted, message: "ATT error: 0x80").isUnnamedATTError)
    }

    /// bluetoothd 5.66 refuses StartNotify with NotPermitted "Notify acquired"
    /// while another client holds the notifications through AcquireNotify.
    @Test func notificationsHeldByAnotherClientAreNamedHere() {
        #expect(BlueZError(.notPermitted, message: "Notify acquired").isNotifyAcquiredByAnother)
        #expect(!BlueZError(.notPermitted, message: "Notify acquired elsewhere").isNotifyAcquiredByAnother)
        #expect(!BlueZError(.notPermitted, message: "Read not permitted").isNotifyAcquiredByAnother)
        #expect(!BlueZError(.failed, message: "Notify acquired").isNotifyAcquiredByAnother)
    }

    @Test func aReplyThatNeverComesTimesOut() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        try await fake.delayNext("Connect", seconds: -1)
        let started = ContinuousClock.now
        do {
            try await test.perform(.connect(device: birdPath, timeout: .milliseconds(300)))
            Issue.record("Connect should have timed out")
        } catch {
            #expect(error.kind == .timeout)
        }
        #expect(ContinuousClock.now - started < .seconds(10))  // not the 25 s default
        // The client is still usable.
        try await test.perform(.disconnect(device: birdPath))
    }

    @Test func anErrorServedGoesOutUnderItsKindsName() {
        #expect(BlueZError(.notSupported).dbusName == "org.bluez.Error.NotSupported")
        #expect(BlueZError(.failed, message: "bad alpha value").dbusName == "org.bluez.Error.Failed")
        #expect(BlueZError(.authenticationFailed).dbusName == "org.bluez.Error.AuthenticationFailed")
        #expect(BlueZError(.timeout).dbusName == "org.bluez.Error.Failed")  // BlueZ has no name for it
        #expect(BlueZError(.other, name: "org.example.Error.Odd").dbusName == "org.example.Error.Odd")
    }

    @Test func aDelayedReplyStillArrives() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        try await fake.delayNext("Connect", seconds: 0.3)
        let started = ContinuousClock.now
        // Under its deadline, a reply held back 0.3 s completes the call.
        try await test.perform(.connect(device: birdPath, timeout: .seconds(5)))
        #expect(ContinuousClock.now - started >= .milliseconds(300), "the reply was not held back")
        #expect(await test.client.snapshot().device(birdPath)?.connected == true)
    }

    @Test func aLateReplyAfterTheTimeoutIsDropped() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        // The first Connect is answered (success) at 0.4 s, after its 0.1 s deadline.
        try await fake.delayNext("Connect", seconds: 0.4)
        await #expect(throws: BlueZError.self) {
            try await test.perform(.connect(device: birdPath, timeout: .milliseconds(100)))
        }
        // The second is still waiting when that late success arrives, and is
        // itself refused at 0.7 s: the late reply must not complete it.
        try await fake.delayNext("Connect", seconds: 0.6)
        try await fake.failNext("Connect", "org.bluez.Error.Failed", "the second attempt")
        do {
            try await test.perform(.connect(device: birdPath, timeout: .seconds(5)))
            Issue.record("the second Connect took the first one's late reply")
        } catch {
            #expect(error.kind == .failed && error.message == "the second attempt", "\(error)")
        }
    }

    @Test func bluezRefusalsFromTheFakeItself() async throws {
        let fake = try await FakeBlueZ(powered: false)
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        do {
            try await test.perform(.startDiscovery(adapter: hci0))
            Issue.record("discovery on a powered-off adapter should fail")
        } catch { #expect(error.kind == .notReady) }
        do {
            try await test.perform(.connect(device: "/org/bluez/hci0/dev_00_00_00_00_00_00"))
            Issue.record("a missing device should fail")
        } catch { #expect(error.kind == .notFound) }
        try await test.perform(.setPowered(adapter: hci0, true))
        try await test.next { if case .adapterChanged(let a, _) = $0 { a.powered } else { false } }
        try await test.perform(.connect(device: birdPath))
    }
}
