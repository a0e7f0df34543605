/// `watch --all` among strangers: when each machine's bird was last heard,
/// and which birds asked for pairing without being named, on a clock that
/// ticks `BirdFleet.ticksToForget` times per `after`. A bird is forgotten
/// between 7/8 and 8/8 of `after` since it was last heard; a declined one is
/// not connected to again until then (a stranger would otherwise be
/// connected to, and refused, every time it is heard). A value, no I/O:
/// part of `BirdFleet`, which drops the machines it names.
struct Forgetting: Sendable {
    typealias MachineID = BirdFleet.MachineID

    /// How long a bird neither heard nor connected is remembered.
    let after: Duration
    private(set) var tick = 0
    /// When each machine's bird was last heard (in ticks).
    private(set) var lastHeard: [MachineID: Int] = [:]
    /// Birds that declined, and the tick they did.
    private(set) var declined: [BluetoothAddress: Int] = [:]

    init(after: Duration) { self.after = after }

    /// The time between two ticks.
    var interval: Duration { after / BirdFleet.ticksToForget }

    /// Machine `id`'s bird was heard now, or at `tick` (a machine taking
    /// another's place keeps when its bird was heard).
    mutating func heard(_ id: MachineID, at tick: Int? = nil) { lastHeard[id] = tick ?? self.tick }

    /// Machine `id` was dropped.
    mutating func forget(_ id: MachineID) { lastHeard[id] = nil }

    /// Every machine was dropped.
    mutating func forgetMachines() { lastHeard.removeAll() }

    /// The bird at `address` asked for pairing without being named.
    mutating func decline(_ address: BluetoothAddress) { declined[address] = tick }

    func isDeclined(_ address: BluetoothAddress) -> Bool { declined[address] != nil }

    /// One tick on. Declined birds are given another chance after
    /// `ticksToForget` ticks; a machine whose bird is connected (or being
    /// connected to) counts as heard, as it may not advertise while held.
    /// Returns the machines of `machines` whose bird was not heard for
    /// `ticksToForget` ticks, in their order.
    mutating func tickOn(_ machines: [(id: MachineID, connected: Bool)]) -> [MachineID] {
        tick += 1
        let horizon = tick - BirdFleet.ticksToForget
        declined = declined.filter { $0.value > horizon }
        for machine in machines where machine.connected { lastHeard[machine.id] = tick }
        return machines.map(\.id).filter { lastHeard[$0, default: tick] <= horizon }
    }
}
