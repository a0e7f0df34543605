import MQTT

/// One command-line option, declared once: the parser, `--help`, the man page
/// and the shell completions all read it from here. A command may word the
/// help for itself (`explained`), never the name or the value.
struct Option: Hashable, Sendable {
    /// `--timeout`.
    let name: String
    /// What the value is called in help (`S`); nil for a flag.
    let value: String?
    let help: String
    /// What a shell offers for the value.
    let completion: Completion

    enum Completion: Hashable, Sendable {
        case none
        /// Bluetooth adapters on this machine (`hci0`, …).
        case adapter
        /// A file name.
        case file
    }

    init(_ name: String, value: String? = nil, _ help: String, completion: Completion = .none) {
        self.name = name
        self.value = value
        self.help = help
        self.completion = completion
    }

    var takesValue: Bool { value != nil }

    /// The same option, with help worded for one command.
    func explained(_ help: String) -> Option {
        Option(name, value: value, help, completion: completion)
    }

    static func == (a: Option, b: Option) -> Bool { a.name == b.name }
    func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

extension Option {
    static let adapter = Option(
        "--adapter", value: "hciN", "use this adapter (default: the first powered one)", completion: .adapter)
    static let powerOn = Option("--power-on", "power the adapter on if it is off")
    static let timeout = Option("--timeout", value: "S", "seconds to look for a Bird (default 10; 0 = no limit)")
    static let connectTimeout = Option(
        "--connect-timeout", value: "S", "deadline to connect, retries included (default 10 s)")
    static let minimumRSSI = Option("--min-rssi", value: "DBM", "only Birds heard at least this strong (-127 to 20)")
    static let forgetAfter = Option(
        "--forget-after", value: "S",
        "forget a Bird neither heard nor connected for S seconds; heard again, it is reported again (default 600)")
    static let json = Option("--json", "JSON Lines on stdout, one object per line")
    static let verbose = Option("--verbose", "show events and the D-Bus traffic on stderr")
    static let help = Option("--help", "show this help (also -h)")

    static let noPair = Option("--no-pair", "exit 10 instead of pairing when the bird asks for security")
    static let confirmPairing = Option(
        "--confirm-pairing", "ask on the terminal to confirm a pairing's passkey (default: Just Works, no questions)")
    static let pairWith = Option(
        "--pair-with", value: "ADDRESS[,ADDRESS...]",
        "birds that may be paired (bonded) with when they ask; besides these, only the ADDRESS given and birds "
            + "already bonded are (default: none, so --all never bonds with a stranger)")
    static let pairTimeout = Option("--pair-timeout", value: "S", "deadline to pair, a person's answer included (default 30 s)")
    static let count = Option("--count", value: "N", "stop after N readings")
    static let duration = Option("--duration", value: "S", "stop after S seconds")
    static let all = Option("--all", "follow every Bird in range; every line carries the address")
    static let noReconnect = Option("--no-reconnect", "exit 7 when the link is lost instead of reconnecting")
    static let notifyMethod = Option(
        "--notify-method", value: "auto|acquire|start",
        "auto (default): a socket from bluetoothd (AcquireNotify) where offered, else signals (StartNotify); "
            + "acquire: the socket only; start: signals only, which other clients of the bird can share")

    static let quiet = Option("--quiet", "print no readings or events (errors still go to stderr); with --mqtt")

    static let mqtt = Option(
        "--mqtt", value: "URL", "also publish to this MQTT broker: mqtt[s]://HOST[:PORT][/PREFIX]")
    static let mqttCredentials = Option(
        "--mqtt-credentials", value: "FILE", "the broker's USERNAME:PASSWORD, one line (never on the command line)",
        completion: .file)
    static let mqttCA = Option(
        "--mqtt-ca", value: "FILE", "CA certificate(s) the broker's TLS certificate must chain to (mqtts://)",
        completion: .file)
    static let mqttCertificate = Option(
        "--mqtt-cert", value: "FILE", "a client certificate for brokers that ask for one", completion: .file)
    static let mqttKey = Option("--mqtt-key", value: "FILE", "the client certificate's key (default: in --mqtt-cert)", completion: .file)
    static let mqttBuffer = Option(
        "--mqtt-buffer", value: "N", "messages kept while the broker is away, the oldest dropped beyond (default 50000)")
    static let mqttBufferBytes = Option(
        "--mqtt-buffer-bytes", value: "N",
        "the same bound in bytes, topic + payload + 64 each (default \(MQTTSettings.defaultBufferByteCapacity >> 20) MiB)")
    static let noDiscovery = Option("--no-discovery", "publish no Home Assistant discovery configs")

    static let name = Option("--name", value: "NAME", "the name served and advertised (default Robin)")
    static let color = Option("--color", value: "#RRGGBB", "the colour served (default #FF8800)")
    static let alpha = Option("--alpha", value: "0-100", "the alpha served, in percent (default 80)")
    static let animate = Option("--animate", "change alpha and colour every second")
}
