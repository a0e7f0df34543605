import Bird
import Formats
import MQTT

/// The topics and payloads a gateway publishes (docs/mqtt.md, "Topics"):
///
///     <prefix>/status                 online | offline (retained; the will)
///     <prefix>/event                  events without a bird (JSON)
///     <prefix>/<ADDRESS>              the bird's state: the --json keys (retained)
///     <prefix>/<ADDRESS>/<field>      the bare value (retained)
///     <prefix>/<ADDRESS>/status       online while connected (retained)
///     <prefix>/<ADDRESS>/event        found, connected, ... as --json has them
///     homeassistant/…/config          discovery (retained)
///
/// Home Assistant ids: a bird's device is `birdctl_<address hex>` whichever
/// gateway hears it; its entities are `birdctl_<gateway>_<address hex>_<field>`,
/// so two gateways hearing one bird each own their entities (config topics
/// never collide) on the one shared device.
struct GatewayMessages {
    let prefix: String
    /// The prefix as an id: `birdctl/kitchen` → `birdctl_kitchen` (one to
    /// one, `GatewayConfiguration.gatewayID`).
    let gatewayID: String
    /// `--fleet`: a bird has one set of entities in the whole fleet, whose
    /// configs its holder publishes (pointing at its own topics).
    let fleet: FleetTopics?
    /// This run's probe payload (`GatewayMachine.Publication.probe`).
    let probeToken: String

    init(prefix: String, fleet: FleetTopics? = nil) {
        self.prefix = prefix
        gatewayID = GatewayConfiguration.gatewayID(prefix)
        self.fleet = fleet
        probeToken = String(UInt64.random(in: .min ... .max), radix: 16)
    }

    var probeTopic: String { prefix + "/probe" }

    /// Whether `message` is this run's probe, back from the broker.
    func isProbe(_ message: MQTTMessage) -> Bool {
        message.topic == probeTopic && message.payload.elementsEqual(probeToken.utf8)
    }

    var statusTopic: String { prefix + "/status" }

    /// What the machine decided to publish, as messages.
    func render(_ publication: GatewayMachine.Publication, events: ReportFormatter, version: String) -> [MQTTMessage] {
        switch publication {
        case .gatewayStatus(let online): return [gatewayStatus(online: online)]
        case .probe: return [MQTTMessage(probeTopic, probeToken, retain: false)]
        case .gatewayDiscovery: return [gatewayDiscovery(version: version)]
        case .links(let used, let limit, let adapters):
            var object = JSONObject()
            object.add("used", .integer(used))
            if let limit { object.add("limit", .integer(limit)) }
            if !adapters.isEmpty {
                var each = JSONObject()
                for adapter in adapters where AdapterPool.isAdapterName(adapter.adapter) {
                    var links = JSONObject()
                    links.add("used", .integer(adapter.used))
                    if let limit = adapter.limit { links.add("limit", .integer(limit)) }
                    each.add(adapter.adapter, .object(links))
                }
                object.add("adapters", .object(each))
            }
            return [MQTTMessage(linksTopic, object.rendered, retain: true)]
        case .linksDiscovery: return linksDiscovery(version: version)
        case .adapterLinksDiscovery(let adapter):
            return AdapterPool.isAdapterName(adapter) ? linksDiscovery(version: version, adapter: adapter) : []
        case .health(let connectFailures):
            var object = JSONObject()
            object.add("connect_failures", .integer(connectFailures))
            return [MQTTMessage(healthTopic, object.rendered, retain: true)]
        case .healthDiscovery: return [healthDiscovery(version: version)]
        case .birdStatus(let address, let online): return [birdStatus(address, online: online)]
        case .birdDiscovery(let peripheral): return birdDiscovery(peripheral, version: version)
        case .value(let address, let value): return [self.value(address, value)]
        case .state(let address, let values): return [state(address, values, time: Timestamp.iso8601())]
        case .event(let address, let report):
            let line: String? =
                if case .badValue(let peripheral, let error) = report { events.badValueLine(peripheral, error) } else { events.eventLine(report) }
            return line.map { [event(address, $0)] } ?? []
        case .dropped(let count):
            var object = events.event("dropped", nil)
            object.add("messages", .integer(count))
            return [event(nil, object.rendered)]
        case .clearing(let address): return retainedTopics(of: address).map(Self.clearing)
        }
    }

