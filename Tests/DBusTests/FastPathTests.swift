import DBus
import Testing

/// The notification fast path gives what the value tree gives, or declines.
@Suite("PropertiesChanged fast path")
struct FastPathTests {
    static let interface: CString = "org.bluez.GattCharacteristic1"
    static let value: CString = "Value"

    static func changed(_ interface: String, _ properties: [String: DBusValue], _ invalidated: [String] = []) throws -> Message {
        try Message.signal(
            path: "/org/bluez/hci0/dev_1/service000a/char000f", interface: "org.freedesktop.DBus.Properties",
            member: "PropertiesChanged",
            arguments: [.string(interface), .propertyMap(properties), .strings(invalidated)])
    }

    @Test func aNotificationIsReadInPlace() throws {
        let message = try Self.changed("org.bluez.GattCharacteristic1", ["Value": .bytes(Array("42".utf8))])
        #expect(message.singleBytePropertyChange(interface: Self.interface, property: Self.value) == Array("42".utf8))
        let empty = try Self.changed("org.bluez.GattCharacteristic1", ["Value": .bytes([])])
        #expect(empty.singleBytePropertyChange(interface: Self.interface, property: Self.value) == [])
    }

    @Test(arguments: [
        ("org.bluez.Device1", ["Value": DBusValue.bytes([1])], [String]()),
        ("org.bluez.GattCharacteristic1", ["Notifying": .bool(true)], []),
        ("org.bluez.GattCharacteristic1", ["Value": .bytes([1]), "Notifying": .bool(true)], []),
        ("org.bluez.GattCharacteristic1", ["Value": .bytes([1])], ["MTU"]),
        ("org.bluez.GattCharacteristic1", ["Value": .string("42")], []),
        ("org.bluez.GattCharacteristic1", [:], []),
    ])
    func anythingElseIsDeclined(_ interface: String, _ properties: [String: DBusValue], _ invalidated: [String]) throws {
        let message = try Self.changed(interface, properties, invalidated)
        #expect(message.singleBytePropertyChange(interface: Self.interface, property: Self.value) == nil)
    }

    /// The path compared in place: equal only when every byte is.
    @Test(arguments: [
        ("/org/bluez/hci0/dev_1/service000a/char000f", true),
        ("/org/bluez/hci0/dev_1/service000a/char000", false),
        ("/org/bluez/hci0/dev_1/service000a/char000f0", false),
        ("/org/bluez/hci0/dev_1/service000a/char0011", false),
        ("/", false),
    ])
    func aPathIsComparedInPlace(_ path: String, _ same: Bool) throws {
        let message = try Self.changed("org.bluez.GattCharacteristic1", ["Value": .bytes([1])])
        #expect(message.hasPath(ObjectPath(path)) == same)
    }

    @Test func anotherSignatureIsDeclined() throws {
        let message = try Message.signal(path: "/x", interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                                         arguments: [.string("org.bluez.GattCharacteristic1")])
        #expect(message.singleBytePropertyChange(interface: Self.interface, property: Self.value) == nil)
    }
}
