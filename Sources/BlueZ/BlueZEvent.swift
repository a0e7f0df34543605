import DBus

/// What happened in BlueZ, as typed events. Delivered on the connection's loop
/// after the client's tree has been updated, so a handler may read the tree.
public enum BlueZEvent: Hashable, Sendable {
    /// The tree was loaded (at start, or after bluetoothd came back).
    case ready
    /// bluetoothd is not on the bus (at start, or it went away). The tree is empty
    /// until the next `.ready`.
    case unavailable(BlueZError)

    case adapterAdded(Adapter)
    case adapterChanged(Adapter, changed: Adapter.Changes)
    case adapterRemoved(ObjectPath)

    case deviceAdded(Device)
    case deviceChanged(Device, changed: Device.Changes)
    case deviceRemoved(ObjectPath)

    case serviceAdded(GattService)
    case serviceRemoved(ObjectPath)

    case characteristicAdded(GattCharacteristic)
    /// A characteristic property other than Value changed (e.g. Notifying).
    case characteristicChanged(GattCharacteristic, changed: GattCharacteristic.Changes)
    case characteristicRemoved(ObjectPath)
    /// A notification (or a read) updated a characteristic's value.
    case valueChanged(characteristic: ObjectPath, value: [UInt8])
}

extension BlueZEvent {
    /// The device this event says was heard advertising: one added, or one
    /// whose advertised properties changed (see `Device.Changes.advertisement`).
    public var advertisingDevice: Device? {
        switch self {
        case .deviceAdded(let device): device
        case .deviceChanged(let device, let changed) where !changed.isDisjoint(with: .advertisement): device
        default: nil
        }
    }
}
