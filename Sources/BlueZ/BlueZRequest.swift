import DBus
import Glibc

/// One BlueZ method call and how to read its reply. Operations are values so
/// that a driver can hold, log and perform them the same way.
public struct BlueZRequest<Output: Sendable>: Sendable {
    public let path: ObjectPath
    public let interface: String
    public let member: String
    public let arguments: [DBusValue]
    public var timeout: Duration
    /// Reads the reply.
    let decode: @Sendable (Message) throws(BlueZError) -> Output

    /// A request whose reply is read from its decoded arguments.
    init(
        _ path: ObjectPath, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
        timeout: Duration = blueZCallTimeout, decode: @escaping @Sendable ([DBusValue]) throws(BlueZError) -> Output
    ) {
        self.init(path, interface, member, arguments, timeout: timeout, decodeReply: { reply throws(BlueZError) in
            let values: [DBusValue]
            do throws(DBusError) { values = try reply.arguments() } catch { throw BlueZError(error) }
            return try decode(values)
        })
    }

    /// A request whose reply is read from the message itself.
    init(
        _ path: ObjectPath, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
        timeout: Duration = blueZCallTimeout, decodeReply: @escaping @Sendable (Message) throws(BlueZError) -> Output
    ) {
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
        self.timeout = timeout
        self.decode = decodeReply
    }
}

/// How long to wait for bluetoothd to answer a call: libdbus's 25 s, or
/// `BIRDCTL_CALL_TIMEOUT` seconds (for scripts that would rather fail fast
/// when bluetoothd hangs, and for tests of that).
public let blueZCallTimeout: Duration = {
    if let text = getenv("BIRDCTL_CALL_TIMEOUT").map({ String(cString: $0) }), let seconds = Double(text),
        seconds > 0, seconds < 86_400
    {
        return .milliseconds(Int(seconds * 1000))
    }
    return .seconds(25)
}()

extension BlueZRequest where Output == Void {
    init(_ path: ObjectPath, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
         timeout: Duration = blueZCallTimeout) {
        // Nothing to read: the reply is not decoded.
        self.init(path, interface, member, arguments, timeout: timeout, decodeReply: { _ throws(BlueZError) in })
    }

    /// Discovery limited to these service UUIDs (none: every device) on this
    /// transport ("le", "bredr", "auto"); with `rssi`, devices heard weaker
    /// are left out, and each change of a device's RSSI is signalled (without
    /// one, bluetoothd signals only changes of several dB).
    /// BlueZ merges every client's filter, so results must still be checked.
    public static func setDiscoveryFilter(
        adapter: ObjectPath, uuids: [String], transport: String = "le", duplicateData: Bool = true, rssi: Int16? = nil
    ) -> Self {
        var filter: [String: DBusValue] = [
            "UUIDs": .strings(uuids), "Transport": .string(transport), "DuplicateData": .bool(duplicateData),
        ]
        if let rssi { filter["RSSI"] = .int16(rssi) }
        return Self(adapter, BlueZNames.adapter, "SetDiscoveryFilter", [.propertyMap(filter)])
    }

    public static func startDiscovery(adapter: ObjectPath) -> Self {
        Self(adapter, BlueZNames.adapter, "StartDiscovery")
    }

    public static func stopDiscovery(adapter: ObjectPath) -> Self {
        Self(adapter, BlueZNames.adapter, "StopDiscovery")
    }

    public static func setPowered(adapter: ObjectPath, _ on: Bool) -> Self {
        Self(adapter, BlueZNames.properties, "Set", [
            .string(BlueZNames.adapter), .string("Powered"), .variant(.bool(on)),
        ])
    }

    public static func removeDevice(adapter: ObjectPath, device: ObjectPath) -> Self {
        Self(adapter, BlueZNames.adapter, "RemoveDevice", [.objectPath(device)])
    }

    /// Connects; BlueZ answers when the link is up (services resolve later).
    public static func connect(device: ObjectPath, timeout: Duration = blueZCallTimeout) -> Self {
        Self(device, BlueZNames.device, "Connect", timeout: timeout)
    }

    /// Disconnects, or cancels a connection attempt still in progress.
    public static func disconnect(device: ObjectPath) -> Self {
        Self(device, BlueZNames.device, "Disconnect")
    }

    public enum WriteType: String, Sendable {
        /// Write with response: the peripheral acknowledges.
        case request
        /// Write without response.
        case command
    }

    public static func writeValue(characteristic: ObjectPath, _ value: [UInt8], type: WriteType = .request) -> Self {
        Self(characteristic, BlueZNames.gattCharacteristic, "WriteValue", [
            .bytes(value), .propertyMap(["type": .string(type.rawValue)]),
        ])
    }

    /// Publishes a GATT application (an ObjectManager at `application` on our
    /// connection); BlueZ reads it back with GetManagedObjects before it replies.
    public static func registerApplication(adapter: ObjectPath, application: ObjectPath) -> Self {
        Self(adapter, BlueZNames.gattManager, "RegisterApplication", [.objectPath(application), .propertyMap([:])])
    }

    public static func unregisterApplication(adapter: ObjectPath, application: ObjectPath) -> Self {
        Self(adapter, BlueZNames.gattManager, "UnregisterApplication", [.objectPath(application)])
    }

