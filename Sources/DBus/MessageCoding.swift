import CDBus
import Glibc

// Marshalling between DBusValue trees and libdbus message iterators.

extension Message {
    /// Decodes the whole body. Any signature decodes: the tree has a case for
    /// every D-Bus type, so an unexpected message is data, never a crash.
    public func arguments() throws(DBusError) -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return [] }
        var values: [DBusValue] = []
        repeat {
            values.append(try MessageDecoder.decode(&iter))
        } while dbus_message_iter_next(&iter) != 0
        return values
    }

    /// Appends values to the body, checking them first (libdbus aborts on bad input).
    func append(_ values: [DBusValue]) throws(DBusError) {
        guard !values.isEmpty else { return }
        for value in values {
            if let reason = value.invalidReason { throw DBusError(.invalidArgs, reason) }
        }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(raw, &iter)
        for value in values {
            guard MessageEncoder.encode(value, into: &iter) else { throw DBusError(.noMemory) }
        }
    }
}

private func code(_ c: Unicode.Scalar) -> Int32 { Int32(c.value) }

enum MessageDecoder {
    static func decode(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let type = dbus_message_iter_get_arg_type(&iter)
        var basic = DBusBasicValue()
        switch type {
        case code("y"):
            dbus_message_iter_get_basic(&iter, &basic)
            return .byte(basic.byt)
        case code("b"):
            dbus_message_iter_get_basic(&iter, &basic)
            return .bool(basic.bool_val != 0)
        case code("n"):
            dbus_message_iter_get_basic(&iter, &basic)
            return .int16(basic.i16)
        case code("q"):
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint16(basic.u16)
        case code("i"):
            dbus_message_iter_get_basic(&iter, &basic)
            return .int32(basic.i32)
        case code("u"):
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint32(basic.u32)
        case code("x"):
            dbus_message_iter_get_basic(&iter, &basic)
            return .int64(Int64(basic.i64))
        case code("t"):
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint64(UInt64(basic.u64))
        case code("d"):
            dbus_message_iter_get_basic(&iter, &basic)
            return .double(basic.dbl)
        case code("h"):
            dbus_message_iter_get_basic(&iter, &basic)
            // A message can name a descriptor it does not carry (libdbus gives
            // -1): malformed, not a value to pass on (a FuzzDBusMessages regression).
            guard basic.fd >= 0 else {
                throw DBusError(.invalidArgs, "the message names a unix fd it does not carry")
            }
            return .unixFD(basic.fd)
        case code("s"), code("o"), code("g"):
            dbus_message_iter_get_basic(&iter, &basic)
            let text = basic.str.map { String(cString: $0) } ?? ""
            if type == code("o") { return .objectPath(ObjectPath(text)) }
            if type == code("g") { return .signature(Signature(text)) }
            return .string(text)
        case code("v"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .variant(try decode(&sub))
        case code("r"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var fields: [DBusValue] = []
            if dbus_message_iter_get_arg_type(&sub) != 0 {
                repeat { fields.append(try decode(&sub)) } while dbus_message_iter_next(&sub) != 0
            }
            return .structure(fields)
        case code("a"):
            return try decodeArray(&iter)
        default:
            throw DBusError(.invalidSignature, "cannot decode D-Bus type code \(type)")
        }
    }

    private static func decodeArray(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let elementType = dbus_message_iter_get_element_type(&iter)
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &sub)

        if elementType == code("y") {
            var pointer: UnsafeMutableRawPointer?
            var count: Int32 = 0
            dbus_message_iter_get_fixed_array(&sub, &pointer, &count)
            guard let pointer, count > 0 else { return .bytes([]) }
            return .bytes(Array(UnsafeRawBufferPointer(start: pointer, count: Int(count))))
        }

        if elementType == code("e") {
            guard let (keySig, valueSig) = dictionarySignatures(of: &iter) else {
                throw DBusError(.invalidSignature, "malformed dictionary signature '\(signature(of: &iter))'")
            }
            var entries: [DictEntry] = []
            while dbus_message_iter_get_arg_type(&sub) == code("e") {
                var entry = DBusMessageIter()
                dbus_message_iter_recurse(&sub, &entry)
                let key = try decode(&entry)
                dbus_message_iter_next(&entry)
                let value = try decode(&entry)
                entries.append(DictEntry(key, value))
                dbus_message_iter_next(&sub)
            }
            return .dictionary(key: keySig, value: valueSig, entries)
        }

        let element = Signature(String(signature(of: &iter).rawValue.dropFirst()))
        var items: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&sub) != 0 {
            items.append(try decode(&sub))
            dbus_message_iter_next(&sub)
        }
        return .array(element: element, items)
    }

