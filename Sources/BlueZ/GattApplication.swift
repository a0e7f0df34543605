import DBus

/// A GATT service of ours, published through GattManager1: an ObjectManager
/// at `root` with one GattService1 and its GattCharacteristic1 objects, and an
/// LEAdvertisement1 announcing it. BlueZ calls back into these objects for
/// reads, writes and subscriptions; handlers run on the connection's loop.
public final class GattApplication: @unchecked Sendable {
    public struct Characteristic: Sendable {
        public var uuid: String
        public var value: [UInt8]
        public init(uuid: String, value: [UInt8]) {
            self.uuid = uuid
            self.value = value
        }
    }

    /// Validates a write from a central; throw to refuse it (the value stays).
    public typealias WriteHandler = @Sendable (_ uuid: String, _ value: [UInt8]) throws(BlueZError) -> Void
    public typealias SubscriptionHandler = @Sendable (_ uuid: String, _ subscribed: Bool) -> Void

    public let connection: Connection
    public let root: ObjectPath
    public let advertisementPath: ObjectPath
    private let serviceUUID: String
    private let localName: String
    private let onWrite: WriteHandler
    private let onSubscription: SubscriptionHandler

    // Loop-confined.
    private var values: [String: [UInt8]] = [:]
    private var notifying: Set<String> = []
    private var paths: [String: ObjectPath] = [:]

    public init(
        connection: Connection, root: ObjectPath = "/org/birdctl/peripheral", serviceUUID: String,
        localName: String, characteristics: [Characteristic], onWrite: @escaping WriteHandler,
        onSubscription: @escaping SubscriptionHandler = { _, _ in }
    ) {
        self.connection = connection
        self.root = root
        self.advertisementPath = ObjectPath(root.rawValue + "/advertisement0")
        self.serviceUUID = serviceUUID.lowercased()
        self.localName = localName
        self.onWrite = onWrite
        self.onSubscription = onSubscription
        for (index, characteristic) in characteristics.enumerated() {
            values[characteristic.uuid] = characteristic.value
            paths[characteristic.uuid] = ObjectPath(root.rawValue + "/service0/char\(index)")
        }
    }

    private var servicePath: ObjectPath { ObjectPath(root.rawValue + "/service0") }

    /// Exports the objects (before registering them with BlueZ). Only
    /// bluetoothd may call them: another client on the bus must not read,
    /// write or subscribe behind BlueZ's back (GATT permissions, pairing).
    public func export() {
        connection.restrictCalls(below: root, toOwnerOf: BlueZNames.busName)
        connection.addObjectManager(at: root)
        connection.export(servicePath, [
            ExportedInterface(BlueZNames.gattService, properties: [
                "UUID": .string(serviceUUID), "Primary": .bool(true),
            ])
        ])
        for (uuid, path) in paths.sorted(by: { $0.value < $1.value }) {
            connection.export(path, [characteristicInterface(uuid)])
        }
        // Discoverable sets LE General Discoverable in the flags: without it a
        // BlueZ central's plain scan (bluetoothctl `scan on`) never lists us;
        // only one filtered by UUID does.
        connection.export(advertisementPath, [
            ExportedInterface(BlueZNames.advertisement, properties: [
                "Type": .string("peripheral"), "ServiceUUIDs": .strings([serviceUUID]),
                "LocalName": .string(localName), "Includes": .strings(["tx-power"]), "Discoverable": .bool(true),
            ], methods: ["Release": { _ in [] }])
        ])
    }

    private func characteristicInterface(_ uuid: String) -> ExportedInterface {
        let read: ExportedInterface.Method = { [self] call throws(DBusError) in try readValue(uuid, call) }
        let write: ExportedInterface.Method = { [self] call throws(DBusError) in try writeValue(uuid, call) }
        let start: ExportedInterface.Method = { [self] _ in
            setNotifying(uuid, true)
            return []
        }
        let stop: ExportedInterface.Method = { [self] _ in
            setNotifying(uuid, false)
            return []
        }
        return ExportedInterface(
            BlueZNames.gattCharacteristic,
            properties: [
                "UUID": .string(uuid), "Service": .objectPath(servicePath),
                "Flags": .strings(["read", "write", "notify"]), "Value": .bytes(values[uuid] ?? []),
                "Notifying": .bool(false),
            ],
            methods: ["ReadValue": read, "WriteValue": write, "StartNotify": start, "StopNotify": stop])
    }

