import Glibc
import MQTT

/// What `--mqtt` and its companion options say: the broker, the topic
/// prefix, credentials (from a file or the environment, never argv) and TLS.
struct GatewayOptions {
    var settings: MQTTSettings
    /// `birdctl/<hostname>` unless the URL has a path.
    var prefix: String
    var discovery: Bool
    /// Where the broker is, for messages (`mqtt://host:port`).
    var brokerDescription: String

    static let usernameVariable = "BIRDCTL_MQTT_USERNAME"
    static let passwordVariable = "BIRDCTL_MQTT_PASSWORD"

    /// nil without `--mqtt` (the companion options then are a usage error).
    init?(_ arguments: Arguments, environment: [String: String]) throws(UsageError) {
        guard let url = arguments.value(.mqtt) else {
            let companions: [Option] = [.mqttCredentials, .mqttCA, .mqttCertificate, .mqttKey, .mqttBuffer]
            if let stray = companions.first(where: { arguments.value($0) != nil }) ?? (arguments.has(.noDiscovery) ? .noDiscovery : nil) {
                throw UsageError("\(stray.name) goes with --mqtt")
            }
            return nil
        }
        let target = try Self.parse(url)
        prefix = target.prefix ?? "birdctl/" + Self.topicSafe(Self.hostname())
        let gatewayID = Self.topicSafe(prefix.replacingAll("/", with: "_"))
        settings = MQTTSettings(host: target.host, port: target.port, clientID: "birdctl_" + gatewayID)
        brokerDescription = "\(target.secure ? "mqtts" : "mqtt")://\(target.host):\(target.port)"
        discovery = !arguments.has(.noDiscovery)
        if let capacity = try arguments.integer(.mqttBuffer, range: 1...10_000_000) { settings.bufferCapacity = capacity }

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
    }

    // MARK: The URL

    struct Target: Equatable {
        var secure: Bool
        var host: String
        var port: Int
        var prefix: String?
    }

    /// `mqtt[s]://HOST[:PORT][/PREFIX]`; an IPv6 host goes in brackets.
    static func parse(_ url: String) throws(UsageError) -> Target {
        let secure: Bool
        var rest: Substring
        if url.hasPrefix("mqtt://") {
            secure = false
            rest = url.dropFirst(7)
        } else if url.hasPrefix("mqtts://") {
            secure = true
            rest = url.dropFirst(8)
        } else {
            throw UsageError("--mqtt expects mqtt://HOST[:PORT][/PREFIX] or mqtts://…, got '\(url)'")
        }
        var prefix: String?
        if let slash = rest.firstIndex(of: "/") {
            prefix = String(rest[rest.index(after: slash)...])
            rest = rest[..<slash]
        }
        if rest.contains("@") {
            throw UsageError(
                "--mqtt: no credentials in the URL (ps shows the command line); use --mqtt-credentials FILE or \(usernameVariable)/\(passwordVariable)")
        }
        var host = rest
        var port = secure ? 8883 : 1883
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { throw UsageError("--mqtt: unterminated [ in '\(url)'") }
            let after = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw UsageError("--mqtt: unexpected '\(after)' after the host") }
                port = try portNumber(after.dropFirst(), url)
            }
        } else if let colon = host.lastIndex(of: ":") {
            port = try portNumber(host[host.index(after: colon)...], url)
            host = host[..<colon]
        }
        guard !host.isEmpty else { throw UsageError("--mqtt: no host in '\(url)'") }
        if let prefix {
            if prefix.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
                throw UsageError("--mqtt: the topic prefix '\(prefix)' has an empty level")
            }
            if prefix.contains(where: { $0 == "+" || $0 == "#" || $0 == "\0" }) {
                throw UsageError("--mqtt: the topic prefix '\(prefix)' contains a wildcard (+ or #)")
            }
        }
        return Target(secure: secure, host: String(host), port: port, prefix: prefix)
    }

    private static func portNumber(_ text: Substring, _ url: String) throws(UsageError) -> Int {
        guard let port = Int(text), (1...65535).contains(port) else {
            throw UsageError("--mqtt: bad port '\(text)' in '\(url)'")
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
        guard let text = readSmallFile(file) else { throw UsageError("--mqtt-credentials: cannot read \(file)") }
        var line = text.split(separator: "\n", omittingEmptySubsequences: false).first ?? ""
        if line.hasSuffix("\r") { line = line.dropLast() }
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
            throw UsageError("--mqtt-credentials: \(file) should hold one line USERNAME:PASSWORD")
        }
        return (String(line[..<colon]), String(line[line.index(after: colon)...]))
    }

    /// The first 64 KiB of a file, or nil if it cannot be read.
    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 65536)
        let count = read(fd, &bytes, bytes.count)
        guard count >= 0 else { return nil }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }

    /// Whether a file others can read holds the password (for a warning, as ssh gives).
    static func readableByOthers(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & 0o077 != 0
    }

    // MARK: Names

    static func hostname() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }

    /// Letters, digits, `-` and `_` kept, the rest `_`: safe as one topic
    /// level and in Home Assistant ids.
    static func topicSafe(_ s: String) -> String {
        String(s.unicodeScalars.map { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") ? Character($0) : "_" })
    }
}