    func gatewayStatus(online: Bool) -> MQTTMessage {
        MQTTMessage(statusTopic, online ? "online" : "offline", retain: true)
    }

    func birdStatus(_ address: BluetoothAddress, online: Bool) -> MQTTMessage {
        MQTTMessage("\(prefix)/\(address)/status", online ? "online" : "offline", retain: true)
    }

    // MARK: Writes from MQTT

    /// Where commands come in: `PREFIX/ADDRESS/FIELD/set`, or in a fleet
    /// `ROOT/fleet/ADDRESS/FIELD/set` (whoever holds the bird carries it out).
    var commandFilter: String { commandRoot + "/+/+/set" }
    private var commandRoot: String { fleet.map { "\($0.root)/\(FleetTopics.shared)" } ?? prefix }

    func commandTopic(_ address: BluetoothAddress, _ field: BirdField) -> String { "\(commandRoot)/\(address)/\(field.rawValue)/set" }

    /// The bird and field a command is for, or nil for any other topic.
    func command(_ topic: String) -> (address: BluetoothAddress, field: BirdField)? {
        guard topic.hasPrefix(commandRoot + "/"), topic.hasSuffix("/set") else { return nil }
        let levels = topic.dropFirst(commandRoot.count + 1).dropLast("/set".count).split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 2, let address = BluetoothAddress(levels[0]), let field = BirdField(rawValue: String(levels[1])) else {
            return nil
        }
        return (address, field)
    }

    /// A command's result (not retained): `{"ok":true,"value":…}` or `{"ok":false,"message":…}`, and the gateway.
    func commandResult(_ address: BluetoothAddress, _ field: BirdField, _ result: GatewayCommands.Result) -> MQTTMessage {
        var object = JSONObject()
        switch result {
        case .written(let value):
            object.add("ok", .bool(true))
            object.add("value", ReportFormatter.jsonValue(value))
        case .failed(let reason):
            object.add("ok", .bool(false))
            object.add("message", reason)
        }
        object.add("gateway", prefix)
        return MQTTMessage("\(commandRoot)/\(address)/\(field.rawValue)/result", object.rendered, retain: false)
    }

    /// `PREFIX/+/status`: every bird's availability under this prefix.
    var birdStatusFilter: String { prefix + "/+/status" }

    /// The bird whose status the broker held as "online" when the gateway
    /// subscribed to `birdStatusFilter`, or nil for any other message (a
    /// topic not shaped like ours is anyone's and ignored).
    func retainedOnline(_ message: MQTTMessage) -> BluetoothAddress? {
        guard message.retain, message.payload.elementsEqual("online".utf8),
            message.topic.hasPrefix(prefix + "/"), message.topic.hasSuffix("/status")
        else { return nil }
        return Self.ourAddress(message.topic.dropFirst(prefix.count + 1).dropLast("/status".count))
    }

    /// An address level as this gateway writes it (upper case), or nil: a
    /// topic spelled otherwise is not one of ours.
    private static func ourAddress(_ level: Substring) -> BluetoothAddress? {
        guard let address = BluetoothAddress(level), address.description == level else { return nil }
        return address
    }

    /// The value as text; a name is the peer's and is escaped as on a
    /// terminal, since subscribers print payloads (`mosquitto_sub -v`).
    func value(_ address: BluetoothAddress, _ value: BirdValue) -> MQTTMessage {
        let text: String = if case .name(let name) = value { SafeText.escaped(name) } else { value.text }
        return MQTTMessage("\(prefix)/\(address)/\(value.field.rawValue)", text, retain: true)
    }

