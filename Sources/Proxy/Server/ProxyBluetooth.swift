import Bird
import BlueZ

/// What the proxy needs of Bluetooth for Home Assistant's connections: the
/// scheduler's free slots, links made and undone through its gate, and GATT
/// operations on them. Loop-confined: called on the loop, answering there.
/// A link that goes down, and a notification from a linked device, are told
/// to the server (`ProxyServer.unlinked`, `notified`).
public protocol ProxyBluetooth: AnyObject {
    /// Home Assistant's free slots and their limit, now.
    func slots() -> (free: Int, limit: Int)
    /// Connects the device for Home Assistant; `linked` gets the ATT MTU once
    /// its services are resolved, or why it could not be linked.
    func connect(_ address: BluetoothAddress, randomAddress: Bool?, linked: @escaping @Sendable (Result<Int, BlueZError>) -> Void)
    func disconnect(_ address: BluetoothAddress)
    func perform(
        _ operation: ProxiedLinks.Operation, on address: BluetoothAddress,
        done: @escaping @Sendable (Result<ProxiedLinks.Outcome, BlueZError>) -> Void)
    /// Pairs, unpairs or clears the cache of a linked device.
    func change(_ change: ProxiedLinks.DeviceChange, of address: BluetoothAddress, done: @escaping @Sendable (Result<Void, BlueZError>) -> Void)
}
