import DBus

/// `watch --all` with many birds: a notification concerns the one machine
/// whose link it came over, so it goes to that machine alone instead of
/// being offered to every machine in turn (which cost a notification time
/// in proportion to the birds followed; see docs/performance.md, "`watch
/// --all` with many birds").
extension BirdFleet {
    /// Runs `event` on the machine whose bird is at or above `characteristic`
    /// (none: nobody's, as it would have been for every machine). The machine
    /// found is remembered per characteristic until it is dropped: each bird
    /// has one machine, and a machine without a link ignores notifications,
    /// so the entry stays right without being checked at each notification
    /// (checking copied the machine's state, a third of what routing cost).
    mutating func owner(of characteristic: ObjectPath, _ event: (inout BirdCentral) -> [BirdCentral.Action]) -> [Action] {
        guard outcome == nil else { return [] }
        var index = notifiers[characteristic].flatMap(index(of:))
        if index == nil {
            index = machines.firstIndex { owns($0.central, characteristic) }
            guard let found = index else { return [] }
            // Bounded: a few characteristics per bird (more only if a bird's paths changed).
            if notifiers.count >= 8 * machines.count + 64 { notifiers.removeAll() }
            notifiers[characteristic] = machines[found].id
        }
        guard let index else { return [] }
        let id = machines[index].id
        return afterEvent(translate(event(&machines[index].central), from: id))
    }

    private func owns(_ central: BirdCentral, _ characteristic: ObjectPath) -> Bool {
        guard let device = central.currentDevice else { return false }
        return characteristic.isDescendant(of: device)
    }
}
