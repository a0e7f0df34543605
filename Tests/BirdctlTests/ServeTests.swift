import FakeBlueZSupport
import TestProcesses
import DBus
import Foundation
import Glibc
import Testing

extension FakeBlueZ {
    func remoteRead(_ uuid: String) async throws -> String {
        let reply = try await call("RemoteRead", .string(uuid))
        return String(decoding: reply.first?.bytes ?? [], as: UTF8.self)
    }

    func remoteWrite(_ uuid: String, _ text: String) async throws {
        try await call("RemoteWrite", .string(uuid), .bytes(Array(text.utf8)))
    }

    /// Starts `birdctl serve` and waits until it advertises.
    func serve(_ arguments: String...) async throws -> BirdctlProcess {
        let serve = try BirdctlProcess(["serve", "--json"] + arguments, environment: environment, withStdin: true)
        _ = try await serve.line(containing: "\"advertising\"")
        return serve
    }
}

@Suite("birdctl serve and set")
struct ServeTests {
    @Test func servesTheBirdServiceAndAdvertisesIt() async throws {
        let fake = try await FakeBlueZ()
        let serve = try await fake.serve("--name", "Wren", "--color", "00ff00", "--alpha", "30")
        #expect(try await fake.remoteRead(FakeBlueZ.nameUUID) == "Wren")
        #expect(try await fake.remoteRead(FakeBlueZ.colorUUID) == "#00FF00")
        #expect(try await fake.remoteRead(FakeBlueZ.alphaUUID) == "30")
        let advertisements = try await fake.call("Advertisements").first?.arrayItems ?? []
        let advertisement = try #require(advertisements.first?.propertyMap)
        #expect(advertisement["LocalName"] == .string("Wren"))
        #expect(advertisement["ServiceUUIDs"] == .strings([FakeBlueZ.birdService]))
        #expect(advertisement["Type"] == .string("peripheral"))
        #expect(advertisement["Discoverable"] == .bool(true))

        serve.signal(SIGINT)
        #expect(try await serve.waitForExit() == 0)
        let calls = try await fake.calls()
        #expect(calls.contains("UnregisterAdvertisement /org/bluez/hci0"))
        #expect(calls.contains("UnregisterApplication /org/bluez/hci0"))
    }

