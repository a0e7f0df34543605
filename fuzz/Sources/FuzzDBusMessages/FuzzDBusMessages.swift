import DBus

/// Any bytes as a D-Bus message off the wire. What libdbus accepts must
/// decode into a DBusValue tree that is valid, prints, and survives a round
/// trip: encoded into a new message and decoded again it is the same tree
/// with the same signature.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDBusMessages(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let message = try? Message.fromWire(bytes) else { return 0 }
    _ = message.description
    let values: [DBusValue]
    do {
        values = try message.arguments()
    } catch {
        // Only types this layer refuses on purpose (unix fds: none are passed here).
        precondition(message.signature.rawValue.contains("h"), "\(message.signature): \(error)")
        return 0
    }
    for value in values {
        precondition(value.invalidReason == nil, "decoded an invalid value: \(value.invalidReason ?? "")")
        _ = value.description
    }
    do {
        let copy = try Message.signal(path: "/fuzz", interface: "org.birdctl.Fuzz", member: "Copy", arguments: values)
        let reread = try Message.fromWire(try copy.wireBytes())
        precondition(reread.signature == message.signature, "\(message.signature) became \(reread.signature)")
        precondition(try reread.arguments() == values, "values changed in a round trip")
    } catch {
        preconditionFailure("re-encoding decoded values failed: \(error)")
    }
    return 0
}