    /// Starts advertising an LEAdvertisement1 object of ours.
    public static func registerAdvertisement(adapter: ObjectPath, advertisement: ObjectPath) -> Self {
        Self(adapter, BlueZNames.advertisingManager, "RegisterAdvertisement", [
            .objectPath(advertisement), .propertyMap([:]),
        ])
    }

    public static func unregisterAdvertisement(adapter: ObjectPath, advertisement: ObjectPath) -> Self {
        Self(adapter, BlueZNames.advertisingManager, "UnregisterAdvertisement", [.objectPath(advertisement)])
    }

    public static func writeDescriptor(_ descriptor: ObjectPath, _ value: [UInt8]) -> Self {
        Self(descriptor, BlueZNames.gattDescriptor, "WriteValue", [.bytes(value), .propertyMap([:])])
    }

    public static func startNotify(characteristic: ObjectPath) -> Self {
        Self(characteristic, BlueZNames.gattCharacteristic, "StartNotify")
    }

    public static func stopNotify(characteristic: ObjectPath) -> Self {
        Self(characteristic, BlueZNames.gattCharacteristic, "StopNotify")
    }
}

/// What AcquireNotify hands over: a SOCK_SEQPACKET socket carrying one
/// notification per datagram, and the link's ATT MTU. The caller owns `fd`.
public struct AcquiredNotify: Sendable {
    public let fd: Int32
    public let mtu: Int
}

extension BlueZRequest where Output == AcquiredNotify {
    /// Notifications through a socket instead of PropertiesChanged signals
    /// through dbus-daemon. bluetoothd gives them to this client only: while
    /// it holds them, others' StartNotify and AcquireNotify fail.
    public static func acquireNotify(characteristic: ObjectPath) -> Self {
        Self(characteristic, BlueZNames.gattCharacteristic, "AcquireNotify", [.propertyMap([:])]) {
            reply throws(BlueZError) in
            guard reply.count == 2, case .unixFD(let fd) = reply[0], let mtu = reply[1].integer.flatMap({ Int(exactly: $0) })
            else {
                reply.forEach { $0.closeDescriptors() }
                throw BlueZError(.unexpectedReply, message: "AcquireNotify returned \(reply.map(\.signature))")
            }
            return AcquiredNotify(fd: fd, mtu: mtu)
        }
    }
}

extension BlueZRequest where Output == [UInt8] {
    public static func readValue(characteristic: ObjectPath, offset: UInt16 = 0) -> Self {
        let options: [String: DBusValue] = offset == 0 ? [:] : ["offset": .uint16(offset)]
        return Self(characteristic, BlueZNames.gattCharacteristic, "ReadValue", [.propertyMap(options)]) {
            reply throws(BlueZError) in
            guard let bytes = reply.first?.bytes else {
                throw BlueZError(.unexpectedReply, message: "ReadValue returned \(reply.map(\.signature))")
            }
            return bytes
        }
    }
}

extension BlueZRequest where Output == [UInt8] {
    public static func readDescriptor(_ descriptor: ObjectPath) -> Self {
        Self(descriptor, BlueZNames.gattDescriptor, "ReadValue", [.propertyMap([:])]) { reply throws(BlueZError) in
            guard let bytes = reply.first?.bytes else {
                throw BlueZError(.unexpectedReply, message: "ReadValue returned \(reply.map(\.signature))")
            }
            return bytes
        }
    }
}

extension BlueZRequest where Output == Int? {
    /// The ATT MTU of a connected characteristic's link (BlueZ 5.62 and
    /// later). bluetoothd shows it only while connected and never announces
    /// a change, so the object tree's copy may be missing or stale: ask.
    public static func characteristicMTU(characteristic: ObjectPath) -> Self {
        Self(characteristic, BlueZNames.properties, "Get", [
            .string(BlueZNames.gattCharacteristic), .string("MTU"),
        ]) { reply throws(BlueZError) in
            reply.first?.integer.flatMap { Int(exactly: $0) }
        }
    }
}

extension BlueZRequest where Output == ObjectTree {
    public static func getManagedObjects() -> Self {
        Self("/", BlueZNames.objectManager, "GetManagedObjects", decodeReply: { reply throws(BlueZError) in
            do throws(DBusError) {
                return ObjectTree(objects: try reply.managedObjects())
            } catch {
                throw BlueZError(.unexpectedReply, message: "GetManagedObjects: \(error.message)")
            }
        })
    }
}

extension BlueZClient {
    /// Performs a request; `completion` runs on the loop.
    public func perform<Output>(
        _ request: BlueZRequest<Output>, completion: @escaping @Sendable (Result<Output, BlueZError>) -> Void
    ) {
        let message: Message
        do {
            message = try Message.methodCall(
                destination: BlueZNames.busName, path: request.path, interface: request.interface,
                member: request.member, arguments: request.arguments)
        } catch {
            completion(.failure(BlueZError(error)))
            return
        }
        connection.call(message, timeout: request.timeout) { result in
            completion(Self.outcome(of: result, decodedBy: request.decode))
        }
    }

    private static func outcome<Output>(
        of result: Result<Message, DBusError>,
        decodedBy decode: (Message) throws(BlueZError) -> Output
    ) -> Result<Output, BlueZError> {
        do {
            return .success(try decode(try result.get()))
        } catch let error as DBusError {
            return .failure(BlueZError(error))
        } catch let error as BlueZError {
            return .failure(error)
        } catch {
            return .failure(BlueZError(.other, message: "\(error)"))
        }
    }
}
