import DBus
import FuzzSupport

/// Any bytes as a D-Bus message off the wire. What libdbus accepts must
/// decode into a DBusValue tree that is valid, prints, and survives a round
/// trip: encoded into a new message and decoded again it is the same tree
/// with the same signature and the same bytes. A GetManagedObjects-shaped
/// body (`a{oa{sa{sv}}}`) decoded in place is what the generic decoding gives.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDBusMessages(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let message = try? Message.fromWire(bytes) else { return 0 }
    _ = message.description
    let values: [DBusValue]
    do {
        values = try message.arguments()
    } catch {
        // Refused on purpose: a unix fd the message names but does not carry.
        require("\(error)".contains("unix fd"), "\(message.signature): \(error)")
        return 0
    }
    if message.signature.rawValue == "a{oa{sa{sv}}}" { checkManagedObjects(message, values[0]) }
    for value in values {
        require(value.invalidReason == nil, "decoded an invalid value: \(value.invalidReason ?? "")")
        _ = value.description
    }
    do {
        let copy = try Message.signal(path: "/fuzz", interface: "org.birdctl.Fuzz", member: "Copy", arguments: values)
        let reread = try Message.fromWire(try copy.wireBytes())
        require(reread.signature == message.signature, "\(message.signature) became \(reread.signature)")
        // Compared on the wire, bit for bit (a NaN is not == to itself).
        let again = try Message.signal(
            path: "/fuzz", interface: "org.birdctl.Fuzz", member: "Copy", arguments: try reread.arguments())
        require(try again.wireBytes() == copy.wireBytes(), "\(message.signature): \(values) changed in a round trip")
    } catch {
        fatalError("re-encoding \(message.signature) \(values) failed: \(error)")
    }
    return 0
}

/// `Message.managedObjects()` against the generic tree of the same body.
private func checkManagedObjects(_ message: Message, _ value: DBusValue) {
    let inPlace: [ObjectPath: [String: [String: DBusValue]]]
    do {
        inPlace = try message.managedObjects()
    } catch {
        fatalError("a{oa{sa{sv}}} decoded generically but not in place: \(error)")
    }
    var generic: [ObjectPath: [String: [String: DBusValue]]] = [:]
    for object in value.dictionaryEntries ?? [] {
        var interfaces: [String: [String: DBusValue]] = [:]
        for interface in object.value.dictionaryEntries ?? [] {
            interfaces[interface.key.string ?? ""] = interface.value.propertyMap
        }
        generic[object.key.objectPath ?? "/"] = interfaces
    }
    // A NaN is not == to itself: such a tree is compared by its shape only.
    if "\(value)".contains("nan") {
        require(inPlace.count == generic.count, "a{oa{sa{sv}}}: \(inPlace.count) objects, \(generic.count) generically")
    } else {
        require(inPlace == generic, "a{oa{sa{sv}}} decoded in place differs: \(inPlace) against \(generic)")
    }
}
