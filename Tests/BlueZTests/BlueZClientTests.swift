@testable import BlueZ
import FakeBlueZSupport
import TestProcesses
import DBus
import Testing

@Suite("BlueZ client against the fake BlueZ")
struct BlueZClientTests {
    @Test func loadsTheTreeOnce() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        let tree = await test.client.snapshot()
        #expect(tree.adapters.map(\.interfaceName) == ["hci0", "hci1"])
        #expect(tree.adapters.allSatisfy { $0.powered })
        let loads = try await fake.calls().filter { $0.hasPrefix("GetManagedObjects") }
        #expect(loads.count == 1)
    }

    /// The client decodes GetManagedObjects in place (`Message.managedObjects`);
    /// its tree is the one the generic decoding of the same reply gives, and
    /// the lookups that skip views find what the full list finds.
    @Test func aTreeDecodedInPlaceIsTheGenericDecodingsAndItsLookupsAgree() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        try await fake.call("AddCachedDevices", .uint32(300))
        try await fake.addBird(cached: true)
        try await fake.addDevice(address: "11:22:33:44:55:66", name: "Thermometer", rssi: -70, cached: true)
        let other = try ClientUnderTest(fake)
        try await other.ready()
        try await other.perform(.startDiscovery(adapter: hci0))
        try await other.connectBird()  // GATT objects, byte arrays, a connected device

        let test = try ClientUnderTest(fake)
        try await test.ready()
        // The fake's radio hears the devices a little after StartDiscovery
        // (slower under load): the tree is compared once it has heard the thermometer.
        var tree = await test.client.snapshot()
        let heard = await poll {
            tree = await test.client.snapshot()
            return tree.device(address: "11:22:33:44:55:66", on: hci0)?.hasSignal == true
        }
        #expect(heard)
        let managed = try ObjectTree(managedObjects: try await fake.managedObjects())
        #expect(tree == managed)
        #expect(tree.objects.count > 300)

        let inRange = tree.devices(on: hci0).filter { $0.hasSignal || $0.connected }
        #expect(tree.devicesInRange(on: hci0) == inRange)
        #expect(inRange.map(\.address).sorted() == ["11:22:33:44:55:66", birdAddress])
        #expect(tree.device(address: birdAddress.lowercased(), on: hci0)?.path == birdPath)
        #expect(tree.device(address: "C0:00:00:00:00:05", on: hci0) != nil)
        #expect(tree.device(address: "C0:00:00:00:00:05", on: "/org/bluez/hci1") == nil)
        #expect(tree.device(address: "C0:FF:00:00:00:05", on: hci0) == nil)
    }

    @Test func discoveryReportsTheBirdButNotCachedOnes() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(address: "F0:0D:B1:7D:00:09", name: "Cached", cached: true, visible: false)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        try await fake.addBird(rssi: -42)
        try await test.perform(.setDiscoveryFilter(adapter: hci0, uuids: [FakeBlueZ.birdService]))
        try await test.perform(.startDiscovery(adapter: hci0))
        let event = try await test.next { if case .deviceAdded = $0 { true } else { false } }
        guard case .deviceAdded(let device) = event else { return }
        #expect(device.address == birdAddress)
        #expect(device.name == "Robin")
        #expect(device.rssi == -42)
        #expect(device.offers(service: FakeBlueZ.birdService.uppercased()))
        #expect(await test.client.snapshot().adapter(hci0)?.discovering == true)
        try await test.perform(.stopDiscovery(adapter: hci0))
        try await test.next { if case .adapterChanged(let a, let changed) = $0 { changed == .discovering && !a.discovering } else { false } }
    }

    @Test func connectResolvesServicesThenReadsAndWrites() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        try await test.connectBird()
        let tree = await test.client.snapshot()
        let uuids = Set(tree.characteristics(under: birdPath).map(\.uuid))
        #expect(uuids.isSuperset(of: [FakeBlueZ.colorUUID, FakeBlueZ.nameUUID, FakeBlueZ.alphaUUID]))
        #expect(tree.device(birdPath)?.connected == true)

        let name = try #require(await test.characteristic(FakeBlueZ.nameUUID))
        #expect(try await test.perform(.readValue(characteristic: name.path)) == Array("Robin".utf8))
        #expect(try await test.perform(.readValue(characteristic: name.path, offset: 2)) == Array("bin".utf8))

        try await test.perform(.writeValue(characteristic: name.path, Array("Wren".utf8)))
        try await test.perform(.writeValue(characteristic: name.path, Array("Tit".utf8), type: .command))
        #expect(try await test.perform(.readValue(characteristic: name.path)) == Array("Tit".utf8))

        try await test.perform(.disconnect(device: birdPath))
        try await test.next { if case .deviceChanged(let d, _) = $0 { !d.connected } else { false } }
        #expect(await test.client.snapshot().characteristics(under: birdPath).isEmpty)
    }

    @Test func tenThousandNotificationsArriveInOrder() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        try await test.connectBird()
        let alpha = try #require(await test.characteristic(FakeBlueZ.alphaUUID))
        try await test.perform(.startNotify(characteristic: alpha.path))
        try await fake.call("Burst", .string(birdAddress), .string(FakeBlueZ.alphaUUID), .uint32(10_000), .uint32(0))
        var expected = 0
        while expected < 10_000 {
            let event = try await test.next(within: .seconds(30)) { if case .valueChanged = $0 { true } else { false } }
            guard case .valueChanged(let path, let value) = event else { continue }
            #expect(path == alpha.path)
            if value != Array(String(expected).utf8) {
                Issue.record("notification \(expected) was \(String(decoding: value, as: UTF8.self))")
                return
            }
            expected += 1
        }
        #expect(await test.characteristic(FakeBlueZ.alphaUUID)?.value == Array("9999".utf8))
    }

    @Test func treeMatchesGetManagedObjectsAfterChanges() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        try await fake.addBird(cached: true)
        try await fake.addDevice(address: "11:22:33:44:55:66", name: "Thermometer", cached: true)
        try await test.perform(.startDiscovery(adapter: hci0))
        try await test.connectBird()
        let color = try #require(await test.characteristic(FakeBlueZ.colorUUID))
        try await test.perform(.startNotify(characteristic: color.path))
        try await fake.call("PushValue", .string(birdAddress), .string(FakeBlueZ.colorUUID), .bytes(Array("#00FF00".utf8)))
        try await fake.call("DropLink", .string(birdAddress))
        try await test.perform(.removeDevice(adapter: hci0, device: "/org/bluez/hci0/dev_11_22_33_44_55_66"))
        try await fake.call("RemoveAdapter", .string("hci1"))
        try await fake.call("AddAdapter", .string("hci2"), .string("00:AA:01:00:00:02"))
        try await test.perform(.setPowered(adapter: hci0, false))
        try await test.next { if case .adapterChanged(let a, _) = $0 { a.path == hci0 && !a.powered } else { false } }

        let expected = try ObjectTree(managedObjects: try await fake.managedObjects())
        let actual = await test.client.snapshot()
        #expect(actual == expected)
        #expect(actual.adapters.map(\.interfaceName) == ["hci0", "hci2"])
        #expect(actual.device(birdPath)?.connected == false)
    }

    /// A focused tree is GetManagedObjects' tree cut to the adapters and the
    /// one device, loaded without GetManagedObjects, and it follows changes.
    @Test func aFocusedTreeHoldsTheAdaptersAndTheOneDeviceAsGetManagedObjectsDoes() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        try await fake.call("AddCachedDevices", .uint32(500))
        try await fake.addBird(cached: true)
        let other = try ClientUnderTest(fake)
        try await other.ready()
        try await other.connectBird()  // services resolved: GATT objects under the device

        let test = try ClientUnderTest(fake, focus: birdAddress.lowercased())
        try await test.ready()
        func expected() async throws -> ObjectTree {
            var tree = ObjectTree()
            let full = try ObjectTree(managedObjects: try await fake.managedObjects())
            for (path, interfaces) in full.objects
            where path.parent == "/org/bluez" || path == birdPath || path.isDescendant(of: birdPath) {
                tree.add(path, interfaces: interfaces)
            }
            return tree
        }
        #expect(try await fake.calls().filter { $0.hasPrefix("GetManagedObjects") }.count == 1)  // the other client's
        #expect(await test.client.snapshot() == (try await expected()))
        #expect(await test.client.snapshot().adapters.count == 2)

        try await fake.call("DropLink", .string(birdAddress))
        try await test.next { if case .deviceChanged(let d, _) = $0 { d.path == birdPath && !d.connected } else { false } }
        #expect(await test.client.snapshot() == (try await expected()))
    }

    /// A tree of adapters only (what `scan` loads): no device of BlueZ's
    /// cache, and no GetManagedObjects; a cached device heard again enters
    /// with its properties after one GetAll, and is then kept by signals.
    @Test func aTreeOfAdaptersTakesInACachedDeviceWhenItIsHeardAgain() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        try await fake.call("AddCachedDevices", .uint32(500))
        try await fake.addBird(rssi: -47, cached: true)
        let test = try ClientUnderTest(fake, scope: .adapters)
        try await test.ready()
        let loaded = await test.client.snapshot()
        #expect(loaded.adapters.map(\.interfaceName) == ["hci0", "hci1"])
        #expect(loaded.objects.count == 2, "\(loaded.objects.keys)")
        #expect(try await fake.calls().filter { $0.hasPrefix("GetManagedObjects") }.isEmpty)

        try await test.perform(.startDiscovery(adapter: hci0))
        let event = try await test.next { if case .deviceAdded = $0 { true } else { false } }
        guard case .deviceAdded(let device) = event else { return }
        #expect(device.path == birdPath)
        #expect(device.name == "Robin")
        #expect(device.rssi == -47)
        let full = try ObjectTree(managedObjects: try await fake.managedObjects())
        #expect(await test.client.snapshot().properties(birdPath, "org.bluez.Device1") == full.properties(birdPath, "org.bluez.Device1"))

        try await fake.call("SetRSSI", .string(birdAddress), .int16(-60))
        try await test.next { if case .deviceChanged(let d, _) = $0 { d.path == birdPath && d.rssi == -60 } else { false } }
        let asked = try await fake.calls().filter { $0.hasPrefix("GetAll \(birdPath) ") }
        #expect(asked == ["GetAll \(birdPath) org.bluez.Device1"])
        #expect(await test.client.snapshot().devices(on: hci0).map(\.path) == [birdPath])
    }

    /// A connected device heard again enters with its GATT objects, as
    /// GetManagedObjects has them.
    @Test func aTreeOfAdaptersTakesInAConnectedDeviceWithItsGattObjects() async throws {
        let fake = try await FakeBlueZ()
        try await fake.call("AddCachedDevices", .uint32(100))
        try await fake.addBird(cached: true)
        let other = try ClientUnderTest(fake)
        try await other.ready()
        try await other.perform(.startDiscovery(adapter: hci0))
        try await other.next { if case .deviceChanged(let d, _) = $0 { d.rssi != nil } else { false } }  // heard
        try await other.connectBird()

        let test = try ClientUnderTest(fake, scope: .adapters)
        try await test.ready()
        #expect(await test.client.snapshot().device(birdPath) == nil)
        try await fake.call("SetRSSI", .string(birdAddress), .int16(-61))
        try await test.next { if case .deviceAdded(let d) = $0 { d.path == birdPath } else { false } }
        let full = try ObjectTree(managedObjects: try await fake.managedObjects())
        let tree = await test.client.snapshot()
        #expect(tree.characteristics(under: birdPath).count == full.characteristics(under: birdPath).count)
        #expect(tree.characteristics(under: birdPath).count >= 3)
        for path in full.objects.keys where path == birdPath || path.isDescendant(of: birdPath) {
            #expect(tree.objects[path] == full.objects[path], "\(path)")
        }
    }

    @Test func introspectionReadsTheRootsInterfacesAndChildrenOnly() {
        let bluetoothd = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
            "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node><interface name="org.freedesktop.DBus.Introspectable"><method name="Introspect">
            <arg name="xml" type="s" direction="out"/></method></interface>
            <interface name="org.bluez.Device1"><method name="Connect"></method>
            <property name="Name" type="s" access="read"></property></interface>
            <node name="service000a"/><node name="service0010"></node></node>
            """
        let parsed = Introspection(xml: bluetoothd)
        #expect(parsed.interfaces == ["org.freedesktop.DBus.Introspectable", "org.bluez.Device1"])
        #expect(parsed.children == ["service000a", "service0010"])
        // dbus-python names the root; a nested child's children are not ours;
        // a name that is no path element is dropped.
        let nested = Introspection(xml: #"<node name="/a"><node name="b"><node name="c"/></node><node name="../x"/></node>"#)
        #expect(nested.children == ["b"])
        #expect(Introspection(xml: "<node").children.isEmpty)
        // A child without a name, or whose name never closes, is not one.
        let broken = Introspection(xml: #"<node><node/><node name="ok"/><interface name="open/></node>"#)
        #expect(broken.children == ["ok"])
        #expect(broken.interfaces.isEmpty)
        // Any of XML's white space separates a tag's name from its attributes.
        #expect(Introspection(xml: "<node><node\n\tname=\"t\"/><nodes name=\"u\"/></node>").children == ["t"])
    }

    /// Whether it works, not how fast: the waits are hang guards. Alone it
    /// takes ~1 s; under ThreadSanitizer beside the other suites 12–21 s,
    /// and a wait of the default 10 s ran out once in CI.
    @Test func aTreeWithFiveThousandCachedDevicesWorks() async throws {
        let fake = try await FakeBlueZ()
        try await fake.call("AddCachedDevices", .uint32(5_000))
        let test = try ClientUnderTest(fake)
        try await test.next(within: .seconds(120)) { $0 == .ready }
        #expect(await test.client.snapshot().devices(on: hci0).count == 5_000)
        try await fake.addBird()
        try await test.perform(.startDiscovery(adapter: hci0))
        let event = try await test.next(within: .seconds(120)) { if case .deviceAdded = $0 { true } else { false } }
        let bird = try #require(await test.client.snapshot().device(birdPath))
        #expect(event == .deviceAdded(bird))
        try await test.connectBird()
        let name = try #require(await test.characteristic(FakeBlueZ.nameUUID))
        #expect(try await test.perform(.readValue(characteristic: name.path)) == Array("Robin".utf8))
    }

    @Test func bluetoothdVanishingAndReturningRebuildsTheTree() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        #expect(await test.client.snapshot().device(birdPath) != nil)

        try await fake.stop()
        let gone = try await test.next { if case .unavailable = $0 { true } else { false } }
        #expect(gone == .unavailable(BlueZError(.bluetoothdNotRunning, message: "bluetoothd left the bus")))
        #expect(await test.client.snapshot() == ObjectTree())
        do {
            try await test.perform(.startDiscovery(adapter: hci0))
            Issue.record("a call without bluetoothd should fail")
        } catch {
            #expect(error.kind == .bluetoothdNotRunning)
        }

        try await fake.start()
        try await test.ready()
        let tree = await test.client.snapshot()
        #expect(tree.adapters.map(\.interfaceName) == ["hci0"])
        #expect(tree.device(birdPath) == nil)  // a new daemon, a new tree
        try await test.perform(.startDiscovery(adapter: hci0))
    }

    @Test func startingWithoutBluetoothdWaitsForIt() async throws {
        let fake = try await FakeBlueZ()
        try await fake.stop()
        let test = try ClientUnderTest(fake)
        let first = try await test.next()
        guard case .unavailable(let error) = first else {
            Issue.record("expected unavailable, got \(first)")
            return
        }
        #expect(error.kind == .bluetoothdNotRunning)
        try await fake.start()
        try await test.ready()
        #expect(await test.client.snapshot().adapters.count == 1)
    }

    @Test func signalsOfUnexpectedShapeAreIgnored() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let test = try ClientUnderTest(fake)
        try await test.ready()
        // PropertiesChanged with the wrong body, InterfacesAdded with a string
        // where the dictionary belongs: neither may crash or change the tree.
        try await fake.call(
            "EmitRaw", .objectPath(birdPath), .string("org.freedesktop.DBus.Properties"),
            .string("PropertiesChanged"), .string("si"), .array(element: "v", [.variant(.string("x")), .variant(.int32(1))]))
        try await fake.call(
            "EmitRaw", .objectPath("/"), .string("org.freedesktop.DBus.ObjectManager"),
            .string("InterfacesAdded"), .string("os"),
            .array(element: "v", [.variant(.objectPath("/org/bluez/x")), .variant(.string("y"))]))
        try await fake.call("SetRSSI", .string(birdAddress), .int16(-70))
        try await test.perform(.startDiscovery(adapter: hci0))
        let event = try await test.next { if case .deviceChanged = $0 { true } else { false } }
        guard case .deviceChanged(let device, let changed) = event else { return }
        #expect(changed == .rssi)
        #expect(device.rssi == -70)
        let expected = try ObjectTree(managedObjects: try await fake.managedObjects())
        #expect(await test.client.snapshot() == expected)
    }
}
