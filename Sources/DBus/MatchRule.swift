/// A D-Bus match rule for signals. The bus uses its string form to decide
/// what to send us; `matches` routes what arrives to the right subscriber.
public struct MatchRule: Hashable, Sendable, CustomStringConvertible {
    public var sender: String?
    public var interface: String?
    public var member: String?
    public var path: ObjectPath?
    public var pathNamespace: ObjectPath?
    public var arg0: String?

    public init(
        sender: String? = nil, interface: String? = nil, member: String? = nil,
        path: ObjectPath? = nil, pathNamespace: ObjectPath? = nil, arg0: String? = nil
    ) {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
        self.arg0 = arg0
    }

    /// The rule as the bus daemon reads it.
    public var description: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            // Inside quotes only the quote itself needs care: close, escape, reopen.
            let escaped = value.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''")
            parts.append("\(key)='\(escaped)'")
        }
        add("sender", sender)
        add("interface", interface)
        add("member", member)
        add("path", path?.rawValue)
        add("path_namespace", pathNamespace?.rawValue)
        add("arg0", arg0)
        return parts.joined(separator: ",")
    }

    /// A well-known sender name (not a unique `:1.42` one) needs its owner looked up.
    var hasWellKnownSender: Bool {
        guard let sender else { return false }
        return !sender.hasPrefix(":") && sender != busDriverName
    }

    /// Whether this signal is one the rule selects. `nameOwners` maps a
    /// well-known `sender` to the unique name owning it (absent: not known
    /// yet, accept); it is looked up only once everything else matched.
    func matches(_ message: Message, nameOwners: [String: String]) -> Bool {
        if let interface, !message.hasInterface(interface) { return false }
        if let member, !message.hasMember(member) { return false }
        // Compared in place (no String per signal: this runs per notification).
        if let path, !message.hasPath(path) { return false }
        if let pathNamespace, !message.isPath(in: pathNamespace) { return false }
        if let sender {
            let expected = hasWellKnownSender ? nameOwners[sender] : sender
            if let expected, !message.hasSender(expected) { return false }
        }
        if let arg0 {
            guard (try? message.arguments().first?.string) == arg0 else { return false }
        }
        return true
    }
}

/// The bus daemon itself.
let busDriverName = "org.freedesktop.DBus"
let busDriverPath: ObjectPath = "/org/freedesktop/DBus"
