import Bird
import MQTT

/// The topics and payloads a gateway publishes (README, "MQTT"):
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
    /// The prefix as an id: `birdctl/kitchen` → `birdctl_kitchen`.
    let gatewayID: String

    init(prefix: String) {
        self.prefix = prefix
        gatewayID = GatewayOptions.topicSafe(prefix.replacingAll("/", with: "_"))
    }

    var statusTopic: String { prefix + "/status" }

    func gatewayStatus(online: Bool) -> MQTTMessage {
        MQTTMessage(statusTopic, online ? "online" : "offline", retain: true)
    }

    func birdStatus(_ address: String, online: Bool) -> MQTTMessage {
        MQTTMessage("\(prefix)/\(address)/status", online ? "online" : "offline", retain: true)
    }

    /// `PREFIX/+/status`: every bird's availability under this prefix.
    var birdStatusFilter: String { prefix + "/+/status" }

    /// The bird whose status the broker held as "online" when the gateway
    /// subscribed to `birdStatusFilter`, or nil for any other message (a
    /// topic not shaped like ours is anyone's and ignored).
    func retainedOnline(_ message: MQTTMessage) -> String? {
        guard message.retain, message.payload.elementsEqual("online".utf8),
            message.topic.hasPrefix(prefix + "/"), message.topic.hasSuffix("/status")
        else { return nil }
        let address = String(message.topic.dropFirst(prefix.count + 1).dropLast("/status".count))
        return Arguments.isAddress(address) ? address : nil
    }

    /// The value as text; a name is the peer's and is escaped as on a
    /// terminal, since subscribers print payloads (`mosquitto_sub -v`).
    func value(_ address: String, _ value: BirdValue) -> MQTTMessage {
        let text: String = if case .name(let name) = value { SafeText.escaped(name) } else { value.text }
        return MQTTMessage("\(prefix)/\(address)/\(value.field.rawValue)", text, retain: true)
    }

    /// The bird's latest values under the keys `--json` uses.
    func state(_ address: String, _ values: [BirdField: BirdValue], time: String) -> MQTTMessage {
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
    func event(_ address: String?, _ json: String) -> MQTTMessage {
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
        return MQTTMessage("homeassistant/binary_sensor/birdctl_\(gatewayID)/config", config.rendered, retain: true)
    }

    /// `birdctl kitchen` for the default prefix `birdctl/kitchen`, else
    /// `birdctl PREFIX` (Home Assistant shows "birdctl kitchen Status").
    var deviceName: String {
        "birdctl " + (prefix.hasPrefix("birdctl/") ? String(prefix.dropFirst("birdctl/".count)) : prefix)
    }

    /// One sensor per field, on the bird's device, available while both the
    /// gateway and the bird are online.
    func birdDiscovery(_ peripheral: BirdCentral.Peripheral, version: String) -> [MQTTMessage] {
        let address = peripheral.address
        let hex = address.filter { $0 != ":" }
        var device = JSONObject()
        device.add("identifiers", .list([.string("birdctl_" + hex)]))
        device.add("connections", .list([.list([.string("mac"), .string(address.lowercased())])]))
        device.add("name", peripheral.name.map(SafeText.escaped) ?? address)
        device.add("manufacturer", "Bird")
        device.add("model", "Bird Service peripheral")
        device.add("via_device", "birdctl_" + gatewayID)
        return BirdField.allCases.map { field in
            let id = "birdctl_\(gatewayID)_\(hex)_\(field.rawValue)"
            var config = JSONObject()
            config.add("name", field.rawValue.capitalized)
            config.add("unique_id", id)
            config.add("state_topic", "\(prefix)/\(address)/\(field.rawValue)")
            config.add("availability", .array([topic(statusTopic), topic("\(prefix)/\(address)/status")]))
            config.add("availability_mode", "all")
            switch field {
            case .name: config.add("icon", "mdi:bird")
            case .color: config.add("icon", "mdi:palette")
            case .alpha:
                // The topic has the fraction `--json` has (0.8); people read 80 %.
                config.add("icon", "mdi:circle-opacity")
                config.add("state_class", "measurement")
                config.add("unit_of_measurement", "%")
                config.add("value_template", "{{ (value | float * 100) | round(0) | int }}")
            }
            config.add("device", .object(device))
            config.add("origin", .object(origin(version)))
            return MQTTMessage("homeassistant/sensor/\(id)/config", config.rendered, retain: true)
        }
    }

    private func topic(_ name: String) -> JSONObject {
        var object = JSONObject()
        object.add("topic", name)
        return object
    }

    private func origin(_ version: String) -> JSONObject {
        var origin = JSONObject()
        origin.add("name", "birdctl")
        origin.add("sw_version", version)
        return origin
    }
}

private extension String {
    var capitalized: String { prefix(1).uppercased() + dropFirst() }
}
