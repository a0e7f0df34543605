import DBus

/// `watch --all` with many birds: a notification concerns the one machine
/// whose link it came over, so it goes to that machine alone instead of
/// being offered to every machine in turn (which cost a notification time
/// in proportion to the birds followed; see docs/performance.md, "`watch
/// --all` with many birds").
extension BirdFleet {
    /// Runs `event` on the machine whose bird is at or above `characteristic`
    /// (none: nobody's, as it would have been for every machine; see `FleetMachines.owner(of:)`).
    mutating func owner(of characteristic: ObjectPath, _ event: (inout BirdCentral) -> [BirdCentral.Action]) -> [Action] {
        guard outcome == nil, let index = machines.owner(of: characteristic) else { return [] }
        let id = machines.id(at: index)
        return afterEvent(translate(machines.run(at: index, event), from: id))
    }
}
