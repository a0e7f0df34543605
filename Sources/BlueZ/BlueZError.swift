import DBus

/// A failed BlueZ operation: the D-Bus error name parsed into a kind, with
/// BlueZ's message kept (for `Failed` it is the reason, such as
/// `le-connection-abort-by-local`).
public struct BlueZError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        // org.bluez.Error.*
        case inProgress, failed, notReady, notPermitted, notAuthorized, notSupported
        case invalidValueLength, invalidOffset, invalidArguments, doesNotExist
        case alreadyConnected, alreadyExists, notConnected, notAvailable, authenticationFailed
        // From the bus, or from this client.
        /// AccessDenied from the bus policy (or BlueZ's own NotAuthorized for a user).
        case permissionDenied
        /// The reply did not come in time.
        case timeout
        /// org.bluez is not on the bus.
        case bluetoothdNotRunning
        /// The object is gone (UnknownObject), or was never in the tree.
        case notFound
        /// The connection to the bus itself is lost.
        case busDisconnected
        /// The reply had a shape BlueZ does not send.
        case unexpectedReply
        case other
    }

    public var kind: Kind
    /// The D-Bus error name, e.g. `org.bluez.Error.Failed`.
    public var name: String
    public var message: String

    public init(_ kind: Kind, name: String = "", message: String = "") {
        self.kind = kind
        self.name = name
        self.message = message
    }

    public init(_ error: DBusError) {
        let name = error.name.rawValue
        self.init(BlueZError.kind(of: error), name: name, message: error.message)
    }

    /// The D-Bus error name to answer a call with when birdctl serves one
    /// (`org.bluez.Error.NotSupported` for `.notSupported`); `Failed` for
    /// kinds BlueZ has no name for.
    public var dbusName: String {
        if !name.isEmpty { return name }
        let short = BlueZError.bluezNames.first { $0.kind == kind }?.short ?? "Failed"
        return BlueZNames.errorPrefix + short
    }

    /// BlueZ says a connection attempt was aborted locally, which is usually
    /// transient (controller busy, a collision) and worth retrying.
    public var isConnectionAbortByLocal: Bool {
        kind == .failed && message.includes("le-connection-abort-by-local")
    }

    /// bluetoothd ended a pending Connect because the link it brought up went
    /// before the connection was made (device_remove_connection answers
    /// "br-connection-canceled", for LE links too: a bird gone out of range as
    /// its link came up), or because a Disconnect came meanwhile. Worth
    /// another attempt; if none succeeds, the connection was lost.
    public var isConnectionCanceled: Bool {
        kind == .failed && message.includes("br-connection-canceled")
    }

    /// A request the peer answered with an ATT error bluetoothd has no name
    /// for ("ATT error: 0x…", whatever its case): an answer from the peer,
    /// not a failure of the link.
    public var isUnnamedATTError: Bool {
        kind == .failed && message.lowercased().includes("att error")
    }

    /// StartNotify (or AcquireNotify) refused because another client holds
    /// the characteristic's notifications through AcquireNotify: bluetoothd
    /// gives them to that client alone.
    public var isNotifyAcquiredByAnother: Bool {
        kind == .notPermitted && message == "Notify acquired"
    }

    /// Worth a bounded retry with backoff.
    public var isTransient: Bool { kind == .inProgress || isConnectionAbortByLocal || isConnectionCanceled }

    public var description: String {
        switch kind {
        case .bluetoothdNotRunning: return "bluetoothd is not running (org.bluez is not on the system bus)"
        case .permissionDenied: return "permission denied by D-Bus policy" + (message.isEmpty ? "" : ": \(message)")
        case .timeout: return "BlueZ did not answer in time" + (message.isEmpty ? "" : " (\(message))")
        case .busDisconnected: return "lost the connection to the system bus"
        default:
            let short = name.hasPrefix(BlueZNames.errorPrefix) ? String(name.dropFirst(BlueZNames.errorPrefix.count)) : name
            if short.isEmpty { return message.isEmpty ? "\(kind)" : message }
            return message.isEmpty ? short : "\(short): \(message)"
        }
    }

    /// org.bluez.Error.* names and their kinds; the first name of a kind is
    /// the one birdctl answers with.
    private static let bluezNames: [(short: String, kind: Kind)] = [
        ("InProgress", .inProgress), ("Failed", .failed), ("NotReady", .notReady),
        ("NotPermitted", .notPermitted), ("NotAuthorized", .notAuthorized), ("NotSupported", .notSupported),
        ("InvalidValueLength", .invalidValueLength), ("InvalidOffset", .invalidOffset),
        ("InvalidArguments", .invalidArguments), ("DoesNotExist", .doesNotExist),
        ("AlreadyConnected", .alreadyConnected), ("AlreadyExists", .alreadyExists),
        ("NotConnected", .notConnected), ("NotAvailable", .notAvailable),
        ("AuthenticationFailed", .authenticationFailed), ("AuthenticationCanceled", .authenticationFailed),
        ("AuthenticationRejected", .authenticationFailed), ("AuthenticationTimeout", .authenticationFailed),
    ]
    private static let bluezKinds = Dictionary(uniqueKeysWithValues: bluezNames.map { ($0.short, $0.kind) })

    private static func kind(of error: DBusError) -> Kind {
        let name = error.name.rawValue
        if name.hasPrefix(BlueZNames.errorPrefix) {
            return bluezKinds[String(name.dropFirst(BlueZNames.errorPrefix.count))] ?? .other
        }
        switch error.kind {
        case .timeout: return .timeout
        case .serviceUnknown: return .bluetoothdNotRunning
        case .unknownObject: return .notFound
        case .accessDenied: return .permissionDenied
        case .disconnected: return .busDisconnected
        case .invalidArgs: return .invalidArguments
        case .unknownMethod: return .notSupported
        case .other: return .other
        }
    }
}
