import Bird
import DBus
import MQTT
import Testing
@testable import Formats
@testable import Gateway

@Suite("MQTT gateway: topics and payloads")
struct GatewayMessagesTests {
    /// What the broker says of the fleet is anyone's: only what is shaped like ours counts.
    @Test(arguments: [
        ("house/kitchen/status", "online", FleetTopics.Received.gatewayStatus(room: "kitchen", online: true)),
        ("house/kitchen/status", "", .gatewayStatus(room: "kitchen", online: false)),
        ("house/fleet/F0:0D:B1:7D:00:01/holder", "garden", .holder(address: "F0:0D:B1:7D:00:01", room: "garden")),
        ("house/fleet/f0:0d:b1:7d:00:01/holder", "", .holder(address: "F0:0D:B1:7D:00:01", room: nil)),
        ("house/fleet/F0:0D:B1:7D:00:01/heard/hall", "-61", .heard(address: "F0:0D:B1:7D:00:01", room: "hall", rssi: -61)),
        ("house/fleet/F0:0D:B1:7D:00:01/heard/hall", "", .heard(address: "F0:0D:B1:7D:00:01", room: "hall", rssi: nil)),
    ] as [(String, String, FleetTopics.Received)])
    func fleetMessages(_ topic: String, _ payload: String, _ expected: FleetTopics.Received) {
        let topics = FleetTopics(root: "house", room: "kitchen")
        #expect(topics.parse(MQTTMessage(topic, payload, retain: true)) == expected)
    }

    @Test(arguments: [
        ("house/fleet/F0:0D:B1:7D:00:01/heard/hall", "-300"),  // out of range
        ("house/fleet/F0:0D:B1:7D:00:01/heard/hall", "loud"),
        ("house/fleet/F0:0D:B1:7D:00:01/holder", "a/b"),  // no room
        ("house/fleet/F0:0D:B1:7D:00:01/holder", String(repeating: "x", count: 65)),
        ("house/fleet/not-an-address/holder", "hall"),
        ("house/fleet/status", "online"),
        ("other/kitchen/status", "online"),
        ("house/kitchen/F0:0D:B1:7D:00:01/status", "online"),
    ])
    func foreignFleetMessagesAreIgnored(_ topic: String, _ payload: String) {
        #expect(FleetTopics(root: "house", room: "kitchen").parse(MQTTMessage(topic, payload, retain: true)) == nil)
    }

    @Test func aPeersNameIsEscapedInTheValueAndQuotedInTheState() throws {
        let messages = GatewayMessages(prefix: "birdctl/host")
        let name = BirdValue.name("Ev\u{1B}]0;pwned\u{07}il")
        let value = messages.value("F0:0D:B1:7D:00:01", name)
        #expect(value.topic == "birdctl/host/F0:0D:B1:7D:00:01/name")
        #expect(String(decoding: value.payload, as: UTF8.self) == "Ev\\x1b]0;pwned\\x07il")
        let state = messages.state("F0:0D:B1:7D:00:01", [.name: name, .alpha: .alpha(percent: 5)], time: "T")
        #expect(String(decoding: state.payload, as: UTF8.self)
            == #"{"time":"T","address":"F0:0D:B1:7D:00:01","name":"Ev\u001b]0;pwned\u0007il","alpha":0.05}"#)
        #expect(state.retain && value.retain)
    }

    @Test func alphaIsAPercentageForHomeAssistantAndDevicesHaveCleanNames() throws {
        let robin = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01", address: "F0:0D:B1:7D:00:01", name: "Robin")
        let messages = GatewayMessages(prefix: "birdctl/kitchen")
        let configs = messages.birdDiscovery(robin, version: "1")
        let alpha = try #require(configs.first { $0.topic.hasSuffix("_alpha/config") })
        let text = String(decoding: alpha.payload, as: UTF8.self)
        #expect(text.contains(#""unit_of_measurement":"%""#), "\(text)")
        #expect(text.contains(#""value_template":"{{ (value | float * 100) | round(0) | int if value else '' }}""#), "\(text)")
        #expect(!String(decoding: configs[0].payload, as: UTF8.self).contains("unit_of_measurement"), "the name has no unit")
        let gateway = String(decoding: messages.gatewayDiscovery(version: "1").payload, as: UTF8.self)
        #expect(gateway.contains(#""name":"birdctl kitchen""#), "\(gateway)")
        #expect(GatewayMessages(prefix: "home/birds").deviceName == "birdctl home/birds")
    }