    /// A read from `offset` (BlueZ's long reads ask again from where the
    /// last reply ended, and cut each reply to the link's MTU).
    private func readValue(_ uuid: String, _ call: MethodCall) throws(DBusError) -> [DBusValue] {
        let value = values[uuid] ?? []
        let offset = try Self.offset(in: call.arguments.first, within: value)
        return [.bytes(Array(value[offset...]))]
    }

    /// A write of `value` at `offset`. What is validated is the whole value the
    /// characteristic would hold — its bytes before `offset`, then these — never
    /// a piece alone: a long (prepared) write that bluetoothd delivers in pieces
    /// (offset 0, then each next piece at the offset where the last ended) is
    /// assembled here, and each step must decode as a whole value. bluetoothd
    /// joins contiguous pieces of one characteristic into one call, so a long
    /// write usually arrives whole at offset 0. A refused write changes nothing.
    private func writeValue(_ uuid: String, _ call: MethodCall) throws(DBusError) -> [DBusValue] {
        guard call.arguments.count == 2, let bytes = call.arguments[0].bytes, let options = call.arguments[1].propertyMap else {
            throw DBusError(DBusErrorName(BlueZNames.errorPrefix + "InvalidArguments"), "expected a byte array and options")
        }
        // bluetoothd asks whether a queued piece of a prepared write may be
        // kept (only for characteristics flagged "authorize", which ours are
        // not); the bytes come again when the write is executed.
        if options["prepare-authorize"]?.bool == true { return [] }
        let current = values[uuid] ?? []
        let offset = try Self.offset(in: call.arguments[1], within: current)
        let assembled = Array(current[..<offset]) + bytes
        guard assembled.count <= Self.maximumValueLength else {
            throw DBusError(
                DBusErrorName(BlueZNames.errorPrefix + "InvalidValueLength"),
                "\(assembled.count) bytes is longer than an attribute's \(Self.maximumValueLength)")
        }
        do {
            try onWrite(uuid, assembled)
        } catch {
            throw DBusError(DBusErrorName(error.dbusName), error.message)
        }
        update(uuid, assembled)
        return []
    }

    /// The longest attribute value ATT allows.
    static let maximumValueLength = 512

    /// The `offset` of a read's or write's options: a uint16 (as bluetoothd
    /// sends it; anything else is InvalidArguments) no further than the end of
    /// `value` (else InvalidOffset); 0 when absent.
    static func offset(in options: DBusValue?, within value: [UInt8]) throws(DBusError) -> Int {
        guard let option = options?.propertyMap?["offset"] else { return 0 }
        guard case .uint16(let offset) = option.unwrapped else {
            throw DBusError(DBusErrorName(BlueZNames.errorPrefix + "InvalidArguments"), "the offset is not a uint16")
        }
        guard Int(offset) <= value.count else {
            throw DBusError(
                DBusErrorName(BlueZNames.errorPrefix + "InvalidOffset"), "offset \(offset) is past the value's \(value.count) bytes")
        }
        return Int(offset)
    }

    /// bluetoothd went (on the loop): no central is subscribed any more
    /// (none said StopNotify); each subscription is said to have ended.
    public func subscriptionsEnded() {
        connection.loop.assertInLoop()
        for uuid in notifying.sorted() { setNotifying(uuid, false) }
    }

    private func setNotifying(_ uuid: String, _ on: Bool) {
        guard on != notifying.contains(uuid), let path = paths[uuid] else { return }
        if on { notifying.insert(uuid) } else { notifying.remove(uuid) }
        connection.setProperty(path, interface: BlueZNames.gattCharacteristic, name: "Notifying", value: .bool(on))
        onSubscription(uuid, on)
    }

    /// Changes a value (on the loop); subscribers get a notification.
    public func update(_ uuid: String, _ value: [UInt8]) {
        connection.loop.assertInLoop()
        guard let path = paths[uuid] else { return }
        values[uuid] = value
        // BlueZ notifies subscribed centrals when Value changes (PropertiesChanged).
        connection.setProperty(path, interface: BlueZNames.gattCharacteristic, name: "Value", value: .bytes(value))
    }
}

extension BlueZRequest where Output == Void {
    /// Registers this application and then its advertisement.
    public static func register(_ application: GattApplication, adapter: ObjectPath) -> [Self] {
        [
            .registerApplication(adapter: adapter, application: application.root),
            .registerAdvertisement(adapter: adapter, advertisement: application.advertisementPath),
        ]
    }

    public static func unregister(_ application: GattApplication, adapter: ObjectPath) -> [Self] {
        [
            .unregisterAdvertisement(adapter: adapter, advertisement: application.advertisementPath),
            .unregisterApplication(adapter: adapter, application: application.root),
        ]
    }
}
