import CDBus

// A message's D-Bus wire form, through libdbus's own (validating) marshaller:
// what arrives from a socket, for fuzzing the decoder and for tests.

extension Message {
    /// Parses wire bytes as libdbus parses what it reads from a socket: the
    /// header and body are validated, so anything accepted here could come
    /// from a peer.
    public static func fromWire(_ bytes: [UInt8]) throws(DBusError) -> Message {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        let raw: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                dbus_message_demarshal(chars.baseAddress, Int32(clamping: chars.count), &error)
            }
        }
        guard let raw else {
            let message = error.message.map { String(cString: $0) } ?? "not a D-Bus message"
            throw DBusError(.invalidArgs, message)
        }
        return Message(owning: raw, received: true)
    }

    /// The message's wire bytes (given serial 1 if it has none yet).
    public func wireBytes() throws(DBusError) -> [UInt8] {
        if dbus_message_get_serial(raw) == 0 { dbus_message_set_serial(raw, 1) }
        var data: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        guard dbus_message_marshal(raw, &data, &length) != 0, let data else { throw DBusError(.noMemory) }
        defer { dbus_free(data) }
        return data.withMemoryRebound(to: UInt8.self, capacity: Int(length)) {
            Array(UnsafeBufferPointer(start: $0, count: Int(length)))
        }
    }
}
