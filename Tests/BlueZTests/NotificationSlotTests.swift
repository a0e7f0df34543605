import BlueZ
import DBus
import Testing

/// A notification updates the tree through a remembered slot; the slot must
/// never outlive the tree's shape.
@Suite("Notifications through remembered slots")
struct NotificationSlotTests {
    static let characteristic: ObjectPath = "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01/service000a/char000f"
    static let other: ObjectPath = "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01/service000a/char0011"
    static let gatt = "org.bluez.GattCharacteristic1"

    static func notification(_ path: ObjectPath, _ text: String) throws -> Message {
        try Message.signal(
            path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            arguments: [.string(gatt), .propertyMap(["Value": .bytes(Array(text.utf8))]), .strings([])])
    }

    static func tree() -> ObjectTree {
        var tree = ObjectTree()
        for path in [characteristic, other] {
            tree.add(path, interfaces: [gatt: ["UUID": .string("x"), "Value": .bytes([])]])
        }
        return tree
    }

    static func value(_ tree: ObjectTree, _ path: ObjectPath) -> [UInt8]? {
        tree.properties(path, gatt)?["Value"]?.bytes
    }

    static func applied(_ tree: inout ObjectTree, _ slots: inout NotificationSlots, _ path: ObjectPath, _ text: String) throws -> ObjectPath? {
        guard case .applied(let at, let value) = tree.applyNotification(try notification(path, text), slots: &slots) else { return nil }
        #expect(value == Array(text.utf8))
        return at
    }

    @Test func theTreeHasEachValueWhateverTheSlotsRemember() throws {
        var tree = Self.tree()
        var slots = NotificationSlots()
        for round in 0..<3 {
            for path in [Self.characteristic, Self.other, Self.characteristic] {
                #expect(try Self.applied(&tree, &slots, path, "\(round) \(path)") == path)
                #expect(Self.value(tree, path) == Array("\(round) \(path)".utf8))
            }
        }
    }

    /// A key added or removed since a slot was taken: the slot is not used.
    @Test func aChangedShapeIsLookedUpAgain() throws {
        var tree = Self.tree()
        var slots = NotificationSlots()
        _ = try Self.applied(&tree, &slots, Self.characteristic, "1")
        for index in 0..<50 {  // enough new keys for the dictionary to grow
            tree.add(ObjectPath("/org/bluez/hci0/dev_00_00_00_00_00_\(index)"), interfaces: ["org.bluez.Device1": [:]])
        }
        #expect(try Self.applied(&tree, &slots, Self.characteristic, "2") == Self.characteristic)
        #expect(Self.value(tree, Self.characteristic) == Array("2".utf8))

        tree.remove(Self.characteristic, interfaces: [Self.gatt])
        #expect(tree.applyNotification(try Self.notification(Self.characteristic, "3"), slots: &slots) == .unknownObject)
        #expect(tree.properties(Self.characteristic, Self.gatt) == nil)
        #expect(try Self.applied(&tree, &slots, Self.other, "4") == Self.other)
    }

    /// The slot knows where Value is among the properties: properties added
    /// or invalidated since (enough for the dictionary to grow) make it
    /// looked up again, and a characteristic without a Value gets one.
    @Test func propertiesAddedOrRemovedSinceTheSlotAreNotOverwritten() throws {
        var tree = ObjectTree()
        tree.add(Self.characteristic, interfaces: [Self.gatt: ["UUID": .string("x")]])
        var slots = NotificationSlots()
        #expect(try Self.applied(&tree, &slots, Self.characteristic, "1") == Self.characteristic)
        #expect(try Self.applied(&tree, &slots, Self.characteristic, "2") == Self.characteristic)
        #expect(Self.value(tree, Self.characteristic) == Array("2".utf8))

        var added: ObjectTree.Properties = [:]
        for index in 0..<50 { added["Extra\(index)"] = .uint32(UInt32(index)) }
        let grew = tree.change(Self.characteristic, interface: Self.gatt, changed: added)
        #expect(grew)
        #expect(try Self.applied(&tree, &slots, Self.characteristic, "3") == Self.characteristic)
        let grown = try #require(tree.properties(Self.characteristic, Self.gatt))
        #expect(grown["Value"]?.bytes == Array("3".utf8))
        #expect(grown["UUID"] == .string("x"))
        let extras = (0..<50).filter { grown["Extra\($0)"] == .uint32(UInt32($0)) }
        #expect(extras.count == 50)

        let shrank = tree.change(Self.characteristic, interface: Self.gatt, changed: [:], invalidated: ["UUID", "Extra7"])
        #expect(shrank)
        #expect(try Self.applied(&tree, &slots, Self.characteristic, "4") == Self.characteristic)
        let shrunk = try #require(tree.properties(Self.characteristic, Self.gatt))
        #expect(shrunk["Value"]?.bytes == Array("4".utf8))
        #expect(shrunk["UUID"] == nil)
        #expect(shrunk["Extra7"] == nil)
        #expect(shrunk.count == 1 + 49)
    }

    /// A copy of the tree (a snapshot handed out) keeps its own values.
    @Test func aCopyIsNotChangedThroughTheSlots() throws {
        var tree = Self.tree()
        var slots = NotificationSlots()
        _ = try Self.applied(&tree, &slots, Self.characteristic, "1")
        let copy = tree
        _ = try Self.applied(&tree, &slots, Self.characteristic, "2")
        #expect(Self.value(copy, Self.characteristic) == Array("1".utf8))
        #expect(Self.value(tree, Self.characteristic) == Array("2".utf8))
        #expect(copy != tree)
    }
}
