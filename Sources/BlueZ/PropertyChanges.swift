// Which properties a PropertiesChanged signal touched, typed per interface, so
// nothing above this layer matches BlueZ's property names as strings.

extension Adapter {
    /// The Adapter1 properties a change touched.
    public struct Changes: OptionSet, Hashable, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        public static let powered = Changes(rawValue: 1 << 0)
        public static let discovering = Changes(rawValue: 1 << 1)
        public static let name = Changes(rawValue: 1 << 2)
        /// A property birdctl does not look at.
        public static let other = Changes(rawValue: 1 << 7)

        init(_ names: some Sequence<String>) {
            self = []
            for name in names {
                switch name {
                case "Powered": insert(.powered)
                case "Discovering": insert(.discovering)
                case "Name", "Alias": insert(.name)
                default: insert(.other)
                }
            }
        }
    }
}

extension Device {
    /// The Device1 properties a change touched.
    public struct Changes: OptionSet, Hashable, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        public static let connected = Changes(rawValue: 1 << 0)
        public static let servicesResolved = Changes(rawValue: 1 << 1)
        public static let rssi = Changes(rawValue: 1 << 2)
        /// Name or Alias.
        public static let name = Changes(rawValue: 1 << 3)
        public static let uuids = Changes(rawValue: 1 << 4)
        public static let manufacturerData = Changes(rawValue: 1 << 5)
        public static let serviceData = Changes(rawValue: 1 << 6)
        public static let txPower = Changes(rawValue: 1 << 7)
        public static let paired = Changes(rawValue: 1 << 8)
        /// A property birdctl does not look at.
        public static let other = Changes(rawValue: 1 << 15)

        /// What bluetoothd updates from an advertising report: a change in one
        /// means the device was just heard (a cached device out of range
        /// changes none of them).
        public static let advertisement: Changes = [.rssi, .uuids, .manufacturerData, .serviceData, .txPower]

        init(_ names: some Sequence<String>) {
            self = []
            for name in names {
                switch name {
                case "Connected": insert(.connected)
                case "ServicesResolved": insert(.servicesResolved)
                case "RSSI": insert(.rssi)
                case "Name", "Alias": insert(.name)
                case "UUIDs": insert(.uuids)
                case "ManufacturerData": insert(.manufacturerData)
                case "ServiceData": insert(.serviceData)
                case "TxPower": insert(.txPower)
                case "Paired": insert(.paired)
                default: insert(.other)
                }
            }
        }
    }
}

extension GattCharacteristic {
    /// The GattCharacteristic1 properties, other than Value, a change touched
    /// (a new Value is its own event, `valueChanged`).
    public struct Changes: OptionSet, Hashable, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        public static let notifying = Changes(rawValue: 1 << 0)
        public static let flags = Changes(rawValue: 1 << 1)
        /// A property birdctl does not look at.
        public static let other = Changes(rawValue: 1 << 7)

        init(_ names: some Sequence<String>) {
            self = []
            for name in names {
                switch name {
                case "Value": break
                case "Notifying": insert(.notifying)
                case "Flags": insert(.flags)
                default: insert(.other)
                }
            }
        }
    }
}