    /// The bird's latest values under the keys `--json` uses.
    func state(_ address: BluetoothAddress, _ values: [BirdField: BirdValue], time: String) -> MQTTMessage {
        var object = JSONObject()
        object.add("time", time)
        object.add("address", address)
        for field in BirdField.allCases {
            guard let value = values[field] else { continue }
            object.add(field.rawValue, ReportFormatter.jsonValue(value))
        }
        return MQTTMessage("\(prefix)/\(address)", bytes: object.renderedBytes, retain: true, snapshot: true)
    }

    /// An event line (as `--json` prints it) for the bird's event topic, or the gateway's.
    func event(_ address: BluetoothAddress?, _ json: String) -> MQTTMessage {
        MQTTMessage(address.map { "\(prefix)/\($0)/event" } ?? "\(prefix)/event", json, retain: false)
    }

    // MARK: Home Assistant discovery

    /// The gateway as a device with one connectivity sensor (its status).
    func gatewayDiscovery(version: String) -> MQTTMessage {
        var device = JSONObject()
        device.add("identifiers", .list([.string("birdctl_" + gatewayID)]))
        device.add("name", deviceName)
        device.add("model", "birdctl gateway")
        device.add("sw_version", version)
        var config = JSONObject()
        config.add("name", "Status")
        config.add("unique_id", "birdctl_" + gatewayID)
        config.add("state_topic", statusTopic)
        config.add("payload_on", "online")
        config.add("payload_off", "offline")
        config.add("device_class", "connectivity")
        config.add("device", .object(device))
        config.add("origin", .object(origin(version)))
        return MQTTMessage(gatewayDiscoveryTopic, config.rendered, retain: true)
    }

    var gatewayDiscoveryTopic: String { "homeassistant/binary_sensor/birdctl_\(gatewayID)/config" }

    /// `PREFIX/links`: `{"used":N,"limit":L}` (no limit until known).
    var linksTopic: String { prefix + "/links" }
    var healthTopic: String { prefix + "/health" }
    var healthDiscoveryTopic: String { "homeassistant/sensor/birdctl_\(gatewayID)_connect_failures/config" }

    /// The gateway's Connect failures sensor: attempts given up since it
    /// started, a diagnostic (the metrics page has them by adapter and kind).
    func healthDiscovery(version: String) -> MQTTMessage {
        var config = gatewayDiagnostic(
            "Connect failures", id: "birdctl_\(gatewayID)_connect_failures", stateTopic: healthTopic,
            valueTemplate: "{{ value_json.connect_failures if value else '' }}", icon: "mdi:link-variant-off", version: version)
        config.add("state_class", "total_increasing")
        return MQTTMessage(healthDiscoveryTopic, config.rendered, retain: true)
    }

    /// A diagnostic sensor of the gateway's device, available while the gateway is.
    private func gatewayDiagnostic(
        _ name: String, id: String, stateTopic: String, valueTemplate: String, icon: String, version: String
    ) -> JSONObject {
        var device = JSONObject()
        device.add("identifiers", .list([.string("birdctl_" + gatewayID)]))
        var config = JSONObject()
        config.add("name", name)
        config.add("unique_id", id)
        config.add("state_topic", stateTopic)
        config.add("value_template", valueTemplate)
        config.add("availability_topic", statusTopic)
        config.add("icon", icon)
        config.add("entity_category", "diagnostic")
        config.add("device", .object(device))
        config.add("origin", .object(origin(version)))
        return config
    }
    /// The links sensors' configs: links in use, and the limit (of the
    /// gateway, or with several adapters of one of them).
    func linksDiscoveryTopics(adapter: String? = nil) -> [String] {
        ["links", "link_limit"].map { "homeassistant/sensor/birdctl_\(gatewayID)_\($0)\(adapter.map { "_" + $0 } ?? "")/config" }
    }

