import Glibc

/// A D-Bus object path such as `/org/bluez/hci0`.
public struct ObjectPath: Hashable, Sendable, Comparable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }
    public static func < (a: ObjectPath, b: ObjectPath) -> Bool { a.rawValue < b.rawValue }

    /// The path one level up; nil for `/`.
    public var parent: ObjectPath? {
        guard rawValue != "/", let slash = rawValue.lastIndex(of: "/") else { return nil }
        return slash == rawValue.startIndex ? "/" : ObjectPath(String(rawValue[..<slash]))
    }

    /// True when `self` is `ancestor` or lies below it.
    public func isDescendant(of ancestor: ObjectPath) -> Bool {
        if ancestor.rawValue == "/" || ancestor == self { return true }
        // No "ancestor/" built to compare with: this runs per notification.
        guard rawValue.hasPrefix(ancestor.rawValue) else { return false }
        return rawValue.utf8.dropFirst(ancestor.rawValue.utf8.count).first == UInt8(ascii: "/")
    }

    /// True for a syntactically valid object path (libdbus aborts on invalid ones).
    public var isValid: Bool {
        let bytes = Array(rawValue.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        guard bytes.last != UInt8(ascii: "/") else { return false }
        var previousSlash = false
        for b in bytes {
            let slash = b == UInt8(ascii: "/")
            if slash && previousSlash { return false }
            if !slash && !DBusNames.isNameByte(b) { return false }
            previousSlash = slash
        }
        return true
    }
}

/// A D-Bus type signature such as `a{sv}`.
public struct Signature: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }
}

/// One entry of a D-Bus dictionary (`a{kv}`), kept in wire order.
public struct DictEntry: Hashable, Sendable {
    public var key: DBusValue
    public var value: DBusValue
    public init(_ key: DBusValue, _ value: DBusValue) {
        self.key = key
        self.value = value
    }
}

/// Any D-Bus value: a typed tree that can hold every signature.
///
/// Arrays and dictionaries carry their element signature so that empty ones
/// still marshal with the right type. Byte arrays have their own case because
/// they are what BlueZ moves most (characteristic values).
///
/// Only the containers that hold a signature besides their elements, and the
/// variant, are boxed: the rest (and so a notification's `.bytes`) sit in
/// the enum itself, with no allocation of their own.
public enum DBusValue: Hashable, Sendable {
    case byte(UInt8)
    case bool(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(ObjectPath)
    case signature(Signature)
    /// A file descriptor; one received from the bus is a duplicate the receiver must close.
    case unixFD(Int32)
    case bytes([UInt8])
    indirect case array(element: Signature, [DBusValue])
    indirect case dictionary(key: Signature, value: Signature, [DictEntry])
    case structure([DBusValue])
    indirect case variant(DBusValue)

    /// The D-Bus signature of this value.
    public var signature: Signature {
        switch self {
        case .byte: "y"
        case .bool: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .bytes: "ay"
        case .array(let element, _): Signature("a" + element.rawValue)
        case .dictionary(let k, let v, _): Signature("a{" + k.rawValue + v.rawValue + "}")
        case .structure(let fields): Signature("(" + fields.map(\.signature.rawValue).joined() + ")")
        case .variant: "v"
        }
    }
}

// MARK: - Building values

extension DBusValue {
    /// An `a{sv}` dictionary, the shape of every D-Bus property map and option set.
    public static func propertyMap(_ entries: [String: DBusValue]) -> DBusValue {
        .dictionary(
            key: "s", value: "v",
            entries.sorted { $0.key < $1.key }.map { DictEntry(.string($0.key), .variant($0.value)) })
    }

    /// An `as` array.
    public static func strings(_ values: [String]) -> DBusValue {
        .array(element: "s", values.map(DBusValue.string))
    }
}

// MARK: - Reading values

extension DBusValue {
    /// The value inside any number of variant wrappers.
    public var unwrapped: DBusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }

    public var string: String? {
        switch unwrapped {
        case .string(let s): s
        case .objectPath(let p): p.rawValue
        case .signature(let s): s.rawValue
        default: nil
        }
    }

    public var objectPath: ObjectPath? {
        if case .objectPath(let p) = unwrapped { return p }
        return nil
    }

    public var bool: Bool? {
        if case .bool(let b) = unwrapped { return b }
        return nil
    }

    /// Any integer type, widened; nil for non-integers and out-of-range UInt64.
    public var integer: Int64? {
        switch unwrapped {
        case .byte(let v): Int64(v)
        case .int16(let v): Int64(v)
        case .uint16(let v): Int64(v)
        case .int32(let v): Int64(v)
        case .uint32(let v): Int64(v)
        case .int64(let v): v
        case .uint64(let v): Int64(exactly: v)
        default: nil
        }
    }

    /// A byte array, whether it arrived as `ay` or as an array of `y` values.
    public var bytes: [UInt8]? {
        switch unwrapped {
        case .bytes(let b): return b
        case .array(let element, let items) where element == "y":
            var out: [UInt8] = []
            out.reserveCapacity(items.count)
            for case .byte(let b) in items { out.append(b) }
            return out.count == items.count ? out : nil
        default: return nil
        }
    }

    /// The items of any array (a byte array gives `.byte` items).
    public var arrayItems: [DBusValue]? {
        switch unwrapped {
        case .array(_, let items): items
        case .bytes(let b): b.map(DBusValue.byte)
        default: nil
        }
    }

    public var stringArray: [String]? {
        guard let items = arrayItems else { return nil }
        var out: [String] = []
        out.reserveCapacity(items.count)
        for item in items {
            guard let s = item.string else { return nil }
            out.append(s)
        }
        return out
    }

    public var dictionaryEntries: [DictEntry]? {
        if case .dictionary(_, _, let entries) = unwrapped { return entries }
        return nil
    }

    /// An `a{sv}` (or any string-keyed dictionary) as a Swift dictionary with
    /// the variants unwrapped. Nil when the value is not a string-keyed dictionary.
    public var propertyMap: [String: DBusValue]? {
        guard let entries = dictionaryEntries else { return nil }
        var out: [String: DBusValue] = [:]
        out.reserveCapacity(entries.count)
        for entry in entries {
            guard let key = entry.key.string else { return nil }
            out[key] = entry.value.unwrapped
        }
        return out
    }
}

/// Character rules shared by names and paths.
enum DBusNames {
    static func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
    }
}

extension DBusValue {
    /// Closes every descriptor in the value: one decoded from a message is a
    /// duplicate libdbus made for the decoder, so a decoder that does not
    /// keep it (a trace, a reply it refuses) closes it.
    public func closeDescriptors() {
        switch self {
        case .unixFD(let fd): _ = Glibc.close(fd)
        case .array(_, let values), .structure(let values): values.forEach { $0.closeDescriptors() }
        case .dictionary(_, _, let entries): entries.forEach { $0.key.closeDescriptors(); $0.value.closeDescriptors() }
        case .variant(let value): value.closeDescriptors()
        default: break
        }
    }
}
