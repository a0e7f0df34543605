import FakeBlueZSupport
import TestProcesses
import DBus
import Testing

/// A server exporting an object manager with one object, and a client.
final class ExportPair: @unchecked Sendable {
    let bus: PrivateBus
    let server: Connection
    let client: Connection
    let inbox = SignalInbox()

    static let interface = "org.birdctl.Bird"

    init() async throws {
        bus = try await PrivateBus.started()
        server = try bus.connect()
        client = try bus.connect()
        server.addObjectManager(at: "/app")
        server.export("/app/bird0", [Self.birdInterface(name: "Robin")])
        _ = try await getAll("/app/bird0")  // the export (and its signal) is done
        client.subscribe(MatchRule(sender: server.uniqueName), handler: inbox.handler)
        _ = try await getAll("/app/bird0")  // the AddMatch is in place
    }

    static func birdInterface(name: String) -> ExportedInterface {
        ExportedInterface(
            interface, properties: ["Name": .string(name), "Alpha": .byte(80), "Color": .string("#FF8800")],
            methods: ["Ping": { _ in [.string("pong")] }],
            writable: ["Alpha", "Color"],
            setter: { property, value throws(DBusError) in
                if property == "Alpha", value.signature != "y" {
                    throw DBusError(.invalidArgs, "alpha is a byte")
                }
                if property == "Alpha", (value.integer ?? 0) > 100 {
                    throw DBusError("org.birdctl.Error.InvalidValue", "alpha must be 0...100")
                }
            })
    }

    func call(_ path: ObjectPath, _ interface: String, _ member: String, _ arguments: [DBusValue] = [])
        async throws(DBusError) -> [DBusValue]
    {
        try await client.call(
            destination: server.uniqueName, path: path, interface: interface, member: member, arguments: arguments)
    }

    func getAll(_ path: ObjectPath) async throws(DBusError) -> [String: DBusValue]? {
        try await call(path, "org.freedesktop.DBus.Properties", "GetAll", [.string(Self.interface)]).first?.propertyMap
    }

    deinit {
        client.close()
        server.close()
        bus.stop()
    }
}

@Suite("Exported objects: Properties and ObjectManager")
struct ExportedObjectTests {
    @Test func getAndGetAll() async throws {
        let pair = try await ExportPair()
        #expect(try await pair.getAll("/app/bird0") == ["Name": .string("Robin"), "Alpha": .byte(80), "Color": .string("#FF8800")])
        let name = try await pair.call("/app/bird0", "org.freedesktop.DBus.Properties", "Get", [.string(ExportPair.interface), .string("Name")])
        #expect(name == [.variant(.string("Robin"))])
        #expect(try await pair.call("/app/bird0", ExportPair.interface, "Ping") == [.string("pong")])
    }

    @Test func setEmitsPropertiesChangedAndRefusalsChangeNothing() async throws {
        let pair = try await ExportPair()
        let properties = "org.freedesktop.DBus.Properties"
        _ = try await pair.call("/app/bird0", properties, "Set", [.string(ExportPair.interface), .string("Alpha"), .variant(.byte(42))])
        let changed = try #require(await pair.inbox.next())
        #expect(changed.member == "PropertiesChanged")
        #expect(changed.path == "/app/bird0")
        #expect(try changed.arguments() == [.string(ExportPair.interface), .propertyMap(["Alpha": .byte(42)]), .strings([])])

        for (property, value, kind) in [
            ("Alpha", DBusValue.byte(101), DBusError.Kind.other), ("Alpha", .string("x"), .invalidArgs),
            ("Name", .string("Wren"), .other), ("Nope", .string("x"), .unknownMethod),
        ] {
            do {
                _ = try await pair.call("/app/bird0", properties, "Set", [.string(ExportPair.interface), .string(property), .variant(value)])
                Issue.record("Set \(property) = \(value) should be refused")
            } catch {
                #expect(error.kind == kind, "\(property) = \(value): \(error)")
            }
        }
        #expect(try await pair.getAll("/app/bird0")?["Alpha"] == .byte(42))
        #expect(try await pair.getAll("/app/bird0")?["Name"] == .string("Robin"))
    }

    @Test func serverSideChangesAreSignalled() async throws {
        let pair = try await ExportPair()
        pair.server.setProperty("/app/bird0", interface: ExportPair.interface, name: "Color", value: .string("#00FF00"))
        pair.server.setProperty("/app/bird0", interface: ExportPair.interface, name: "Color", value: .string("#00FF00"))
        pair.server.setProperty("/app/bird0", interface: ExportPair.interface, name: "Alpha", value: .byte(1))
        let first = try #require(await pair.inbox.next())
        #expect(try first.arguments()[1] == .propertyMap(["Color": .string("#00FF00")]))
        // An unchanged value is not signalled again.
        let second = try #require(await pair.inbox.next())
        #expect(try second.arguments()[1] == .propertyMap(["Alpha": .byte(1)]))
    }