    @Test func onlyBluetoothdMayCallTheServedObjects() async throws {
        let fake = try await FakeBlueZ()
        let serve = try await fake.serve()
        let first = try await fake.call("Applications").first?.arrayItems?.first
        guard case .structure(let application) = first, application.count == 2 else {
            Issue.record("no registered application: \(String(describing: first))")
            return
        }
        let (owner, root) = (try #require(application[0].string), try #require(application[1].objectPath))
        // Another client on the bus (not the owner of org.bluez) is refused,
        // whatever it calls: a characteristic, the object tree, introspection.
        let stranger = try fake.bus.connect()
        defer { stranger.close() }
        for (path, interface, member, arguments) in [
            (ObjectPath(root.rawValue + "/service0/char0"), "org.bluez.GattCharacteristic1", "ReadValue", [DBusValue.propertyMap([:])]),
            (ObjectPath(root.rawValue + "/service0/char0"), "org.bluez.GattCharacteristic1", "WriteValue",
             [DBusValue.bytes(Array("55".utf8)), .propertyMap([:])]),
            (root, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", []),
            (root, "org.freedesktop.DBus.Introspectable", "Introspect", []),
        ] as [(ObjectPath, String, String, [DBusValue])] {
            do {
                _ = try await stranger.call(destination: owner, path: path, interface: interface, member: member, arguments: arguments)
                Issue.record("\(member) from a stranger was answered")
            } catch {
                #expect(error.name == .accessDenied, "\(member): \(error)")
            }
        }
        // bluetoothd (the fake, which owns org.bluez) still is answered.
        #expect(try await fake.remoteRead(FakeBlueZ.alphaUUID) == "80")
        serve.signal(SIGINT)
        #expect(try await serve.waitForExit() == 0)
    }

    @Test func validWritesChangeTheValueAndBadOnesAreRefused() async throws {
        let fake = try await FakeBlueZ()
        let serve = try await fake.serve()
        try await fake.remoteWrite(FakeBlueZ.alphaUUID, "55")
        let written = try parseJSON(try await serve.line(containing: "\"written\""))
        #expect(written["value"] as? Double == 0.55)
        #expect(try await fake.remoteRead(FakeBlueZ.alphaUUID) == "55")

        do {
            try await fake.remoteWrite(FakeBlueZ.alphaUUID, "101")
            Issue.record("a bad write should be refused")
        } catch let error as DBusError {
            #expect(error.name == "org.bluez.Error.Failed")
            #expect(error.message.contains("101 is above 100"))
        }
        let refused = try parseJSON(try await serve.line(containing: "refused_write"))
        #expect(refused["raw"] as? String == "313031")
        #expect(try await fake.remoteRead(FakeBlueZ.alphaUUID) == "55")
        serve.signal(SIGTERM)
        #expect(try await serve.waitForExit() == 0)
    }

    /// bluetoothd sends the offset of a read as a uint16; only the owner of
    /// org.bluez can send another type (a negative int16 once killed serve).
    @Test func readOffsetsAreUInt16WithinTheValue() async throws {
        let fake = try await FakeBlueZ()
        let serve = try await fake.serve("--name", "Wren")
        func read(_ offset: DBusValue) async throws -> String {
            let reply = try await fake.call("RemoteReadWith", .string(FakeBlueZ.nameUUID), .propertyMap(["offset": offset]))
            return String(decoding: reply.first?.bytes ?? [], as: UTF8.self)
        }
        #expect(try await read(.uint16(0)) == "Wren")
        #expect(try await read(.uint16(2)) == "en")
        #expect(try await read(.uint16(4)) == "")
        for (offset, error) in [
            (DBusValue.uint16(5), "org.bluez.Error.InvalidOffset"), (.uint16(.max), "org.bluez.Error.InvalidOffset"),
            (.int16(-1), "org.bluez.Error.InvalidArguments"), (.int32(1), "org.bluez.Error.InvalidArguments"),
            (.string("1"), "org.bluez.Error.InvalidArguments"),
        ] {
            do {
                _ = try await read(offset)
                Issue.record("a read at \(offset) was answered")
            } catch let failure as DBusError {
                #expect(failure.name.rawValue == error, "\(offset): \(failure)")
            }
        }
        // Still serving.
        #expect(try await fake.remoteRead(FakeBlueZ.nameUUID) == "Wren")
        serve.signal(SIGINT)
        #expect(try await serve.waitForExit() == 0)
    }

    /// A long write delivered in pieces (a prepared write executed): each
    /// piece continues the value at its offset, and the value assembled is
    /// what is validated, not the piece alone.
    @Test func longWritesAreAssembledBeforeTheyAreValidated() async throws {
        let fake = try await FakeBlueZ()
        let serve = try await fake.serve("--color", "#000000")
        func write(_ text: String, at offset: UInt16, _ extra: [String: DBusValue] = [:]) async throws {
            var options = extra
            options["offset"] = .uint16(offset)
            try await fake.call(
                "RemoteWriteWith", .string(FakeBlueZ.colorUUID), .bytes(Array(text.utf8)), .propertyMap(options))
        }
        // "FF" alone is no colour: written at offset 5 it ends one.
        try await write("FF", at: 5)
        #expect(try await fake.remoteRead(FakeBlueZ.colorUUID) == "#0000FF")
        let written = try parseJSON(try await serve.line(containing: "#0000FF"))
        #expect(written["event"] as? String == "written")
        // A piece continues the value so far, which ends where the piece does.
        try await write("12AB56", at: 1)
        #expect(try await fake.remoteRead(FakeBlueZ.colorUUID) == "#12AB56")
        // The assembled value is refused as a whole, and nothing changes.
        do {
            try await write("ZZ", at: 5)
            Issue.record("#12ABZZ was accepted")
        } catch let error as DBusError {
            #expect(error.message.contains("not a hex colour"), "\(error)")
        }
        // Past the end of the value, or not a uint16: refused before validation.
        for (offset, name) in [(DBusValue.uint16(8), "org.bluez.Error.InvalidOffset"), (.int32(-3), "org.bluez.Error.InvalidArguments")] {
            do {
                try await fake.call(
                    "RemoteWriteWith", .string(FakeBlueZ.colorUUID), .bytes(Array("00".utf8)), .propertyMap(["offset": offset]))
                Issue.record("a write at \(offset) was accepted")
            } catch let error as DBusError {
                #expect(error.name.rawValue == name, "\(offset): \(error)")
            }
        }
        // bluetoothd asking to authorize a queued piece changes nothing.
        try await write("ZZ", at: 1, ["prepare-authorize": .bool(true)])
        #expect(try await fake.remoteRead(FakeBlueZ.colorUUID) == "#12AB56")
        serve.signal(SIGINT)
        #expect(try await serve.waitForExit() == 0)
    }

    @Test func stdinLinesNotifySubscribers() async throws {
        let fake = try await FakeBlueZ()
        let serve = try await fake.serve()
        try await fake.call("RemoteSubscribe", .string(FakeBlueZ.alphaUUID))
        _ = try await serve.line(containing: "\"subscribed\"")
        serve.send("alpha 60")
        serve.send("beak 3")
        serve.send("alpha 8.5")
        serve.send("alpha 61")
        _ = try await serve.line(containing: "0.61")
        #expect(await serve.stderr(contains: "'beak' is not a field"), "\(serve.stderr)")
        #expect(await serve.stderr(contains: "bad alpha value"), "\(serve.stderr)")
        var notified: [String] = []
        _ = try await poll {
            let reply = try await fake.call("RemoteNotifications", .string(FakeBlueZ.alphaUUID))
            notified = (reply.first?.arrayItems ?? []).map { String(decoding: $0.bytes ?? [], as: UTF8.self) }
            return notified.count >= 2
        }
        #expect(notified == ["60", "61"])
        serve.signal(SIGINT)
        #expect(try await serve.waitForExit() == 0)
    }

    @Test func advertisingRefusedExitsNine() async throws {
        let fake = try await FakeBlueZ()
        try await fake.failNext("RegisterAdvertisement", "org.bluez.Error.Failed", "Maximum advertisements reached")
        let result = try await fake.birdctl("serve")
        #expect(result.status == 9)
        #expect(result.stderr.contains("Maximum advertisements reached"))
    }

    @Test func poweredOffAdapterExitsFour() async throws {
        let fake = try await FakeBlueZ(powered: false)
        let result = try await fake.birdctl("serve")
        #expect(result.status == 4)
    }

    @Test func badInitialValuesAreUsageErrors() async throws {
        let fake = try await FakeBlueZ()
        let result = try await fake.birdctl("serve", "--alpha", "150")
        #expect(result.status == 2)
        #expect(result.stderr.contains("150 is above 100"))
    }

    @Test func setWritesAValue() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let result = try await fake.birdctl("set", "alpha", "55")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try await fake.birdctl("read", "alpha").stdout == ["0.55"])
        #expect(try await fake.calls().contains { $0.hasPrefix("WriteValue") })
    }

    @Test func setRefusesABadValueBeforeAnyRadioWork() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let result = try await fake.birdctl("set", bird, "color", "#GGHHII")
        #expect(result.status == 2)
        #expect(result.stderr.contains("not a hex colour"))
        #expect(try await fake.calls().filter { $0.hasPrefix("Connect") }.isEmpty)
    }

    @Test func setReportsARefusedWrite() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.failNext("WriteValue", "org.bluez.Error.NotPermitted", "Write not permitted")
        let result = try await fake.birdctl("set", "name", "Wren")
        #expect(result.status == 9)
        #expect(result.stderr.contains("Write not permitted"))
    }

    @Test func animateChangesValuesEverySecond() async throws {
        let fake = try await FakeBlueZ()
        let serve = try await fake.serve("--animate")
        _ = try await serve.line(containing: "\"value\"", within: .seconds(5))
        serve.signal(SIGINT)
        #expect(try await serve.waitForExit() == 0)
    }
}
