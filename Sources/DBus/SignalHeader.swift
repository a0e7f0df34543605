import CDBus
import Glibc

/// The header fields that route a signal, read from libdbus once per message.
/// The connection's own checks and every subscription's rule then compare in
/// place: each `dbus_message_has_*` looked its field up again (~100
/// instructions), eight times per notification.
///
/// The pointers are the message's own strings, valid while it lives; the
/// header holds the message, so they cannot outlive it.
struct SignalHeader {
    private let message: Message
    private let interface, member, path, sender: UnsafePointer<CChar>?

    init(_ message: Message) {
        self.message = message
        interface = dbus_message_get_interface(message.raw)
        member = dbus_message_get_member(message.raw)
        path = dbus_message_get_path(message.raw)
        sender = dbus_message_get_sender(message.raw)
    }

    func hasInterface(_ name: CString) -> Bool { Self.field(interface, is: name) }
    func hasMember(_ name: CString) -> Bool { Self.field(member, is: name) }
    func hasPath(_ name: CString) -> Bool { Self.field(path, is: name) }
    func hasSender(_ name: CString) -> Bool { Self.field(sender, is: name) }

    /// Whether the path is `namespace` or below it.
    func isPath(in namespace: CString) -> Bool {
        guard let path else { return false }
        let length = namespace.count
        if length == 1 { return true }  // "/"
        guard namespace.withPointer({ strncmp(path, $0, length) }) == 0 else { return false }
        return path[length] == 0 || path[length] == CChar(UInt8(ascii: "/"))
    }

    private static func field(_ field: UnsafePointer<CChar>?, is name: CString) -> Bool {
        guard let field else { return false }
        return name.withPointer { strcmp(field, $0) } == 0
    }
}