    @Test func objectManagerListsAndAnnouncesObjects() async throws {
        let pair = try await ExportPair()
        let managed = try await pair.call("/app", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        #expect(managed == [.dictionary(key: "o", value: "a{sa{sv}}", [
            DictEntry(.objectPath("/app/bird0"), .dictionary(key: "s", value: "a{sv}", [
                DictEntry(.string(ExportPair.interface), .propertyMap(["Name": .string("Robin"), "Alpha": .byte(80), "Color": .string("#FF8800")]))
            ]))
        ])])

        pair.server.export("/app/bird1", [ExportPair.birdInterface(name: "Wren")])
        let added = try #require(await pair.inbox.next())
        #expect(added.member == "InterfacesAdded")
        #expect(added.path == "/app")
        #expect(try added.arguments().first == .objectPath("/app/bird1"))

        pair.server.unexport("/app/bird0")
        let removed = try #require(await pair.inbox.next())
        #expect(removed.member == "InterfacesRemoved")
        #expect(try removed.arguments() == [.objectPath("/app/bird0"), .strings([ExportPair.interface])])

        let after = try await pair.call("/app", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        #expect(after.first?.dictionaryEntries?.map(\.key) == [.objectPath("/app/bird1")])
        await #expect(throws: DBusError.self) { try await pair.getAll("/app/bird0") }
    }

    @Test func introspectionNamesInterfacesAndChildren() async throws {
        let pair = try await ExportPair()
        let xml = try await pair.call("/app", "org.freedesktop.DBus.Introspectable", "Introspect").first?.string ?? ""
        #expect(xml.contains("<node name=\"bird0\"/>"))
        let bird = try await pair.call("/app/bird0", "org.freedesktop.DBus.Introspectable", "Introspect").first?.string ?? ""
        #expect(bird.contains("<interface name=\"org.birdctl.Bird\">"))
        #expect(bird.contains("<property name=\"Alpha\" type=\"y\" access=\"readwrite\"/>"))
    }

    @Test func restrictedObjectsAnswerOnlyTheNamesOwner() async throws {
        let pair = try await ExportPair()
        let owner = try pair.bus.connect()
        defer { owner.close() }
        _ = try await owner.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "RequestName", arguments: [.string("org.birdctl.Trusted"), .uint32(4)])
        pair.server.restrictCalls(below: "/app", toOwnerOf: "org.birdctl.Trusted")
        func call(from connection: Connection, _ path: ObjectPath, _ interface: String, _ member: String,
                  _ arguments: [DBusValue] = []) async throws(DBusError) -> [DBusValue] {
            try await connection.call(
                destination: pair.server.uniqueName, path: path, interface: interface, member: member,
                arguments: arguments)
        }
        // Every kind of call from anyone else is refused...
        for (path, interface, member, arguments) in [
            ("/app/bird0", ExportPair.interface, "Ping", []),
            ("/app/bird0", "org.freedesktop.DBus.Properties", "GetAll", [DBusValue.string(ExportPair.interface)]),
            ("/app", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", []),
            ("/app", "org.freedesktop.DBus.Introspectable", "Introspect", []),
        ] as [(ObjectPath, String, String, [DBusValue])] {
            do {
                _ = try await call(from: pair.client, path, interface, member, arguments)
                Issue.record("\(interface).\(member) from a stranger was answered")
            } catch {
                #expect(error.name == .accessDenied, "\(member): \(error)")
            }
        }
        // ...and answered for the owner.
        #expect(try await call(from: owner, "/app/bird0", ExportPair.interface, "Ping") == [.string("pong")])
        // A new owner takes over (bluetoothd restarted): the old one is refused.
        owner.close()
        let successor = try pair.bus.connect()
        defer { successor.close() }
        // dbus-daemon drops the closed owner's name when it sees its socket
        // close, which may come after this request (then refused: 3, the name
        // exists): asked until granted (1, the primary owner).
        let granted = try await poll {
            try await successor.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "RequestName", arguments: [.string("org.birdctl.Trusted"), .uint32(4)]
            ).first?.integer == 1
        }
        #expect(granted, "the successor never got the name")
        // NameOwnerChanged reaches the server shortly.
        let answered = await poll {
            (try? await call(from: successor, "/app/bird0", ExportPair.interface, "Ping")) == [.string("pong")]
        }
        #expect(answered)
    }

    /// The fuzz target's way in (`replyToIncoming`): a call answered
    /// in-process as one off the bus would be, the access rules included.
    @Test func aCallAnsweredInProcessFollowsTheSameRules() async throws {
        let pair = try await ExportPair()
        let owner = try pair.bus.connect()
        defer { owner.close() }
        _ = try await owner.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "RequestName", arguments: [.string("org.birdctl.Trusted"), .uint32(4)])
        pair.server.restrictCalls(below: "/app", toOwnerOf: "org.birdctl.Trusted")
        // Through the bus first: the server knows the owner once this is answered
        // (it learns the owner asynchronously: until then it refuses).
        let answered = await poll {
            (try? await owner.call(
                destination: pair.server.uniqueName, path: "/app/bird0", interface: ExportPair.interface, member: "Ping"))
                == [.string("pong")]
        }
        #expect(answered)
        func ping() throws -> Message {
            try Message.methodCall(destination: pair.server.uniqueName, path: "/app/bird0", interface: ExportPair.interface, member: "Ping")
        }
        #expect(pair.server.replyToIncoming(try ping(), from: pair.client.uniqueName)?.errorName == .accessDenied)
        #expect(try pair.server.replyToIncoming(try ping(), from: owner.uniqueName)?.arguments() == [.string("pong")])
        #expect(pair.server.replyToIncoming(try ping(), from: "not a bus name") == nil)
    }
}
