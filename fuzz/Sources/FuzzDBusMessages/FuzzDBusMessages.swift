import DBus
import FuzzSupport

/// Any bytes as a D-Bus message off the wire. What libdbus accepts must
/// decode into a DBusValue tree that is valid, prints, and survives a round
/// trip: encoded into a new message and decoded again it is the same tree
/// with the same signature and the same bytes.
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
