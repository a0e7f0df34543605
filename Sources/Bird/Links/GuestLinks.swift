import DBus

/// Links the fleet makes for a guest — Home Assistant through the proxy —
/// to devices that are not its birds: each in line at the `ConnectGate` and
/// counted by the `LinkScheduler` like a bird's, from the request until the
/// link is down. A value, no I/O: part of `BirdFleet`, which keeps them
/// apart from its machines (ids from the same counter, so the gate and the
/// scheduler tell them apart from no machine).
struct GuestLinks: Sendable {
    typealias ID = BirdFleet.MachineID

    enum Phase: Equatable, Sendable {
        /// In line at the gate.
        case waiting
        /// Its Connect out, or its link up with services resolving.
        case connecting
        case up
        /// Undone: its Disconnect out, counted until Connected turns false.
        case closing
    }

    struct Guest: Equatable, Sendable {
        var address: BluetoothAddress
        var device: ObjectPath
        var phase: Phase
    }

    private(set) var byID: [ID: Guest] = [:]

    var isEmpty: Bool { byID.isEmpty }

    func id(of address: BluetoothAddress) -> ID? { byID.first { $0.value.address == address }?.key }

    func id(ofDevice device: ObjectPath) -> ID? { byID.first { $0.value.device == device }?.key }

    subscript(id: ID) -> Guest? { byID[id] }

    mutating func add(_ id: ID, _ address: BluetoothAddress, device: ObjectPath) {
        byID[id] = Guest(address: address, device: device, phase: .waiting)
    }

    mutating func set(_ id: ID, _ phase: Phase) { byID[id]?.phase = phase }

    @discardableResult
    mutating func remove(_ id: ID) -> Guest? { byID.removeValue(forKey: id) }

    /// Whether guest `id` still waits to connect to `device` (the gate asks).
    func waits(_ id: ID, for device: ObjectPath) -> Bool {
        byID[id].map { $0.device == device && $0.phase == .waiting } ?? false
    }

    /// Links up or being made on an adapter (all but those in line), and those up.
    func links(on adapter: ObjectPath) -> (up: Int, linked: Int) {
        var here = 0
        var up = 0
        for guest in byID.values where guest.phase != .waiting && guest.device.isDescendant(of: adapter) {
            here += 1
            if guest.phase != .connecting { up += 1 }
        }
        return (here, up)
    }

    /// Links up or being made on every adapter.
    var count: Int { byID.values.count { $0.phase != .waiting } }

    /// bluetoothd or these adapters went: their links with them. Returns those that were.
    mutating func gone(on adapter: ObjectPath?) -> [Guest] {
        let lost = byID.filter { adapter.map($0.value.device.isDescendant(of:)) ?? true }
        for id in lost.keys { byID[id] = nil }
        return lost.sorted { $0.key < $1.key }.map(\.value)
    }
}