    /// Whether `topic` is one adapter's links sensor config of this gateway's.
    func isAdapterLinksDiscoveryTopic(_ topic: String) -> Bool {
        for sensor in ["links", "link_limit"] {
            let head = "homeassistant/sensor/birdctl_\(gatewayID)_\(sensor)_"
            guard topic.hasPrefix(head), topic.hasSuffix("/config") else { continue }
            if AdapterPool.isAdapterName(String(topic.dropFirst(head.count).dropLast("/config".count))) { return true }
        }
        return false
    }

    /// Two sensors on the gateway's device: the links in use, and the
    /// adapter's limit (unknown until given or learned). No JSON attributes:
    /// the topic cleared (an empty payload) would be "Erroneous JSON".
    func linksDiscovery(version: String, adapter: String? = nil) -> [MQTTMessage] {
        // One adapter's figures sit under `adapters` in the same state.
        let path = adapter.map { "value_json.adapters.\($0)" } ?? "value_json"
        let guarded = adapter.map { " and value_json.adapters is defined and value_json.adapters.\($0) is defined" } ?? ""
        return zip(linksDiscoveryTopics(adapter: adapter), [("Links", "used"), ("Link limit", "limit")]).map { topic, sensor in
            let config = gatewayDiagnostic(
                sensor.0 + (adapter.map { " " + $0 } ?? ""),
                id: "birdctl_\(gatewayID)_" + (sensor.1 == "used" ? "links" : "link_limit") + (adapter.map { "_" + $0 } ?? ""),
                stateTopic: linksTopic,
                valueTemplate: "{{ \(path).\(sensor.1) if value\(guarded) and \(path).\(sensor.1) is defined else '' }}",
                icon: "mdi:link-variant", version: version)
            return MQTTMessage(topic, config.rendered, retain: true)
        }
    }

    /// The id of a bird's sensor for `field` from this gateway (in a fleet, the fleet's).
    func sensorID(_ address: BluetoothAddress, _ field: BirdField) -> String {
        fleet == nil
            ? "birdctl_\(gatewayID)_\(Self.hex(address))_\(field.rawValue)"
            : "birdctl_\(Self.hex(address))_\(field.rawValue)"
    }

    /// The address without its colons (`F00DB17D0001`), as the ids have it.
    static func hex(_ address: BluetoothAddress) -> String { address.hexDigits }

    /// `--fleet`: the id of the bird's Gateway sensor (which room holds it).
    func holderSensorID(_ address: BluetoothAddress) -> String { "birdctl_\(Self.hex(address))_holder"
    }

    func sensorTopic(_ id: String) -> String { "homeassistant/sensor/\(id)/config" }

    /// Where this gateway's sensors' and controls' configs are (every one of any bird).
    static let birdDiscoveryFilters = ["homeassistant/sensor/+/config", "homeassistant/number/+/config", "homeassistant/text/+/config"]

    /// The bird whose sensor or control config of this gateway is at `topic`, or nil.
    func birdOfSensorConfig(_ topic: String) -> BluetoothAddress? {
        guard topic.hasSuffix("/config"),
            let kind = ["sensor", "number", "text"].first(where: { topic.hasPrefix("homeassistant/\($0)/birdctl_\(gatewayID)_") })
        else { return nil }
        let head = "homeassistant/\(kind)/birdctl_\(gatewayID)_"
        var id = topic.dropFirst(head.count).dropLast("/config".count)
        if kind != "sensor" {
            guard id.hasSuffix("_set") else { return nil }
            id = id.dropLast("_set".count)
        }
        guard id.count > 13, let underscore = id.firstIndex(of: "_"), id.distance(from: id.startIndex, to: underscore) == 12
        else { return nil }
        let sensor = String(id[id.index(after: underscore)...])
        guard BirdField(rawValue: sensor) != nil || (kind == "sensor" && sensor == "last_reading") else { return nil }
        let hex = id[..<underscore]
        guard hex.allSatisfy({ $0.isASCII && $0.isHexDigit }), let value = UInt64(hex, radix: 16) else { return nil }
        return BluetoothAddress(value: value)
    }

