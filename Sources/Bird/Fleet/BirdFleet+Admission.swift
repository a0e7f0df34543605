import BlueZ
import DBus

/// `watch --all`: which birds get a machine, and when — one new bird at a
/// time, the others waiting in a short line.
extension BirdFleet {
    /// How many birds heard while another is being connected to wait for their turn.
    public static let waitingLimit = WaitingLine.limit

    /// `all`: a machine for the bird heard, started at once.
    mutating func follow(_ heard: Sighting) -> [Action] {
        let address = heard.address
        // Several adapters: through the one the pool chooses now.
        if pool != nil, pool?.heard[address]?[AdapterPool.adapter(of: heard.device)] == nil { pool?.heard(heard) }
        let sighting = chosenSighting(address) ?? heard
        let id = machines.add(BirdCentral(perBird(sighting.address)), for: address, seen: sighting)
        forgetting?.heard(id)
        // One event: the machine is connecting by the time the line is looked at again.
        let actions = [.cancelTimer(.fleet(.scan))] + on(id) { [adapter = bluetooth.adapter] in
            $0.bluetoothReady(adapter: adapter) + $0.deviceSighted(sighting)
        }
        // A bird named to hold, with one adapter whose limit is known: birds held by choice make way.
        guard pool == nil, scheduler?.policy.hold.contains(address) == true, let links = knownLinks else { return actions }
        return actions + pollHeldByChoice(leaving: links)
    }

    /// A machine's configuration for one bird of `all`: held or polled as the scheduler says.
    func perBird(_ address: BluetoothAddress, polled: Bool? = nil) -> BirdCentral.Configuration {
        var perBird = configuration
        perBird.address = address
        perBird.scanTimeout = nil
        perBird.maximumReadings = nil
        perBird.duration = nil
        perBird.awaitsOwnDisconnect = false  // as before: the scheduler's business
        if let scheduler, polled ?? scheduler.polls(address, heldBirds: heldBirds, limit: knownLinks) {
            perBird.pollInterval = scheduler.policy.pollInterval
        }
        return perBird
    }

    /// A bird new to the fleet is being connected to: the next waits. Birds
    /// the fleet had links to (polled ones between polls, held ones whose link
    /// was lost) do not hold the line up: polled birds taking the links in
    /// turn would always have one connecting, and the birds in line would
    /// never get a machine.
    var admitting: Bool { machines.contains { $0.central.isFindingAnew } }

    /// `all`: once no new bird is being connected to, the next bird waiting gets one.
    mutating func admitWaiting() -> [Action] {
        var actions: [Action] = []
        while outcome == nil, bluetooth.discovering, !waiting.isEmpty, !admitting {
            guard let sighting = waiting.next() else { break }
            let address = sighting.address
            guard machines.id(of: address) == nil, forgetting?.isDeclined(address) != true, sharing?.granted.contains(address) ?? true else { continue }
            actions += follow(sighting)
        }
        return actions
    }
}
