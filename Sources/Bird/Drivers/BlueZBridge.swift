import BlueZ
import DBus

// Translations from BlueZ's typed views to what the Bird state machines use.

extension Sighting {
    /// The sighting a BlueZ event stands for: a device announced, or one whose
    /// RSSI or advertising data changed. Cached devices that stay silent never are.
    public init?(_ event: BlueZEvent) {
        guard let device = event.advertisingDevice else { return nil }
        self.init(device)
    }

    /// A device already in BlueZ's tree that is in range: heard recently (it
    /// has an RSSI) or connected (a connected peripheral may not advertise).
    public init?(heard device: Device) {
        guard device.hasSignal || device.connected else { return nil }
        self.init(device)
    }

    /// A device BlueZ knows, heard or not (for `BirdCentral.deviceKnown`).
    public init?(known device: Device) {
        self.init(device)
    }

    /// Where a device's address enters the Bird layer: one BlueZ writes
    /// otherwise than `AA:BB:CC:DD:EE:FF` is no device of ours.
    private init?(_ device: Device) {
        guard let address = BluetoothAddress(device.address) else { return nil }
        self.init(
            device: device.path, address: address, name: device.name ?? Self.chosenAlias(of: device),
            rssi: device.rssi, uuids: device.uuids, bonded: device.paired, connected: device.connected)
    }

    /// An alias someone gave the device; not the one BlueZ makes up from
    /// the address when the device has no name ("C0-B1-2D-00-00-05"), which
    /// would pass for a name.
    private static func chosenAlias(of device: Device) -> String? {
        guard let alias = device.alias, alias != String(device.address.map { $0 == ":" ? "-" : $0 }) else {
            return nil
        }
        return alias
    }
}

extension AdapterChoice {
    public init(_ adapter: Adapter) {
        self.init(path: adapter.path, name: adapter.interfaceName, powered: adapter.powered, address: BluetoothAddress(adapter.address))
    }
}

extension ObjectTree {
    public var adapterChoices: [AdapterChoice] { adapters.map(AdapterChoice.init) }

    /// The Bird characteristics of a connected device, by field (selected by
    /// UUID inside the Bird Service; BlueZ adds services of its own).
    public func birdCharacteristics(of device: ObjectPath) -> [BirdField: ObjectPath] {
        var found: [BirdField: ObjectPath] = [:]
        for service in services(of: device) where service.uuid == BirdService.uuid {
            for characteristic in characteristics(under: service.path) {
                if let field = BirdField(uuid: characteristic.uuid) { found[field] = characteristic.path }
            }
        }
        return found
    }
}
