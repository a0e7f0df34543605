import Bird
import BlueZ
import DBus
import FuzzBusSupport
import FuzzSupport

/// Any sequence of method calls to the objects birdctl exports — `serve`'s
/// GATT application and advertisement, and the pairing agent (both with and
/// without a person to confirm) — each a member, an interface, a path and
/// argument trees read from the fuzz bytes, from bluetoothd (the owner of
/// org.bluez) or from a stranger. Each call is answered as one off the bus
/// would be. What must hold: a stranger gets AccessDenied, whatever it calls;
/// every reply is a return or an error; and the values served always decode
/// (a refused write changes nothing; a read from any valid offset is the
/// value's tail).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzExportedMethods(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(Array(UnsafeBufferPointer(start: data, count: size)))
    let served = Served.shared
    while !input.isEmpty {
        let fromOwner = input.byte() % 8 != 0
        let path = input.pick(served.paths) { $0.objectPath() }
        let interface: String? = input.pick(Served.interfaces) { $0.text(upTo: 24) }
        let member = input.pick(Served.members) { $0.text(upTo: 16) }
        var arguments: [DBusValue] = []
        for _ in 0..<Int(input.byte() % 4) {
            switch input.byte() % 3 {
            case 0: arguments.append(.propertyMap(input.properties()))  // options
            case 1: arguments.append(.bytes(input.bytes(upTo: 64)))  // a value
            default: arguments.append(input.value())
            }
        }
        guard let call = try? Message.methodCall(
            destination: served.connection.uniqueName, path: path, interface: interface?.isEmpty == true ? nil : interface,
            member: member, arguments: arguments)
        else { continue }
        let sender = fromOwner ? served.connection.uniqueName : ":1.99999"
        let reply = served.connection.replyToIncoming(call, from: sender)
        if let reply {
            require(reply.kind == .methodReturn || reply.kind == .error, "\(member) answered with \(reply.kind)")
        }
        if !fromOwner, served.isRestricted(path) {
            require(reply?.errorName == .accessDenied, "a stranger's \(member) at \(path) got \(String(describing: reply))")
        }
    }
    served.checkValues()
    return 0
}

/// The exported objects, once per process, on a private bus where this
/// connection owns org.bluez (so that it may call them as bluetoothd).
final class Served: @unchecked Sendable {
    static let shared = Served()

    let connection = FuzzBus.connect()
    let application: GattApplication
    let paths: [ObjectPath]
    let characteristics: [(path: ObjectPath, field: BirdField)]

    static let interfaces = [
        "org.bluez.GattCharacteristic1", "org.bluez.GattService1", "org.bluez.LEAdvertisement1", "org.bluez.Agent1",
        "org.freedesktop.DBus.Properties", "org.freedesktop.DBus.ObjectManager", "org.freedesktop.DBus.Introspectable", "",
    ]
    static let members = [
        "ReadValue", "WriteValue", "StartNotify", "StopNotify", "Release", "Get", "GetAll", "Set", "GetManagedObjects",
        "Introspect", "RequestPinCode", "RequestPasskey", "DisplayPinCode", "DisplayPasskey", "RequestConfirmation",
        "RequestAuthorization", "AuthorizeService", "Cancel",
    ]

    private init() {
        let call = try! Message.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "RequestName", arguments: [.string("org.bluez"), .uint32(0)])
        _ = try! connection.callBlocking(call)
        application = BirdPeripheral.application(
            connection: connection, name: .name("Wren"), color: .color(RGBColor(red: 0, green: 0xFF, blue: 0)),
            alpha: .alpha(percent: 30), onEvent: { _ in })
        application.export()
        // The agent bluetoothd asks without a person, and one that asks a person (who alternates).
        PairingAgent(connection: connection, path: "/org/birdctl/agent").export()
        let answers = AlternatingAnswer()
        let person = PairingAgent.Person(
            confirm: { _, _, answer in answer(answers.next()) }, display: { _, _ in }, cancel: {})
        PairingAgent(connection: connection, path: "/org/birdctl/confirm", person: person).export()
        let root = application.root
        characteristics = BirdField.allCases.enumerated().map { index, field in
            (ObjectPath(root.rawValue + "/service0/char\(index)"), field)
        }
        paths = [root, ObjectPath(root.rawValue + "/service0"), application.advertisementPath, "/org/birdctl/agent",
                 "/org/birdctl/confirm", "/org/birdctl"] + characteristics.map(\.path)
        // A round trip through the bus: the owner of org.bluez is known after it.
        _ = try! connection.callBlocking(
            try! Message.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId"))
    }

    func isRestricted(_ path: ObjectPath) -> Bool {
        path.isDescendant(of: application.root) || path.isDescendant(of: "/org/birdctl/agent")
            || path.isDescendant(of: "/org/birdctl/confirm")
    }

    /// Each characteristic's value, read as bluetoothd reads it, decodes as its field.
    func checkValues() {
        for (path, field) in characteristics {
            let read = try! Message.methodCall(
                destination: connection.uniqueName, path: path, interface: "org.bluez.GattCharacteristic1",
                member: "ReadValue", arguments: [.propertyMap([:])])
            let reply = connection.replyToIncoming(read, from: connection.uniqueName)
            guard let reply, let value = try? reply.arguments().first?.bytes else {
                fatalError("ReadValue of \(field) answered \(String(describing: reply))")
            }
            require((try? BirdCodec.decode(field, value).get()) != nil, "\(field) serves \(hexString(value)), which does not decode")
        }
    }
}

final class AlternatingAnswer: @unchecked Sendable {
    private var yes = false
    func next() -> Bool {  // on the loop
        yes.toggle()
        return yes
    }
}
