import BlueZ
import DBus

/// `watch --all --mqtt URL --fleet`: gateways sharing a broker decide which
/// of them connects each bird (`FleetOwnership`, in Gateway); the fleet connects
/// only the birds it is granted and lets a bird go when told.
extension BirdFleet {
    /// What the fleet keeps for sharing: the birds it may connect, and the
    /// last sighting of birds heard but not granted (bounded), so that a grant
    /// connects at once.
    struct Sharing: Sendable {
        var granted: Set<BluetoothAddress> = []
        var heard: [BluetoothAddress: Sighting] = [:]
        static let heardLimit = 256
    }

    /// Whether a Bird heard may be followed: always, unless shared and not granted
    /// (then its sighting is kept for a grant).
    mutating func mayFollow(_ sighting: Sighting, address: BluetoothAddress) -> Bool {
        // Read through `sharing?` (no copy of it held), so the writes below do not copy its dictionary.
        guard sharing != nil else { return true }
        if sharing?.granted.contains(address) == true { return true }
        if sharing?.heard[address] == nil, (sharing?.heard.count ?? 0) >= Sharing.heardLimit, let any = sharing?.heard.keys.first {
            sharing?.heard[any] = nil
        }
        sharing?.heard[address] = sighting
        return false
    }

    /// This gateway holds the bird now: the fleet may connect it.
    public mutating func grant(_ address: BluetoothAddress) -> [Action] {
        guard outcome == nil, sharing != nil, sharing?.granted.insert(address).inserted == true else { return [] }
        guard machines.id(of: address) == nil, let sighting = sharing?.heard.removeValue(forKey: address) else { return [] }
        // Heard before: no sign that the adapter hears now.
        return deviceSighted(sighting, live: false)
    }

    /// Another gateway holds the bird now (or this one let it go): its
    /// machine stops (the link undone) and it is not connected again until granted.
    public mutating func release(_ address: BluetoothAddress) -> [Action] {
        guard outcome == nil, sharing != nil else { return [] }
        sharing?.granted.remove(address)
        waiting.remove(address)
        guard let id = machines.id(of: address), var stopped = machines.central(id) else { return [] }
        let stop = stopped.stopRequested().filter { if case .finish = $0 { false } else { true } }
        let sighting = machines.sightings[id]
        var actions = translate(stop, from: id)
        drop(id)
        if let sighting, machines.linked.contains(sighting.device),
            !actions.contains(where: { if case .report(.disconnected(let p)) = $0 { p.path == sighting.device } else { false } })
        {
            actions.append(.report(.disconnected(
                BirdCentral.Peripheral(path: sighting.device, address: sighting.address, name: sighting.name))))
        }
        return actions
    }
}
