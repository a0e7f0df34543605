import Bird
import MQTT

/// `birdctl retire`'s work: what a gateway left retained on its broker —
/// all of it, or only some birds' — cleared with empty retained messages,
/// unless the gateway is online (it would publish it all again).
public enum GatewayRetirement {
    public enum Outcome: Sendable {
        /// The gateway is online (its status topic says so): nothing was cleared.
        case online(statusTopic: String)
        /// These topics were cleared.
        case cleared([String])
    }

    /// Reads what the broker retains for the gateway of `configuration`
    /// (`birds`: only these birds'), then clears it; each step within `deadline`.
    public static func retire(_ configuration: GatewayConfiguration, birds: Set<BluetoothAddress>?, deadline: Duration) throws(MQTTError)
        -> Outcome
    {
        let prefix = configuration.prefix
        let messages = GatewayMessages(prefix: prefix)
        var settings = configuration.settings
        // Never the gateway's own id (the broker would disconnect a running
        // gateway); a gateway id never holds a '/'.
        settings.clientID += "/retire"
        // A gateway of a fleet (prefix ROOT/ROOM) leaves its heard reports and
        // claims under ROOT/fleet: ours to clear too (docs/fleet.md).
        let fleet = prefix.lastIndex(of: "/").map {
            FleetTopics(root: String(prefix[..<$0]), room: String(prefix[prefix.index(after: $0)...]))
        }
        let session = try MQTTRetainedSession(
            settings,
            filters: [prefix + "/#", messages.gatewayDiscoveryTopic] + GatewayMessages.birdDiscoveryFilters
                + (fleet?.filters.dropFirst() ?? []),
            probeTopic: prefix + "/retire")
        let retained = try session.readRetained(deadline: deadline)
        if retained.contains(where: { $0.topic == messages.statusTopic && $0.payload.elementsEqual("online".utf8) }) {
            return .online(statusTopic: messages.statusTopic)
        }
        let topics = messages.topicsToClear(retained.map(\.topic), onlyBirds: birds)
            + (fleet.map { $0.leftBy(retained, onlyBirds: birds) } ?? [])
        try session.publishAndClose(topics.map(GatewayMessages.clearing), deadline: deadline)
        return .cleared(topics)
    }
}