    /// A dictionary array's key and value signatures, split on libdbus's own
    /// validated C string `a{KV}`: the key is one basic type code, so no
    /// parsing (this runs for every dictionary of every message received).
    private static func dictionarySignatures(of iter: inout DBusMessageIter) -> (Signature, Signature)? {
        guard let cString = dbus_message_iter_get_signature(&iter) else { return nil }
        defer { dbus_free(cString) }
        let bytes = UnsafeRawBufferPointer(start: cString, count: strlen(cString))
        guard bytes.count >= 5, bytes[0] == UInt8(ascii: "a"), bytes[1] == UInt8(ascii: "{"),
            bytes[bytes.count - 1] == UInt8(ascii: "}")
        else { return nil }
        return (Signature(String(decoding: bytes[2..<3], as: UTF8.self)),
                Signature(String(decoding: bytes[3..<(bytes.count - 1)], as: UTF8.self)))
    }

    private static func signature(of iter: inout DBusMessageIter) -> Signature {
        guard let cString = dbus_message_iter_get_signature(&iter) else { return "" }
        defer { dbus_free(cString) }
        return Signature(String(cString: cString))
    }
}

private enum MessageEncoder {
    /// Appends one value; false only when libdbus runs out of memory.
    /// The value has been checked by `invalidReason` before.
    static func encode(_ value: DBusValue, into iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(let v): return appendBasic(&iter, "y", v)
        case .bool(let v): return appendBasic(&iter, "b", dbus_bool_t(v ? 1 : 0))
        case .int16(let v): return appendBasic(&iter, "n", v)
        case .uint16(let v): return appendBasic(&iter, "q", v)
        case .int32(let v): return appendBasic(&iter, "i", v)
        case .uint32(let v): return appendBasic(&iter, "u", v)
        case .int64(let v): return appendBasic(&iter, "x", v)
        case .uint64(let v): return appendBasic(&iter, "t", v)
        case .double(let v): return appendBasic(&iter, "d", v)
        case .unixFD(let v): return appendBasic(&iter, "h", v)
        case .string(let s): return appendString(&iter, "s", s)
        case .objectPath(let p): return appendString(&iter, "o", p.rawValue)
        case .signature(let s): return appendString(&iter, "g", s.rawValue)
        case .bytes(let bytes):
            return container(&iter, "a", "y") { sub in
                bytes.withUnsafeBufferPointer { buffer in
                    var base = buffer.baseAddress ?? UnsafePointer(bitPattern: 1)
                    return dbus_message_iter_append_fixed_array(&sub, code("y"), &base, Int32(buffer.count)) != 0
                }
            }
        case .array(let element, let items):
            return container(&iter, "a", element.rawValue) { sub in
                items.allSatisfy { encode($0, into: &sub) }
            }
        case .dictionary(let key, let valueSig, let entries):
            return container(&iter, "a", "{\(key)\(valueSig)}") { sub in
                entries.allSatisfy { entry in
                    container(&sub, "e", nil) { e in
                        encode(entry.key, into: &e) && encode(entry.value, into: &e)
                    }
                }
            }
        case .structure(let fields):
            return container(&iter, "r", nil) { sub in fields.allSatisfy { encode($0, into: &sub) } }
        case .variant(let inner):
            return container(&iter, "v", inner.signature.rawValue) { sub in encode(inner, into: &sub) }
        }
    }

    private static func appendBasic<T: BitwiseCopyable>(
        _ iter: inout DBusMessageIter, _ type: Unicode.Scalar, _ value: T
    ) -> Bool {
        withUnsafePointer(to: value) { dbus_message_iter_append_basic(&iter, code(type), $0) != 0 }
    }

    private static func appendString(_ iter: inout DBusMessageIter, _ type: Unicode.Scalar, _ s: String) -> Bool {
        s.withCString { cString in
            var pointer: UnsafePointer<CChar>? = cString
            return dbus_message_iter_append_basic(&iter, code(type), &pointer) != 0
        }
    }

    /// Opens a container, fills it, and closes it (or abandons it on failure).
    private static func container(
        _ iter: inout DBusMessageIter, _ type: Unicode.Scalar, _ contained: String?,
        _ fill: (inout DBusMessageIter) -> Bool
    ) -> Bool {
        var sub = DBusMessageIter()
        guard dbus_message_iter_open_container(&iter, code(type), contained, &sub) != 0 else { return false }
        guard fill(&sub) else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }
}
