import DBus

/// A device heard during discovery (announced, or its RSSI or advertising
/// data changed), as the central's driver reports it.
public struct Sighting: Hashable, Sendable {
    public var device: ObjectPath
    public var address: String
    public var name: String?
    public var rssi: Int16?
    public var uuids: [String]
    /// BlueZ holds a bond with the device (`Paired`).
    public var bonded: Bool

    public init(device: ObjectPath, address: String, name: String?, rssi: Int16?, uuids: [String], bonded: Bool = false) {
        self.device = device
        self.address = address
        self.name = name
        self.rssi = rssi
        self.uuids = uuids
        self.bonded = bonded
    }

    /// BlueZ merges every client's discovery filter, so a sighting may be any
    /// device: check the Bird Service UUID here (case-insensitively).
    public var isBird: Bool { uuids.contains { $0.lowercased() == BirdService.uuid } }

    /// Whether this is the bird a command asked for.
    public func matches(address wanted: String?, minimumRSSI: Int?) -> Bool {
        guard isBird else { return false }
        if let wanted, wanted.uppercased() != address.uppercased() { return false }
        if let minimumRSSI {
            guard let rssi, Int(rssi) >= minimumRSSI else { return false }
        }
        return true
    }
}
