import Gateway
import Glibc
import MQTT

/// What `--mqtt` and its companion options say: the broker, the topic
/// prefix, credentials (from a file or the environment, never argv) and TLS,
/// parsed into the gateway's configuration.
struct GatewayOptions {
    var configuration: GatewayConfiguration
    /// For stderr, before anything is sent: a password at risk.
    var warnings: [String] = []

    static let usernameVariable = "BIRDCTL_MQTT_USERNAME"
    static let passwordVariable = "BIRDCTL_MQTT_PASSWORD"

    /// nil without `--mqtt` (the companion options then are a usage error).
    init?(_ arguments: Arguments, environment: [String: String]) throws(UsageError) {
        guard let url = arguments.value(.mqtt) else {
            let companions: [Option] = [
                .mqttCredentials, .mqttCA, .mqttCertificate, .mqttKey, .mqttBuffer, .mqttBufferBytes, .fleetMargin, .fleetDwell,
                .mqttWriteTTL,
            ]
            if let stray = companions.first(where: { arguments.value($0) != nil })
                ?? [Option.noDiscovery, .fleet].first(where: { arguments.has($0) })
            {
                throw UsageError("\(stray.name) goes with --mqtt")
            }
            return nil
        }
        let target = try Self.parse(url)
        let prefix = target.prefix ?? "birdctl/" + Self.topicSafe(LocalMachine.hostname())
        var settings = MQTTSettings(host: target.host, port: target.port, clientID: "birdctl_" + GatewayConfiguration.gatewayID(prefix))
        let discovery = !arguments.has(.noDiscovery)
        let (fleetRoot, fleet) = try Self.fleet(arguments, prefix: prefix)
        settings.bufferCapacity = arguments.integer(.mqttBuffer) ?? settings.bufferCapacity
        settings.bufferByteCapacity = arguments.integer(.mqttBufferBytes) ?? settings.bufferByteCapacity

        let ca = arguments.value(.mqttCA)
        let certificate = arguments.value(.mqttCertificate)
        let key = arguments.value(.mqttKey)
        if target.secure {
            // libmosquitto verifies the broker against these; there is no
            // "trust anything" switch on purpose.
            guard let ca else { throw UsageError("mqtts:// needs --mqtt-ca FILE (the CA that signed the broker's certificate)") }
            if key != nil && certificate == nil { throw UsageError("--mqtt-key goes with --mqtt-cert") }
            settings.tls = .init(caFile: ca, certificateFile: certificate, keyFile: key ?? certificate)
        } else if ca != nil || certificate != nil || key != nil {
            throw UsageError("--mqtt-ca, --mqtt-cert and --mqtt-key need an mqtts:// URL")
        }
        (settings.username, settings.password) = try Self.credentials(arguments.value(.mqttCredentials), environment)
        settings.will = MQTTMessage(prefix + "/status", "offline", retain: true)
        if let file = arguments.value(.mqttCredentials), LocalMachine.readableByOthers(file) {
            warnings.append("\(file) holds a password and other users can read it (chmod 600 \(file))")
        }
        if settings.password != nil && !target.secure && !LocalMachine.isLoopback(target.host) {
            warnings.append("the MQTT password goes to \(target.host) in plain text (mqtt://); use mqtts:// with --mqtt-ca")
        }
        configuration = GatewayConfiguration(
            settings: settings, prefix: prefix, discovery: discovery, fleet: fleet, fleetRoot: fleetRoot,
            writeTimeToLive: arguments.deadline(.mqttWriteTTL),
            brokerDescription: "\(target.secure ? "mqtts" : "mqtt")://\(target.host):\(target.port)", version: Version.text)
    }

    /// `--fleet`'s root and this gateway's room, from the prefix `ROOT/ROOM`.
    static func fleet(_ arguments: Arguments, prefix: String) throws(UsageError) -> (String?, FleetOwnership.Configuration?) {
        guard arguments.has(.fleet) else {
            if let stray = [Option.fleetMargin, .fleetDwell].first(where: { arguments.value($0) != nil }) {
                throw UsageError("\(stray.name) goes with --fleet")
            }
            return (nil, nil)
        }
        guard let slash = prefix.lastIndex(of: "/") else {
            throw UsageError("--fleet needs a prefix ROOT/ROOM (the gateways of one fleet share ROOT); the URL's is one level")
        }
        let room = String(prefix[prefix.index(after: slash)...])
        if room == FleetTopics.shared { throw UsageError("--fleet: a gateway's room cannot be '\(FleetTopics.shared)' (the fleet's own topics)") }
        var configuration = FleetOwnership.Configuration(room: room)
        configuration.margin = arguments.integer(.fleetMargin) ?? configuration.margin
        configuration.dwell = arguments.deadline(.fleetDwell)
        return (String(prefix[..<slash]), configuration)
    }

