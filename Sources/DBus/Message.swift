import CDBus
import Glibc

/// A D-Bus message. Owns one reference to a libdbus `DBusMessage` and drops
/// it in `deinit`. Messages are built complete and not changed afterwards, so
/// sharing one between threads is safe (libdbus reference counts atomically).
public final class Message: @unchecked Sendable, CustomStringConvertible {
    public enum Kind: Sendable { case methodCall, methodReturn, error, signal, invalid }

    let raw: OpaquePointer
    /// A received message's routing fields, read from libdbus once: routing a
    /// signal compares them for every subscription and again in BlueZ's
    /// notification slots, and each `dbus_message_has_*` or `get_*` looked
    /// its field up anew (docs/performance.md, 'The signal path'). A
    /// received message is locked, so the strings stay where they are while
    /// it lives. Nil for a message built here, whose header may still grow
    /// (a unix fd adds a field): those are asked of libdbus each time.
    private let received: RoutingFields?

    /// Takes over a reference the caller already owns. `received`: it came
    /// from the bus (or the wire) complete.
    init(owning raw: OpaquePointer, received: Bool = false) {
        self.raw = raw
        self.received = received ? RoutingFields(raw) : nil
    }

    /// Adds a reference of its own (for messages libdbus lends us: received ones).
    init(borrowing raw: OpaquePointer) {
        dbus_message_ref(raw)
        self.raw = raw
        self.received = RoutingFields(raw)
    }

    deinit { dbus_message_unref(raw) }

    // MARK: Building

    /// A method call. Names are validated here because libdbus aborts on invalid ones.
    public static func methodCall(
        destination: String?, path: ObjectPath, interface: String?, member: String,
        arguments: [DBusValue] = []
    ) throws(DBusError) -> Message {
        try checkNames(path: path, interface: interface, member: member, destination: destination)
        guard let raw = dbus_message_new_method_call(destination, path.rawValue, interface, member) else {
            throw DBusError(.noMemory)
        }
        let message = Message(owning: raw)
        try message.append(arguments)
        return message
    }

    public static func signal(
        path: ObjectPath, interface: String, member: String, arguments: [DBusValue] = []
    ) throws(DBusError) -> Message {
        try checkNames(path: path, interface: interface, member: member, destination: nil)
        guard let raw = dbus_message_new_signal(path.rawValue, interface, member) else {
            throw DBusError(.noMemory)
        }
        let message = Message(owning: raw)
        try message.append(arguments)
        return message
    }

    /// A successful reply to this method call.
    public func makeReply(_ arguments: [DBusValue] = []) throws(DBusError) -> Message {
        guard let raw = dbus_message_new_method_return(self.raw) else { throw DBusError(.noMemory) }
        let message = Message(owning: raw)
        try message.append(arguments)
        return message
    }

    /// An error reply to this method call.
    public func makeErrorReply(_ error: DBusError) -> Message {
        let name = dbus_validate_error_name(error.name.rawValue, nil) != 0 ? error.name : .failed
        let text = error.message.utf8.contains(0) ? "" : error.message
        // Only fails on out-of-memory, where libdbus cannot do anything else either.
        return Message(owning: dbus_message_new_error(raw, name.rawValue, text)!)
    }

    private static func checkNames(
        path: ObjectPath, interface: String?, member: String, destination: String?
    ) throws(DBusError) {
        guard path.isValid else { throw DBusError(.invalidArgs, "invalid object path '\(path)'") }
        if let interface, dbus_validate_interface(interface, nil) == 0 {
            throw DBusError(.invalidArgs, "invalid interface name '\(interface)'")
        }
        if dbus_validate_member(member, nil) == 0 {
            throw DBusError(.invalidArgs, "invalid member name '\(member)'")
        }
        if let destination, dbus_validate_bus_name(destination, nil) == 0 {
            throw DBusError(.invalidArgs, "invalid bus name '\(destination)'")
        }
    }

    // MARK: Header fields

