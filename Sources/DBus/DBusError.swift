/// A D-Bus error name such as `org.freedesktop.DBus.Error.ServiceUnknown`.
///
/// A struct with static members rather than an enum, so that any name a peer
/// sends (BlueZ has its own) can be carried and still pattern-matched.
public struct DBusErrorName: RawRepresentable, Hashable, Sendable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    public static let failed: DBusErrorName = "org.freedesktop.DBus.Error.Failed"
    public static let noReply: DBusErrorName = "org.freedesktop.DBus.Error.NoReply"
    public static let timeout: DBusErrorName = "org.freedesktop.DBus.Error.Timeout"
    public static let serviceUnknown: DBusErrorName = "org.freedesktop.DBus.Error.ServiceUnknown"
    public static let nameHasNoOwner: DBusErrorName = "org.freedesktop.DBus.Error.NameHasNoOwner"
    public static let unknownObject: DBusErrorName = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownInterface: DBusErrorName = "org.freedesktop.DBus.Error.UnknownInterface"
    public static let unknownMethod: DBusErrorName = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let unknownProperty: DBusErrorName = "org.freedesktop.DBus.Error.UnknownProperty"
    public static let propertyReadOnly: DBusErrorName = "org.freedesktop.DBus.Error.PropertyReadOnly"
    public static let invalidArgs: DBusErrorName = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let invalidSignature: DBusErrorName = "org.freedesktop.DBus.Error.InvalidSignature"
    public static let accessDenied: DBusErrorName = "org.freedesktop.DBus.Error.AccessDenied"
    public static let disconnected: DBusErrorName = "org.freedesktop.DBus.Error.Disconnected"
    public static let noMemory: DBusErrorName = "org.freedesktop.DBus.Error.NoMemory"
    public static let noServer: DBusErrorName = "org.freedesktop.DBus.Error.NoServer"
    public static let fileNotFound: DBusErrorName = "org.freedesktop.DBus.Error.FileNotFound"
}

/// An error from the bus, from a peer, or from this layer (bad address, bad
/// reply shape), always with a D-Bus error name and a human message.
public struct DBusError: Error, Hashable, Sendable, CustomStringConvertible {
    public var name: DBusErrorName
    public var message: String

    public init(_ name: DBusErrorName, _ message: String = "") {
        self.name = name
        self.message = message
    }

    /// What kind of failure this is, for callers that branch on it.
    public enum Kind: Hashable, Sendable {
        /// The call's reply did not come in time.
        case timeout
        /// The destination name has no owner (the service is not running).
        case serviceUnknown
        /// No object at that path.
        case unknownObject
        /// The object has no such method or interface.
        case unknownMethod
        /// The bus policy or the peer refused the call.
        case accessDenied
        /// Arguments of the wrong type or shape.
        case invalidArgs
        /// The connection to the bus is gone.
        case disconnected
        /// Any other error name (see `name`).
        case other
    }

    public var kind: Kind {
        switch name {
        case .noReply, .timeout: .timeout
        case .serviceUnknown, .nameHasNoOwner: .serviceUnknown
        case .unknownObject: .unknownObject
        case .unknownMethod, .unknownInterface, .unknownProperty: .unknownMethod
        case .accessDenied: .accessDenied
        case .invalidArgs, .invalidSignature: .invalidArgs
        case .disconnected, .noServer: .disconnected
        default: .other
        }
    }

    public var description: String {
        message.isEmpty ? name.rawValue : "\(name.rawValue): \(message)"
    }

    /// A reply whose arguments do not have the shape the caller expected.
    static func unexpectedReply(_ what: String, got: Signature) -> DBusError {
        DBusError(.invalidSignature, "unexpected reply for \(what): signature '\(got)'")
    }
}
