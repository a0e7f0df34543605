import MQTT

/// What a gateway is told to do (`watch --mqtt` and its companion options,
/// parsed by the command line): the broker, the topic prefix, discovery, the
/// fleet.
public struct GatewayConfiguration: Sendable {
    public var settings: MQTTSettings
    /// `birdctl/<hostname>` unless the URL has a path.
    public var prefix: String
    /// Home Assistant discovery configs (`--no-discovery` says no).
    public var discovery: Bool
    /// `--fleet`: the gateways under the prefix's parent (ROOT) share the
    /// birds; this one is the prefix's last level (ROOM).
    public var fleet: FleetOwnership.Configuration?
    public var fleetRoot: String?
    /// How long a write from MQTT waits for its bird.
    public var writeTimeToLive: Duration
    /// Where the broker is, for messages (`mqtt://host:port`).
    public var brokerDescription: String
    /// birdctl's version, for Home Assistant's device registry.
    public var version: String

    public init(
        settings: MQTTSettings, prefix: String, discovery: Bool = true, fleet: FleetOwnership.Configuration? = nil,
        fleetRoot: String? = nil, writeTimeToLive: Duration = .seconds(60), brokerDescription: String, version: String
    ) {
        self.settings = settings
        self.prefix = prefix
        self.discovery = discovery
        self.fleet = fleet
        self.fleetRoot = fleetRoot
        self.writeTimeToLive = writeTimeToLive
        self.brokerDescription = brokerDescription
        self.version = version
    }

    /// The prefix as an id (the client id's and Home Assistant's), one to one:
    /// letters, digits and `-` kept, `/` as `_`, any other byte as `__` and two
    /// hex digits (`a/b` → `a_b`, `a_b` → `a__5fb`). A prefix has no empty
    /// level, so `//` never happens and `__` always starts a byte: two prefixes
    /// never share an id, and so never a client id (a broker disconnects the
    /// older of two clients with the same id: two gateways would take turns).
    public static func gatewayID(_ prefix: String) -> String {
        var id = ""
        for byte in prefix.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"):
                id.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/"): id += "_"
            default:
                let hex = Array("0123456789abcdef".unicodeScalars)
                id += "__"
                id.unicodeScalars.append(hex[Int(byte >> 4)])
                id.unicodeScalars.append(hex[Int(byte & 15)])
            }
        }
        return id
    }
}
