import CDBus
import Glibc

extension Message {
    /// GetManagedObjects' reply (`a{oa{sa{sv}}}`: path → interface →
    /// property → value) decoded straight into nested dictionaries: only the
    /// property values become `DBusValue`s. Through `arguments()` the whole
    /// reply became one value tree first, copied into the dictionaries and
    /// freed — with a large cache most of the work (docs/performance.md,
    /// 'A scan with 10,000 cached devices').
    public func managedObjects() throws(DBusError) -> [ObjectPath: [String: [String: DBusValue]]] {
        guard let signature = dbus_message_get_signature(raw), strcmp(signature, "a{oa{sa{sv}}}") == 0 else {
            let actual = dbus_message_get_signature(raw).map { String(cString: $0) } ?? ""
            throw DBusError(.invalidSignature, "expected a{oa{sa{sv}}}, got '\(actual)'")
        }
        var body = DBusMessageIter()
        guard dbus_message_iter_init(raw, &body) != 0 else { throw DBusError(.invalidArgs, "empty reply") }
        var objects: [ObjectPath: [String: [String: DBusValue]]] = [:]
        try Self.forEachEntry(&body) { (object: inout DBusMessageIter) throws(DBusError) in
            let path = ObjectPath(Self.text(&object))
            dbus_message_iter_next(&object)
            var interfaces: [String: [String: DBusValue]] = [:]
            try Self.forEachEntry(&object) { (interface: inout DBusMessageIter) throws(DBusError) in
                let name = Self.text(&interface)
                dbus_message_iter_next(&interface)
                var properties: [String: DBusValue] = [:]
                try Self.forEachEntry(&interface) { (property: inout DBusMessageIter) throws(DBusError) in
                    let key = Self.text(&property)
                    dbus_message_iter_next(&property)
                    var variant = DBusMessageIter()
                    dbus_message_iter_recurse(&property, &variant)
                    properties[key] = try MessageDecoder.decode(&variant)
                }
                interfaces[name] = properties
            }
            objects[path] = interfaces
        }
        return objects
    }

    /// Calls `body` with each entry of the dictionary at `iter` (its
    /// signature already checked).
    private static func forEachEntry(
        _ iter: inout DBusMessageIter, _ body: (inout DBusMessageIter) throws(DBusError) -> Void
    ) throws(DBusError) {
        var entries = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &entries)
        while dbus_message_iter_get_arg_type(&entries) == Int32(UInt8(ascii: "e")) {
            var entry = DBusMessageIter()
            dbus_message_iter_recurse(&entries, &entry)
            try body(&entry)
            dbus_message_iter_next(&entries)
        }
    }

    /// The string or object path at `iter`.
    private static func text(_ iter: inout DBusMessageIter) -> String {
        var basic = DBusBasicValue()
        dbus_message_iter_get_basic(&iter, &basic)
        return basic.str.map { String(cString: $0) } ?? ""
    }
}