    // MARK: The URL

    struct Target: Equatable {
        var secure: Bool
        var host: String
        var port: Int
        var prefix: String?
    }

    /// `mqtt[s]://HOST[:PORT][/PREFIX]`; an IPv6 host goes in brackets.
    /// No error quotes the whole URL: it may hold a password after all.
    static func parse(_ url: String) throws(UsageError) -> Target {
        let usage = "--mqtt expects mqtt://HOST[:PORT][/PREFIX] or mqtts://…"
        // The scheme ends at the first ':'. (Not firstRange(of: "://"): that is
        // _StringProcessing's, which it would link in; see TextSearch.swift.)
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { throw UsageError(usage) }
        let scheme = url[..<colon]
        var rest = url[url.index(colon, offsetBy: 3)...]
        // Anywhere, not only before the first '/': in mqtt://user:1883/secret@host
        // the password holds a '/'. So no '@' in a prefix either.
        if rest.contains("@") {
            throw UsageError(
                "--mqtt: no credentials in the URL (ps shows the command line; a topic prefix has no '@'); use --mqtt-credentials FILE or \(usernameVariable)/\(passwordVariable)")
        }
        let secure: Bool
        switch scheme {
        case "mqtt": secure = false
        case "mqtts": secure = true
        default: throw UsageError("\(usage), got the scheme '\(scheme.prefix(16))'")
        }
        var prefix: String?
        if let slash = rest.firstIndex(of: "/") {
            prefix = String(rest[rest.index(after: slash)...])
            rest = rest[..<slash]
        }
        var host = rest
        var port = secure ? 8883 : 1883
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { throw UsageError("--mqtt: unterminated [ in the host") }
            let after = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw UsageError("--mqtt: only :PORT may follow [HOST]") }
                port = try portNumber(after.dropFirst())
            }
        } else if let colon = host.lastIndex(of: ":") {
            port = try portNumber(host[host.index(after: colon)...])
            host = host[..<colon]
        }
        guard !host.isEmpty else { throw UsageError("--mqtt: no host in the URL") }
        if let prefix {
            if prefix.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
                throw UsageError("--mqtt: the topic prefix '\(prefix)' has an empty level")
            }
            if prefix.contains(where: { $0 == "+" || $0 == "#" || $0 == "\0" }) {
                throw UsageError("--mqtt: the topic prefix '\(prefix)' contains a wildcard (+ or #)")
            }
            if prefix.hasPrefix("$") {
                // $SYS/… and the like are the broker's: clients do not publish there.
                throw UsageError("--mqtt: the topic prefix '\(prefix)' starts with '$' (the broker's own topics)")
            }
        }
        return Target(secure: secure, host: String(host), port: port, prefix: prefix)
    }

    private static func portNumber(_ text: Substring) throws(UsageError) -> Int {
        guard let port = Int(text), (1...65535).contains(port) else {
            throw UsageError("--mqtt: the port is not a number in 1…65535")
        }
        return port
    }

    // MARK: Credentials

    /// From `--mqtt-credentials FILE` (one line, USERNAME:PASSWORD), else the
    /// environment; neither means anonymous.
    static func credentials(_ file: String?, _ environment: [String: String]) throws(UsageError) -> (String?, String?) {
        guard let file else {
            let username = environment[usernameVariable]
            let password = environment[passwordVariable]
            if password != nil && username == nil { throw UsageError("\(passwordVariable) is set but \(usernameVariable) is not") }
            return (username, password)
        }
        guard let text = LocalMachine.readSmallFile(file) else { throw UsageError("--mqtt-credentials: cannot read \(file)") }
        var line = text.split(separator: "\n", omittingEmptySubsequences: false).first ?? ""
        if line.hasSuffix("\r") { line = line.dropLast() }
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
            throw UsageError("--mqtt-credentials: \(file) should hold one line USERNAME:PASSWORD")
        }
        return (String(line[..<colon]), String(line[line.index(after: colon)...]))
    }

    // MARK: Names

    /// Letters, digits, `-` and `_` kept, the rest `_`: safe as one topic
    /// level (the host name in the default prefix).
    static func topicSafe(_ s: String) -> String {
        String(s.unicodeScalars.map { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") ? Character($0) : "_" })
    }
}
