import Bird
import MQTT

/// `--fleet`: the topics gateways sharing a broker decide by
/// (`FleetOwnership`; docs/fleet.md), all retained:
///
///     ROOT/ROOM/status                      each gateway's online | offline (its will)
///     ROOT/fleet/ADDRESS/heard/ROOM         the smoothed RSSI ROOM hears the bird at
///     ROOT/fleet/ADDRESS/holder             the ROOM that holds the bird
///
/// What comes from the broker is anyone's: topics not shaped like these,
/// rooms that are no topic level, RSSIs out of range and payloads over a
/// few bytes are ignored.
public struct FleetTopics {
    /// The level under ROOT that holds the fleet's own topics (no room may be named so).
    public static let shared = "fleet"

    let root: String
    let room: String

    /// What the gateway subscribes to at every connect.
    var filters: [String] { [root + "/+/status", "\(root)/\(Self.shared)/+/holder", "\(root)/\(Self.shared)/+/heard/+"] }

    func holderTopic(_ address: BluetoothAddress) -> String { "\(root)/\(Self.shared)/\(address)/holder" }
    func heardTopic(_ address: BluetoothAddress) -> String { "\(root)/\(Self.shared)/\(address)/heard/\(room)" }

    func heard(_ address: BluetoothAddress, rssi: Int?) -> MQTTMessage {
        MQTTMessage(heardTopic(address), rssi.map(String.init) ?? "", retain: true)
    }

    func claim(_ address: BluetoothAddress) -> MQTTMessage { MQTTMessage(holderTopic(address), room, retain: true) }

    enum Received: Equatable {
        case gatewayStatus(room: String, online: Bool)
        case holder(address: BluetoothAddress, room: String?)
        case heard(address: BluetoothAddress, room: String, rssi: Int?)
    }

    /// A message on one of `filters`, or nil.
    func parse(_ message: MQTTMessage) -> Received? {
        guard message.topic.hasPrefix(root + "/"), message.payload.count <= 64 else { return nil }
        let levels = message.topic.dropFirst(root.count + 1).split(separator: "/", omittingEmptySubsequences: false)
        let payload = String(decoding: message.payload, as: UTF8.self)
        switch levels.count {
        case 2 where levels[1] == "status" && levels[0] != Self.shared[...]:
            return .gatewayStatus(room: String(levels[0]), online: payload == "online")
        case 3 where levels[0] == Self.shared[...] && levels[2] == "holder":
            guard let address = Self.address(levels[1]) else { return nil }
            guard payload.isEmpty || Self.isRoom(payload) else { return nil }
            return .holder(address: address, room: payload.isEmpty ? nil : payload)
        case 4 where levels[0] == Self.shared[...] && levels[2] == "heard":
            guard let address = Self.address(levels[1]), Self.isRoom(levels[3]) else { return nil }
            let rssi = Int(payload).flatMap { (-127...20).contains($0) ? $0 : nil }
            if rssi == nil && !payload.isEmpty { return nil }
            return .heard(address: address, room: String(levels[3]), rssi: rssi)
        default:
            return nil
        }
    }

    /// Of the retained messages, this room's heard reports and claims (a
    /// retired gateway's): all, or only those of `onlyBirds`.
    func leftBy(_ retained: [MQTTMessage], onlyBirds birds: Set<BluetoothAddress>?) -> [String] {
        retained.compactMap { message in
            switch parse(message) {
            case .heard(let address, room, _)?, .holder(let address, room?)?:
                birds.map { $0.contains(address) } ?? true ? message.topic : nil
            default: nil
            }
        }
    }

    private static func address(_ level: Substring) -> BluetoothAddress? {
        BluetoothAddress(level)
    }

    private static func isRoom<S: StringProtocol>(_ name: S) -> Bool {
        !name.isEmpty && name != shared && !name.contains { $0 == "/" || $0 == "+" || $0 == "#" || $0 == "\0" }
    }
}
