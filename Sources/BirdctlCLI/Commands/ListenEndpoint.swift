/// `[ADDRESS:]PORT`, where a long-running command serves something
/// (`--metrics`, `--proxy`).
struct ListenEndpoint: Hashable, Sendable, CustomStringConvertible {
    /// nil: every address of the machine.
    var host: String?
    var port: UInt16

    /// `9100`, `127.0.0.1:9100`, `[::1]:9100`, `localhost:9100`; port 0: any
    /// free one. `option` names the option in an error.
    init(_ text: String, option: String) throws(UsageError) {
        var hostPart: Substring?
        var portPart = Substring(text)
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw UsageError("\(option) expects [ADDRESS:]PORT, e.g. 9464 or [::1]:9464, not \(text)")
            }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[text.index(close, offsetBy: 2)...]
        } else if let colon = text.lastIndex(of: ":") {
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart?.contains(":") == true {
                throw UsageError("\(option): put an IPv6 address in brackets, e.g. [::1]:9464, not \(text)")
            }
        }
        guard let port = UInt16(portPart), portPart.allSatisfy(\.isASCII) else {
            throw UsageError("\(option) expects [ADDRESS:]PORT with a port from 0 to 65535, not \(text)")
        }
        if let hostPart, hostPart.isEmpty { throw UsageError("\(option): an empty address in \(text)") }
        (host, self.port) = (hostPart.map(String.init), port)
    }

    /// Only this machine can reach it.
    var isLoopback: Bool { host.map(LocalMachine.isLoopback) ?? false }

    var description: String {
        let host = self.host.map { $0.contains(":") ? "[\($0)]" : $0 } ?? "*"
        return "\(host):\(port)"
    }
}
