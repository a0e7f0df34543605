import CDBus
import Glibc

extension Message {
    /// The one case worth decoding without a value tree: a PropertiesChanged
    /// (`sa{sv}as`) of `interface` that changes only `property`, a byte
    /// array, and invalidates nothing — every GATT notification BlueZ sends.
    /// Returns the bytes (names compared in place, nothing else built); nil
    /// for any other message (decode it with `arguments()`).
    public func singleBytePropertyChange(interface: CString, property: CString) -> [UInt8]? {
        guard let signature = dbus_message_get_signature(raw), strcmp(signature, "sa{sv}as") == 0 else { return nil }
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return nil }
        var basic = DBusBasicValue()
        dbus_message_iter_get_basic(&iter, &basic)
        guard let name = basic.str, interface.withPointer({ strcmp(name, $0) }) == 0, dbus_message_iter_next(&iter) != 0
        else { return nil }

        // a{sv} with exactly one entry whose variant holds ay.
        var entries = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &entries)
        guard dbus_message_iter_get_arg_type(&entries) == Int32(UInt8(ascii: "e")) else { return nil }
        var entry = DBusMessageIter()
        dbus_message_iter_recurse(&entries, &entry)
        dbus_message_iter_get_basic(&entry, &basic)
        guard let key = basic.str, property.withPointer({ strcmp(key, $0) }) == 0, dbus_message_iter_next(&entry) != 0
        else { return nil }
        var variant = DBusMessageIter()
        dbus_message_iter_recurse(&entry, &variant)
        guard dbus_message_iter_get_arg_type(&variant) == Int32(UInt8(ascii: "a")),
            dbus_message_iter_get_element_type(&variant) == Int32(UInt8(ascii: "y"))
        else { return nil }
        var bytesIter = DBusMessageIter()
        dbus_message_iter_recurse(&variant, &bytesIter)
        var pointer: UnsafeMutableRawPointer?
        var count: Int32 = 0
        dbus_message_iter_get_fixed_array(&bytesIter, &pointer, &count)
        let bytes = pointer.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(count))) } ?? []
        guard dbus_message_iter_next(&entries) == 0, dbus_message_iter_next(&iter) != 0 else { return nil }

        // as: nothing invalidated.
        var invalidated = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &invalidated)
        guard dbus_message_iter_get_arg_type(&invalidated) == 0 else { return nil }
        return bytes
    }
}
