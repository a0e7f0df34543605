import BlueZ
import DBus
import Testing

@testable import Proxy

/// A device's GATT objects as BlueZ describes them, numbered as an ESP32 proxy numbers them.
@Suite("GATT by handle")
struct GATTTableTests {
    static let device: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
    static let service = ObjectPath("\(device)/service0010")
    static let level = ObjectPath("\(device)/service0010/char0011")
    static let configuration = ObjectPath("\(device)/service0010/char0011/desc0013")

    /// The Battery Service: its declaration at 0x10, the level's declaration
    /// at 0x11 (its value at 0x12), its notification configuration at 0x13.
    /// `handles`: said as `Handle`; `named`: in the objects' names, as
    /// bluetoothd names them (else `s`, `c`, `d`).
    static func tree(handles: Bool = true, named: Bool = true) -> ObjectTree {
        let (service, level, configuration) = named
            ? (Self.service, Self.level, Self.configuration)
            : (ObjectPath("\(device)/s"), ObjectPath("\(device)/s/c"), ObjectPath("\(device)/s/c/d"))
        var tree = ObjectTree()
        func handle(_ value: UInt16) -> [String: DBusValue] { handles ? ["Handle": .uint16(value)] : [:] }
        tree.add(service, interfaces: [
            "org.bluez.GattService1": ["UUID": .string("0000180F-0000-1000-8000-00805F9B34FB"), "Device": .objectPath(device)]
                .merging(handle(0x10)) { $1 }
        ])
        tree.add(level, interfaces: [
            "org.bluez.GattCharacteristic1": [
                "UUID": .string("00002a19-0000-1000-8000-00805f9b34fb"), "Service": .objectPath(service),
                "Flags": .strings(["read", "notify"]),
            ].merging(handle(0x11)) { $1 }
        ])
        tree.add(configuration, interfaces: [
            "org.bluez.GattDescriptor1": [
                "UUID": .string("00002902-0000-1000-8000-00805f9b34fb"), "Characteristic": .objectPath(level),
            ].merging(handle(0x13)) { $1 }
        ])
        return tree
    }

    static func table(_ tree: ObjectTree) -> GATTTable {
        GATTTable(
            services: tree.services(of: device), characteristics: tree.characteristics(under: device),
            descriptors: tree.descriptors(under: device))
    }

    @Test func handlesAreThePeersWithACharacteristicByItsValue() throws {
        let table = Self.table(Self.tree())
        let service = try #require(table.services.first)
        #expect(service.handle == 0x10 && service.uuid == [0x0000_180F_0000_1000, 0x8000_0080_5F9B_34FB])
        let level = try #require(service.characteristics.first)
        #expect(level.handle == 0x12 && level.properties == 0x12)  // read | notify
        #expect(level.descriptors.map(\.handle) == [0x13])
        #expect(table.target(0x12) == .characteristic(Self.level))
        #expect(table.target(0x13) == .descriptor(
            Self.configuration, characteristic: Self.level,
            configuresNotifications: true))
        #expect(table.target(0x11) == nil)
        #expect(table.handle(of: Self.level) == 0x12)
    }

    /// bluetoothd 5.66 says no `Handle`: the handles are in its objects' names,
    /// the same as a newer one says (Home Assistant keeps them across proxies).
    @Test func withoutHandlesSaidTheNamesGiveThem() throws {
        let table = Self.table(Self.tree(handles: false))
        let service = try #require(table.services.first)
        let level = try #require(service.characteristics.first)
        #expect([service.handle, level.handle, level.descriptors.first?.handle] == [0x10, 0x12, 0x13])
        #expect(table.target(0x12) == .characteristic(Self.level))
        #expect(GATTTable.named("/org/bluez/hci0/dev_X/service00zz") == nil)
        #expect(GATTTable.named("/org/bluez/hci0/dev_X/service000a/char000b/desc000d") == 0x0d)
    }

    /// Neither said nor named: the table numbers them itself, each once,
    /// past every 16-bit handle a peer could have.
    @Test func withoutHandlesTheTableNumbers() throws {
        let table = Self.table(Self.tree(handles: false, named: false))
        let service = try #require(table.services.first)
        let level = try #require(service.characteristics.first)
        #expect([service.handle, level.handle, level.descriptors.first?.handle] == [0x1_0000, 0x1_0001, 0x1_0002])
        #expect(table.target(0x1_0001) == .characteristic(ObjectPath("\(Self.device)/s/c")))
    }
}
