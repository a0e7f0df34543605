import DBus

/// A device heard during discovery (announced, or its RSSI or advertising
/// data changed), as the central's driver reports it.
public struct Sighting: Hashable, Sendable {
    public var device: ObjectPath
    public var address: BluetoothAddress
    public var name: String?
    public var rssi: Int16?
    public var uuids: [String]
    /// BlueZ holds a bond with the device (`Paired`).
    public var bonded: Bool
    /// BlueZ holds a link to it already (an earlier run's, or another program's).
    public var connected: Bool

    /// `name` is the device's advertised name or alias, as BlueZ has it: a
    /// peer's (or a user's) text of any length. It is capped here, where it
    /// enters the Bird layer, so that nothing that keeps or prints it (a
    /// session, scan results, the gateway) holds more than `maximumNameBytes`.
    public init(
        device: ObjectPath, address: BluetoothAddress, name: String?, rssi: Int16?, uuids: [String], bonded: Bool = false,
        connected: Bool = false
    ) {
        self.device = device
        self.address = address
        self.name = name.map(Self.capped)
        self.rssi = rssi
        self.uuids = uuids
        self.bonded = bonded
        self.connected = connected
    }

    /// The longest device name BLE carries (the GAP Device Name: 248 bytes).
    public static let maximumNameBytes = 248
    /// Appended to a name that was cut.
    public static let cutMarker = "…"

    /// `name` cut to at most `maximumNameBytes` bytes of UTF-8, on a scalar
    /// boundary, with `cutMarker` appended when anything was cut.
    public static func capped(_ name: String) -> String {
        guard name.utf8.count > maximumNameBytes else { return name }
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in name.unicodeScalars {
            bytes += UTF8.width(scalar)
            if bytes > maximumNameBytes { break }
            kept.append(scalar)
        }
        return String(kept) + cutMarker
    }

    /// BlueZ merges every client's discovery filter, so a sighting may be any
    /// device: check the Bird Service UUID here (case-insensitively).
    public var isBird: Bool { uuids.contains { $0.lowercased() == BirdService.uuid } }

    /// Whether this is the bird a command asked for.
    public func matches(address wanted: BluetoothAddress?, minimumRSSI: Int?) -> Bool {
        guard isBird else { return false }
        if let wanted, wanted != address { return false }
        return isHeard(atLeast: minimumRSSI)
    }

    /// Whether it was heard at least this strong (nil: any).
    public func isHeard(atLeast minimumRSSI: Int?) -> Bool {
        guard let minimumRSSI else { return true }
        guard let rssi else { return false }
        return Int(rssi) >= minimumRSSI
    }
}
