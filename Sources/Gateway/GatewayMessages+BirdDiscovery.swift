import Bird
import Formats
import MQTT

/// A bird's Home Assistant discovery: its sensors, its controls, its last
/// reading, and with `--fleet` the gateway that holds it and how well each hears it.
extension GatewayMessages {
    /// One sensor per field, on the bird's device, available while both the
    /// gateway and the bird are online.
    func birdDiscovery(_ peripheral: BirdCentral.Peripheral, version: String) -> [MQTTMessage] {
        let address = peripheral.address
        let hex = Self.hex(address)
        var device = JSONObject()
        device.add("identifiers", .list([.string("birdctl_" + hex)]))
        device.add("connections", .list([.list([.string("mac"), .string(address.description.lowercased())])]))
        device.add("name", peripheral.name.map(SafeText.escaped) ?? address.description)
        device.add("manufacturer", "Bird")
        device.add("model", "Bird Service peripheral")
        device.add("via_device", "birdctl_" + gatewayID)
        let sensors = BirdField.allCases.map { field -> MQTTMessage in
            let id = sensorID(address, field)
            var config = JSONObject()
            config.add("name", entityName(field.rawValue.withInitialCapital))
            config.add("unique_id", id)
            config.add("state_topic", "\(prefix)/\(address)/\(field.rawValue)")
            config.add("availability", .array([topic(statusTopic), topic("\(prefix)/\(address)/status")]))
            config.add("availability_mode", "all")
            switch field {
            case .name: config.add("icon", "mdi:bird")
            case .color: config.add("icon", "mdi:palette")
            case .alpha:
                config.add("icon", "mdi:circle-opacity")
                config.add("state_class", "measurement")
                config.add("unit_of_measurement", "%")
                config.add("value_template", Self.alphaInPercent)
            }
            config.add("device", .object(device))
            config.add("origin", .object(origin(version)))
            return MQTTMessage(sensorTopic(id), config.rendered, retain: true)
        }
        let controls = BirdField.allCases.map { controlDiscovery(address, $0, device: device, version: version) }
        let holder = fleet.map { [holderDiscovery(address, device: device, fleet: $0, version: version)] } ?? []
        return sensors + [lastReadingDiscovery(address, device: device, version: version)] + controls + holder
    }

    /// When the bird was last read, from its state's `time`: Home Assistant
    /// shows the reading's age ("2 minutes ago"), a diagnostic of the bird.
    private func lastReadingDiscovery(_ address: BluetoothAddress, device: JSONObject, version: String) -> MQTTMessage {
        let id = lastReadingSensorID(address)
        var config = JSONObject()
        config.add("name", entityName("Last reading"))
        config.add("unique_id", id)
        config.add("state_topic", "\(prefix)/\(address)")
        // Home Assistant 2024.3 takes neither '' nor None for a timestamp, and
        // logs a template that fails: an empty payload (the state cleared as
        // the bird is forgotten, its entities with it) keeps the time shown.
        config.add(
            "value_template",
            "{{ value_json.time if value else this.state if this.state is match('[0-9]{4}-') else '1970-01-01T00:00:00+00:00' }}")
        config.add("device_class", "timestamp")
        config.add("entity_category", "diagnostic")
        config.add("availability", .array([topic(statusTopic), topic("\(prefix)/\(address)/status")]))
        config.add("availability_mode", "all")
        config.add("device", .object(device))
        config.add("origin", .object(origin(version)))
        return MQTTMessage(sensorTopic(id), config.rendered, retain: true)
    }

    /// The id of a bird's Last reading sensor (like a field's, `last_reading` in the field's place).
    func lastReadingSensorID(_ address: BluetoothAddress) -> String {
        fleet == nil ? "birdctl_\(gatewayID)_\(Self.hex(address))_last_reading" : "birdctl_\(Self.hex(address))_last_reading"
    }

    /// Alpha's topic has the fraction `--json` has (0.8); people read 80 %.
    /// An empty payload (the topic cleared) is no state, not a template error.
    private static let alphaInPercent = "{{ (value | float * 100) | round(0) | int if value else '' }}"

    /// A control that writes the field through MQTT, available like the sensors.
    private func controlDiscovery(_ address: BluetoothAddress, _ field: BirdField, device: JSONObject, version: String) -> MQTTMessage {
        let id = sensorID(address, field) + "_set"
        var config = JSONObject()
        config.add("name", entityName("Set " + field.rawValue))
        config.add("unique_id", id)
        config.add("command_topic", commandTopic(address, field))
        config.add("state_topic", "\(prefix)/\(address)/\(field.rawValue)")
        config.add("availability", .array([topic(statusTopic), topic("\(prefix)/\(address)/status")]))
        config.add("availability_mode", "all")
        switch field {
        case .alpha:
            config.add("min", .integer(0))
            config.add("max", .integer(100))
            config.add("step", .integer(1))
            config.add("mode", "slider")
            config.add("unit_of_measurement", "%")
            config.add("value_template", Self.alphaInPercent)
            config.add("command_template", "{{ value | int }}")
        case .name:
            config.add("max", .integer(Sighting.maximumNameBytes))
        case .color:
            config.add("pattern", "^#?[0-9A-Fa-f]{6}([0-9A-Fa-f]{2})?$")
        }
        config.add("device", .object(device))
        config.add("origin", .object(origin(version)))
        return MQTTMessage("homeassistant/\(Self.controlKind(field))/\(id)/config", config.rendered, retain: true)
    }

    /// `--fleet`: which gateway (room) holds the bird, as a sensor of the bird.
    private func holderDiscovery(_ address: BluetoothAddress, device: JSONObject, fleet: FleetTopics, version: String) -> MQTTMessage {
        let id = holderSensorID(address)
        var config = JSONObject()
        config.add("name", "Gateway")
        config.add("unique_id", id)
        config.add("state_topic", fleet.holderTopic(address))
        config.add("icon", "mdi:router-wireless")
        config.add("device", .object(device))
        config.add("origin", .object(origin(version)))
        return MQTTMessage(sensorTopic(id), config.rendered, retain: true)
    }

    /// `--fleet`: how loud this gateway hears a bird of the fleet, as a
    /// sensor of the bird's device (available while the gateway is online).
    func hearingDiscovery(_ address: BluetoothAddress, fleet: FleetTopics, version: String) -> MQTTMessage {
        let hex = Self.hex(address)
        let id = "birdctl_\(gatewayID)_\(hex)_rssi"
        var device = JSONObject()
        device.add("identifiers", .list([.string("birdctl_" + hex)]))
        var config = JSONObject()
        config.add("name", "RSSI \(fleet.room)")
        config.add("unique_id", id)
        config.add("state_topic", fleet.heardTopic(address))
        config.add("availability_topic", statusTopic)
        config.add("device_class", "signal_strength")
        config.add("unit_of_measurement", "dBm")
        config.add("state_class", "measurement")
        config.add("entity_category", "diagnostic")
        config.add("device", .object(device))
        config.add("origin", .object(origin(version)))
        return MQTTMessage(sensorTopic(id), config.rendered, retain: true)
    }

    private func topic(_ name: String) -> JSONObject {
        var object = JSONObject()
        object.add("topic", name)
        return object
    }

    func origin(_ version: String) -> JSONObject {
        var origin = JSONObject()
        origin.add("name", "birdctl")
        origin.add("sw_version", version)
        return origin
    }
}