    @Test func theGatewayIdComesFromThePrefix() {
        #expect(GatewayMessages(prefix: "birdctl/kitchen-1").gatewayID == "birdctl_kitchen-1")
        #expect(GatewayMessages(prefix: "home/bird.s").gatewayID == "home_bird__2es")
        #expect(GatewayConfiguration.gatewayID("a/b") == "a_b" && GatewayConfiguration.gatewayID("a_b") == "a__5fb")
    }

    @Test(arguments: [
        ["a/b", "a_b", "a__b", "a/_b", "a_/b", "a/5fb", "a_5fb", "a/__5fb"],
        ["k/é", "k/__c3__a9", "k_é", "é/x", "x-y", "x/-y", "x-/y"],
    ])
    func gatewayIdsAreOneToOne(_ prefixes: [String]) {
        let ids = prefixes.map(GatewayConfiguration.gatewayID)
        #expect(Set(ids).count == prefixes.count, "\(ids)")
        for (prefix, id) in zip(prefixes, ids) {
            #expect(Self.decodedGatewayID(id) == prefix, "\(id)")
            #expect(id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }, "\(id)")
        }
    }

    /// The inverse of `gatewayID`: a run of one `_` is `/`, of two a byte, of three `/` and a byte.
    static func decodedGatewayID(_ id: String) -> String? {
        var bytes: [UInt8] = []
        var chars = Array(id.utf8)[...]
        while let c = chars.first {
            guard c == UInt8(ascii: "_") else {
                bytes.append(chars.removeFirst())
                continue
            }
            let run = chars.prefix { $0 == UInt8(ascii: "_") }.count
            chars = chars.dropFirst(run)
            if run == 1 || run == 3 { bytes.append(UInt8(ascii: "/")) }
            if run >= 2 {
                guard let byte = UInt8(String(decoding: chars.prefix(2), as: UTF8.self), radix: 16) else { return nil }
                bytes.append(byte)
                chars = chars.dropFirst(2)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

}

@Suite("MQTT gateway: what it reads back from the broker")
struct GatewayReadBackTests {
    let messages = GatewayMessages(prefix: "home/birds")

    @Test func aRetainedOnlineStatusNamesItsBird() {
        let held = MQTTMessage("home/birds/F0:0D:B1:7D:00:01/status", "online", retain: true)
        #expect(messages.retainedOnline(held) == "F0:0D:B1:7D:00:01")
    }

    @Test(arguments: [
        MQTTMessage("home/birds/F0:0D:B1:7D:00:01/status", "online", retain: false),  // published since: live truth
        MQTTMessage("home/birds/F0:0D:B1:7D:00:01/status", "offline", retain: true),
        MQTTMessage("home/birds/status", "online", retain: true),  // the gateway's own
        MQTTMessage("home/birds/evil/status", "online", retain: true),  // not an address: anyone's
        MQTTMessage("home/other/F0:0D:B1:7D:00:01/status", "online", retain: true),
        MQTTMessage("home/birds/F0:0D:B1:7D:00:01/x/status", "online", retain: true),
    ])
    func anythingElseIsIgnored(_ message: MQTTMessage) {
        #expect(messages.retainedOnline(message) == nil, "\(message.topic)")
    }

    /// Several adapters: each one's figures in the links state, and two
    /// sensors per adapter reading them; a name not BlueZ's goes nowhere.
    @Test func eachAdapterOfAPoolHasItsLinksSensors() throws {
        let gateway = GatewayMessages(prefix: "gw")
        let events = ReportFormatter(json: true, color: false)
        let state = gateway.render(.links(used: 1, limit: nil, adapters: [
            .init(adapter: "hci0", used: 1, limit: 3), .init(adapter: "hci1", used: 0, limit: nil),
            .init(adapter: "hci1\"}", used: 0, limit: nil),
        ]), events: events, version: "0")
        #expect(state.map(\.topic) == ["gw/links"])
        #expect(String(decoding: try #require(state.first).payload, as: UTF8.self)
            == #"{"used":1,"adapters":{"hci0":{"used":1,"limit":3},"hci1":{"used":0}}}"#)
        let sensors = gateway.render(.adapterLinksDiscovery(adapter: "hci1"), events: events, version: "0")
        #expect(sensors.map(\.topic) == ["homeassistant/sensor/birdctl_gw_links_hci1/config", "homeassistant/sensor/birdctl_gw_link_limit_hci1/config"])
        let limit = String(decoding: sensors[1].payload, as: UTF8.self)
        #expect(limit.contains(#""name":"Link limit hci1""#) && limit.contains(#""unique_id":"birdctl_gw_link_limit_hci1""#))
        #expect(limit.contains("value_json.adapters.hci1.limit if value and value_json.adapters is defined and value_json.adapters.hci1 is defined"))
        #expect(gateway.render(.adapterLinksDiscovery(adapter: "hci1/x"), events: events, version: "0").isEmpty)
    }

    @Test func retiringTakesOnlyThisGatewaysTopics() {
        let gateway = GatewayMessages(prefix: "gw")
        let robin: BluetoothAddress = "F0:0D:B1:7D:00:01"
        let topics = [
            "gw/status", "gw/\(robin)", "gw/\(robin)/alpha", "gw/\(robin)/status", "gw/F0:0D:B1:7D:00:02/name",
            "homeassistant/binary_sensor/birdctl_gw/config", "homeassistant/sensor/birdctl_gw_F00DB17D0001_alpha/config",
            "homeassistant/sensor/birdctl_gw_f00db17d0002_name/config", "homeassistant/number/birdctl_gw_F00DB17D0001_alpha_set/config",
            "gw/links", "homeassistant/sensor/birdctl_gw_links_hci1/config", "homeassistant/sensor/birdctl_gw_link_limit_hci12/config",
            "gw/health", "homeassistant/sensor/birdctl_gw_connect_failures/config",
            "homeassistant/sensor/birdctl_gw_F00DB17D0001_last_reading/config",
            // Not this gateway's: a gateway under its prefix, another, a look-alike, anyone's.
            "gw/nested/status", "gw/nested/\(robin)/alpha", "homeassistant/sensor/birdctl_gw_nested_F00DB17D0001_alpha/config",
            "homeassistant/sensor/birdctl_gwx_F00DB17D0001_alpha/config", "homeassistant/sensor/birdctl_gw_F00DB17D0001_size/config",
            "homeassistant/sensor/birdctl_gw_F00DB17D000Z_alpha/config", "gw/notes", "homeassistant/sensor/thermo/config",
            "homeassistant/number/birdctl_gw_F00DB17D0001_alpha/config", "homeassistant/light/birdctl_gw_F00DB17D0001_alpha_set/config",
            "homeassistant/sensor/birdctl_gw_links_hciX/config", "homeassistant/sensor/birdctl_gw_links_nested/config",
        ]
        #expect(gateway.topicsToClear(topics, onlyBirds: nil) == Array(topics[0..<15]))
        #expect(gateway.topicsToClear(topics, onlyBirds: [robin]) == [topics[1], topics[2], topics[3], topics[6], topics[8], topics[14]])
        #expect(gateway.topicsToClear(topics, onlyBirds: ["F0:0D:B1:7D:00:02"]) == [topics[4], topics[7]])
    }

    /// The gateway's health: connect attempts given up, retained, and its sensor (a diagnostic).
    @Test func connectFailuresAreTheGatewaysHealth() throws {
        let gateway = GatewayMessages(prefix: "gw")
        let events = ReportFormatter(json: true, color: false)
        let state = gateway.render(.health(connectFailures: 3), events: events, version: "0")
        #expect(state.map(\.topic) == ["gw/health"] && state.allSatisfy(\.retain))
        #expect(String(decoding: try #require(state.first).payload, as: UTF8.self) == #"{"connect_failures":3}"#)
        let sensor = try #require(gateway.render(.healthDiscovery, events: events, version: "0").first)
        #expect(sensor.topic == "homeassistant/sensor/birdctl_gw_connect_failures/config")
        let config = String(decoding: sensor.payload, as: UTF8.self)
        #expect(config.contains(#""name":"Connect failures""#) && config.contains(#""state_class":"total_increasing""#))
        #expect(config.contains(#""entity_category":"diagnostic""#) && config.contains(#""state_topic":"gw/health""#))
    }
}