    public var kind: Kind {
        switch dbus_message_get_type(raw) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL: .methodCall
        case DBUS_MESSAGE_TYPE_METHOD_RETURN: .methodReturn
        case DBUS_MESSAGE_TYPE_ERROR: .error
        case DBUS_MESSAGE_TYPE_SIGNAL: .signal
        default: .invalid
        }
    }

    public var path: ObjectPath? { dbus_message_get_path(raw).map { ObjectPath(String(cString: $0)) } }

    /// Whether the message's path is `path`, compared in place (no string made).
    public func hasPath(_ path: ObjectPath) -> Bool {
        guard let own = routing.path else { return false }
        var text = path.rawValue
        return text.withUTF8 { utf8 in
            utf8.count == strlen(own) && (utf8.isEmpty || memcmp(utf8.baseAddress!, own, utf8.count) == 0)
        }
    }
    public var interface: String? { dbus_message_get_interface(raw).map { String(cString: $0) } }
    public var member: String? { dbus_message_get_member(raw).map { String(cString: $0) } }
    public var sender: String? { dbus_message_get_sender(raw).map { String(cString: $0) } }
    public var destination: String? { dbus_message_get_destination(raw).map { String(cString: $0) } }
    public var errorName: DBusErrorName? { dbus_message_get_error_name(raw).map { DBusErrorName(String(cString: $0)) } }
    public var signature: Signature { Signature(String(cString: dbus_message_get_signature(raw))) }
    public var serial: UInt32 { dbus_message_get_serial(raw) }
    public var replySerial: UInt32 { dbus_message_get_reply_serial(raw) }
    public var expectsReply: Bool { dbus_message_get_no_reply(raw) == 0 }

    // MARK: Routing, compared in place

    func hasInterface(_ name: CString) -> Bool { Self.field(routing.interface, is: name) }
    func hasMember(_ name: CString) -> Bool { Self.field(routing.member, is: name) }
    func hasPath(_ name: CString) -> Bool { Self.field(routing.path, is: name) }
    func hasSender(_ name: CString) -> Bool { Self.field(routing.sender, is: name) }

    /// Whether the path is `namespace` or below it.
    func isPath(in namespace: CString) -> Bool {
        guard let path = routing.path else { return false }
        let length = namespace.count
        if length == 1 { return true }  // "/"
        guard namespace.withPointer({ strncmp(path, $0, length) }) == 0 else { return false }
        return path[length] == 0 || path[length] == CChar(UInt8(ascii: "/"))
    }

    private var routing: RoutingFields {
        if let received { return received }
        return RoutingFields(raw)
    }

    private static func field(_ field: UnsafePointer<CChar>?, is name: CString) -> Bool {
        guard let field else { return false }
        return name.withPointer { strcmp(field, $0) } == 0
    }

    /// The error this message carries, if it is an error reply.
    public var error: DBusError? {
        guard kind == .error, let name = errorName else { return nil }
        let text = (try? arguments().first?.string) ?? nil
        return DBusError(name, text ?? "")
    }

    public var description: String {
        var parts: [String] = ["\(kind)"]
        if let sender { parts.append("from \(sender)") }
        if let destination { parts.append("to \(destination)") }
        if let path { parts.append("path \(path)") }
        if let interface, let member { parts.append("\(interface).\(member)") } else if let member { parts.append(member) }
        if let errorName { parts.append(errorName.rawValue) }
        parts.append("serial \(serial)")
        if replySerial != 0 { parts.append("reply to \(replySerial)") }
        parts.append("(\(signature))")
        return parts.joined(separator: " ")
    }
}

/// The header fields that route a message: pointers into its own strings.
private struct RoutingFields {
    let interface, member, path, sender: UnsafePointer<CChar>?

    init(_ raw: OpaquePointer) {
        interface = dbus_message_get_interface(raw)
        member = dbus_message_get_member(raw)
        path = dbus_message_get_path(raw)
        sender = dbus_message_get_sender(raw)
    }
}