    /// The bird a topic under the prefix belongs to (`PREFIX/ADDRESS`,
    /// `PREFIX/ADDRESS/…`), or nil.
    func birdOfTopic(_ topic: String) -> BluetoothAddress? {
        guard topic.hasPrefix(prefix + "/") else { return nil }
        let level = topic.dropFirst(prefix.count + 1).prefix { $0 != "/" }
        return Self.ourAddress(level)
    }

    /// What this gateway publishes retained about a bird (its values, state
    /// and status) and its sensors' discovery configs: what forgetting it clears.
    func retainedTopics(of address: BluetoothAddress) -> [String] {
        // In a fleet the sensors are the fleet's: another gateway may hold the bird now.
        ["\(prefix)/\(address)"] + BirdField.allCases.map { "\(prefix)/\(address)/\($0.rawValue)" }
            + ["\(prefix)/\(address)/status"]
            + (fleet == nil
                ? BirdField.allCases.map { sensorTopic(sensorID(address, $0)) } + [sensorTopic(lastReadingSensorID(address))]
                    + controlTopics(address)
                : [])
    }

    /// `--fleet`: the configs of the bird's sensors and controls (the fleet's), which its holder publishes.
    func sharedDiscoveryTopics(of address: BluetoothAddress) -> [String] {
        guard fleet != nil else { return [] }
        return (BirdField.allCases.map { sensorID(address, $0) } + [lastReadingSensorID(address), holderSensorID(address)])
            .map(sensorTopic) + controlTopics(address)
    }

    /// The configs of the bird's controls (one per field).
    private func controlTopics(_ address: BluetoothAddress) -> [String] {
        BirdField.allCases.map { "homeassistant/\(Self.controlKind($0))/\(sensorID(address, $0))_set/config" }
    }

    /// A `number` in % for alpha; `text` for the name and the colour (a
    /// light's RGB would make a bird a lamp in Home Assistant's eyes).
    static func controlKind(_ field: BirdField) -> String { field == .alpha ? "number" : "text" }

    /// Of the retained `topics` (under the prefix and the discovery configs),
    /// this gateway's: all of them, or only those of `onlyBirds`.
    func topicsToClear(_ topics: [String], onlyBirds birds: Set<BluetoothAddress>?) -> [String] {
        topics.filter { topic in
            let bird = birdOfTopic(topic) ?? birdOfSensorConfig(topic)
            guard let birds else {
                // Not all of PREFIX/#: a gateway may have a prefix under ours.
                return bird != nil
                    || ([statusTopic, gatewayDiscoveryTopic, linksTopic, healthTopic, healthDiscoveryTopic] + linksDiscoveryTopics())
                        .contains(topic)
                    || isAdapterLinksDiscoveryTopic(topic)
            }
            return bird.map(birds.contains) ?? false
        }
    }

    /// An empty retained message: the broker forgets the topic's retained
    /// message, and Home Assistant a discovery config.
    static func clearing(_ topic: String) -> MQTTMessage { MQTTMessage(topic, bytes: [], retain: true) }

    /// `birdctl kitchen` for the default prefix `birdctl/kitchen`, else
    /// `birdctl PREFIX` (Home Assistant shows "birdctl kitchen Status").
    var deviceName: String { "birdctl " + gatewayLabel }

    /// `kitchen` for the prefix `birdctl/kitchen`, else the prefix.
    private var gatewayLabel: String {
        prefix.hasPrefix("birdctl/") ? String(prefix.dropFirst("birdctl/".count)) : prefix
    }

    /// The name of a bird's entity: without `--fleet` each gateway that
    /// hears the bird has its own entities on the bird's one device, so each
    /// carries the gateway's name ("Robin Alpha kitchen", not "Robin Alpha" twice).
    func entityName(_ name: String) -> String { fleet == nil ? name + " " + gatewayLabel : name }

}

extension String {
    var withInitialCapital: String { prefix(1).uppercased() + dropFirst() }
}
