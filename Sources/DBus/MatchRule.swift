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

    /// The rule as the bus daemon reads it. Appended in place: `split` and
    /// `joined` run unspecialized here, for every rule at start-up (see
    /// docs/performance.md, 'Start-up').
    public var description: String {
        var rule = "type='signal'"
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            rule += ",\(key)='"
            // Inside quotes only the quote itself needs care: close, escape, reopen.
            for scalar in value.unicodeScalars {
                if scalar == "'" { rule += "'\\''" } else { rule.unicodeScalars.append(scalar) }
            }
            rule += "'"
        }
        add("sender", sender)
        add("interface", interface)
        add("member", member)
        add("path", path?.rawValue)
        add("path_namespace", pathNamespace?.rawValue)
        add("arg0", arg0)
        return rule
    }

    /// A well-known sender name (not a unique `:1.42` one) needs its owner looked up.
    var hasWellKnownSender: Bool {
        guard let sender else { return false }
        return !sender.hasPrefix(":") && sender != busDriverName
    }

    /// A rule's strings as C strings, so that matching a signal, which runs
    /// per notification, compares in place and allocates nothing. A class, so
    /// that matching does not copy (retain and release) each of its strings.
    final class Compiled: Sendable {
        let rule: MatchRule
        private let interface, member, path, pathNamespace: CString?
        /// A unique-name sender (or the bus driver) compared as it is.
        private let uniqueSender: CString?
        /// A well-known sender, compared with its owner's unique name.
        private let wellKnownSender: String?

        init(_ rule: MatchRule) {
            self.rule = rule
            interface = rule.interface.map { CString($0) }
            member = rule.member.map { CString($0) }
            path = rule.path.map { CString($0.rawValue) }
            pathNamespace = rule.pathNamespace.map { CString($0.rawValue) }
            wellKnownSender = rule.hasWellKnownSender ? rule.sender : nil
            uniqueSender = rule.hasWellKnownSender ? nil : rule.sender.map { CString($0) }
        }

        /// Whether this signal is one the rule selects. `nameOwners` maps a
        /// well-known sender to the unique name owning it (absent: not known
        /// yet, accept); it is looked up only once everything else matched.
        func matches(_ message: Message, nameOwners: NameOwners) -> Bool {
            if let interface, !message.hasInterface(interface) { return false }
            if let member, !message.hasMember(member) { return false }
            if let path, !message.hasPath(path) { return false }
            if let pathNamespace, !message.isPath(in: pathNamespace) { return false }
            if let uniqueSender, !message.hasSender(uniqueSender) { return false }
            if let wellKnownSender, let owner = nameOwners[wellKnownSender], !message.hasSender(owner) {
                return false
            }
            if let arg0 = rule.arg0 {
                guard (try? message.arguments().first?.string) == arg0 else { return false }
            }
            return true
        }
    }
}

/// The bus daemon itself.
let busDriverName = "org.freedesktop.DBus"
let busDriverPath: ObjectPath = "/org/freedesktop/DBus"
