import Bird
import MQTT
import Gateway

/// Every option of every command. A default that is the Bird layer's (or
/// MQTT's) is read from there, so the machine, `--help` and the man page
/// cannot disagree.
extension Option {
    /// `BirdCentral.Configuration`'s defaults, as the Bird layer declares them.
    static let birdDefaults = BirdCentral.Configuration(mode: .read)

    static let adapter = Option(
        "--adapter", "use this adapter (one: several only with watch --all and scan)", .adapter, fallback: "the first powered one")
    /// `watch --all` and `scan`: several adapters as one pool (docs/scheduling.md).
    static let adapters = Option(
        "--adapter",
        "use this adapter; several separated by commas, or all (every adapter, those added later too), as one pool:"
            + " scan listens on each, watch --all connects each bird through the one that hears it best (with --all only)",
        .adapter, fallback: "the first powered one")
    static let powerOn = Option("--power-on", "power the adapter on if it is off")
    /// `read`, `set`, `pair`: how long to look for the bird.
    static let timeout = Option(
        "--timeout", "seconds to look for a Bird", .seconds(default: birdDefaults.scanTimeout, none: "no limit"))
    static let scanTimeout = Option(
        "--timeout", "seconds to scan", .seconds(default: birdDefaults.scanTimeout, none: "until Ctrl-C"))
    static let watchTimeout = Option(
        "--timeout", "seconds to look for a Bird at first", .seconds(default: nil, none: "no limit"))
    static let connectTimeout = Option(
        "--connect-timeout", "deadline to connect, retries included",
        .seconds(default: birdDefaults.connectTimeout))
    static let minimumRSSI = Option(
        "--min-rssi", "only Birds heard at least this strong", .integer(label: "DBM", range: -127...20))
    static let forgetAfter = Option(
        "--forget-after", "forget a Bird neither heard nor connected for S seconds; heard again, it is reported again",
        .seconds(default: BirdFleet.defaultForgetAfter, minimum: .milliseconds(100)))
    static let json = Option("--json", "JSON Lines on stdout, one object per line")
    static let verbose = Option("--verbose", "show events and the D-Bus traffic on stderr")
    static let help = Option("--help", "show this help (also -h)")

    static let noPair = Option("--no-pair", "exit 10 instead of pairing when the bird asks for security")
    static let confirmPairing = Option(
        "--confirm-pairing", "ask on the terminal to confirm a pairing's passkey", fallback: "Just Works, no questions")
    static let pairWith = Option(
        "--pair-with",
        "birds that may be paired (bonded) with when they ask; besides these, only the ADDRESS given and birds already bonded are",
        .addresses, fallback: "none, so --all never bonds with a stranger")
    static let pairTimeout = Option(
        "--pair-timeout", "deadline to pair, a person's answer included", .seconds(default: birdDefaults.pairTimeout))
    static let hold = Option("--hold", "with --all: birds always held (a link kept, notifications streamed)", .addresses, fallback: "none")
    static let poll = Option(
        "--poll", "with --all: birds always polled (connect, read, disconnect, every --poll-interval)", .addresses, fallback: "none")
    static let policy = Option(
        "--policy", "with --all, the other birds",
        .choice(LinkPolicy.Default.allCases.map { Choice(name: $0.rawValue, help: explanation($0)) }, default: LinkPolicy().otherBirds.rawValue))

    private static func explanation(_ policy: LinkPolicy.Default) -> String {
        switch policy {
        case .auto: "held while the adapter has links for all; then one link is kept for the rest, which are polled"
        case .held: "held, each waiting for a free link"
        case .polled: "polled, sharing the links in turn"
        }
    }

    static let pollInterval = Option(
        "--poll-interval", "with --all: seconds between polls of a polled bird",
        .seconds(default: LinkPolicy.defaultPollInterval, minimum: .milliseconds(100)))
    static let links = Option(
        "--links", "with --all: the adapter's link limit (with several adapters, each one's), never exceeded", .integer(label: "N", range: 1...64),
        fallback: "learned from connections that never come")
    static let quietAfter = Option(
        "--quiet-after",
        "probe a held bird with a read after N of its usual gaps between notifications without one; no answer ends the link (0: never)",
        .integer(label: "N", range: 0...1000, default: birdDefaults.quietAfter))
    static let discoveryWatchdog = Option(
        "--discovery-watchdog",
        "with --all: restart an adapter's discovery when it hears no Bird for S seconds while one is looked for;"
            + " nothing after that either: said, and the adapter powered off and on if it holds no link (docs/guide.md, Health)",
        .seconds(default: BirdFleet.defaultDiscoveryWatchdog, none: "never", minimum: .seconds(1)))
    static let count = Option("--count", "stop after N readings", .integer(label: "N", range: 1...Int.max))
    static let duration = Option("--duration", "stop after S seconds", .seconds(default: nil, none: "no limit"))
    static let all = Option("--all", "follow every Bird in range; every line carries the address")
    static let noReconnect = Option("--no-reconnect", "exit 7 when the link is lost instead of reconnecting")
    static let notifyMethod = Option(
        "--notify-method", "how notifications arrive",
        .choice(NotifyMethod.allCases.map { Choice(name: $0.rawValue, help: explanation($0)) }, default: birdDefaults.notifyMethod.rawValue))

    private static func explanation(_ method: NotifyMethod) -> String {
        switch method {
        case .auto: "a socket from bluetoothd (AcquireNotify) where offered, else signals (StartNotify)"
        case .acquire: "the socket only"
        case .start: "signals only, which other clients of the bird can share"
        }
    }

    static let quiet = Option("--quiet", "print no readings or events (errors still go to stderr); with --mqtt")

    static let stateDirectory = Option(
        "--state-dir", "with --all: keep what was learned (link limits, the birds followed) in DIR across restarts",
        .text(label: "DIR", completion: .file), fallback: "$STATE_DIRECTORY (systemd's StateDirectory=), else nothing kept")
    static let metrics = Option(
        "--metrics", "serve health metrics (Prometheus text format) at http://[ADDRESS:]PORT/metrics",
        .text(label: "[ADDRESS:]PORT"), fallback: "not served; ADDRESS defaults to every address of the machine")
    static let proxy = Option(
        "--proxy", "with --all: also be a Bluetooth proxy Home Assistant adopts (the ESPHome native API) at [ADDRESS:]PORT",
        .text(label: "[ADDRESS:]PORT"), fallback: "not served; ESPHome's port is 6053, ADDRESS defaults to every address")
    static let proxyKey = Option(
        "--proxy-key", "the proxy's encryption key, as Home Assistant asks for it: 32 bytes in base64 (head -c32 /dev/urandom | base64)",
        .text(label: "FILE", completion: .file))
    static let proxyPlaintext = Option(
        "--proxy-plaintext", "serve the proxy unencrypted on a network address: anyone who reaches the port can use your Bluetooth")
    static let mqtt = Option(
        "--mqtt", "also publish to this MQTT broker: mqtt[s]://HOST[:PORT][/PREFIX]", .text(label: "URL"))
    /// `retire`'s: the same option, what it names there.
    static let retireMQTT = Option(
        "--mqtt", "the broker and prefix of the gateway to clear: mqtt[s]://HOST[:PORT][/PREFIX]", .text(label: "URL"))
    static let mqttCredentials = Option(
        "--mqtt-credentials", "the broker's USERNAME:PASSWORD, one line (never on the command line)",
        .text(label: "FILE", completion: .file))
    static let mqttCA = Option(
        "--mqtt-ca", "CA certificate(s) the broker's TLS certificate must chain to (mqtts://)", .text(label: "FILE", completion: .file))
    static let mqttCertificate = Option(
        "--mqtt-cert", "a client certificate for brokers that ask for one", .text(label: "FILE", completion: .file))
    static let mqttKey = Option(
        "--mqtt-key", "the client certificate's key", .text(label: "FILE", completion: .file), fallback: "in --mqtt-cert")
    static let mqttBuffer = Option(
        "--mqtt-buffer", "messages kept while the broker is away, the oldest dropped beyond",
        .integer(label: "N", range: 1...10_000_000, default: MQTTSettings.defaultBufferCapacity))
    static let mqttBufferBytes = Option(
        "--mqtt-buffer-bytes", "the same bound in bytes, topic + payload + 64 each",
        .integer(label: "N", range: 4096...(1 << 40), default: MQTTSettings.defaultBufferByteCapacity, inBytes: true))
    static let noDiscovery = Option("--no-discovery", "publish no Home Assistant discovery configs")
    static let mqttWriteTTL = Option(
        "--mqtt-write-ttl", "how long a write from MQTT (PREFIX/ADDRESS/FIELD/set) waits for its bird to be connected",
        .seconds(default: GatewayCommands.Configuration().timeToLive, minimum: .milliseconds(100)))
    /// `FleetOwnership`'s defaults, as the Gateway layer declares them.
    static let fleetDefaults = FleetOwnership.Configuration(room: "")
    static let fleet = Option(
        "--fleet",
        "share the birds with the other gateways whose prefix has the same parent (ROOT/ROOM): each bird is connected by the one that hears it best")
    static let fleetMargin = Option(
        "--fleet-margin", "how much louder another gateway must hear a held bird to take it over",
        .integer(label: "DB", range: 1...60, default: fleetDefaults.margin))
    static let fleetDwell = Option(
        "--fleet-dwell", "for how long it must hear it that much louder",
        .seconds(default: fleetDefaults.dwell))

    static let name = Option("--name", "the name served and advertised", .birdValue(.name, default: "Robin"))
    static let color = Option("--color", "the colour served", .birdValue(.color, default: "#FF8800"))
    static let alpha = Option("--alpha", "the alpha served, in percent", .birdValue(.alpha, default: "80"))
    static let animate = Option("--animate", "change alpha and colour every second")
}
