import BlueZ
import DBus

/// `watch --all`: links for a guest (Home Assistant, through the proxy) to
/// devices that are not birds, from the same scheduler and gate as the
/// birds' (`GuestLinks`).
///
/// The rule: a guest gets a link only while one is left for each held bird
/// that has none, and one for the polled birds' turns; a link the guest
/// holds is its own until it lets go or the link drops — a held bird is
/// never undone for a guest, and a guest's link never for a bird. With the
/// adapter's limit not known yet, one link more than those up is offered.
extension BirdFleet {
    /// The guest's free links and their limit, summed over the usable
    /// adapters (none without `all`, or once finished).
    public var guestSlots: (free: Int, limit: Int) {
        guard let scheduler, outcome == nil else { return (0, 0) }
        var free = 0
        var limit = 0
        for adapter in usableAdapters where !scheduler.isResetting(adapter.path) {
            let links = linksUp(on: adapter.path).up
            let known = scheduler.limit(on: adapter.path)
            let total = known ?? links + 1
            limit += total
            free += max(0, total - links)
        }
        return (max(0, free - machines.linksReservedForBirds(waiting: gate.isWaiting)), limit)
    }

    /// Whether `device` is linked (or being linked) for the guest.
    public func isGuest(_ device: ObjectPath) -> Bool { guests.id(ofDevice: device) != nil }

    /// The guest asks for a link to `device` (the object of `address` under
    /// the adapter that hears it best): in line at the gate, answered by a
    /// `guestLinked` or `guestFailed` action.
    public mutating func guestConnect(_ address: BluetoothAddress, device: ObjectPath) -> [Action] {
        guard scheduler != nil, outcome == nil else {
            return [.guestFailed(address, BlueZError(.notReady, message: "links for a guest need --all"))]
        }
        guard guests.id(of: address) == nil, machines.id(of: address) == nil else {
            return [.guestFailed(address, BlueZError(.inProgress, message: "birdctl holds or is undoing a link to it"))]
        }
        let id = machines.newID()
        guests.add(id, address, device: device)
        gate.request(id, device: device, [.armTimer(.guest(id), configuration.connectTimeout), .connect(id, device)])
        return grantConnects()
    }

    /// The guest lets go of its link to `address` (or of its attempt).
    public mutating func guestDisconnect(_ address: BluetoothAddress) -> [Action] {
        guard let id = guests.id(of: address), let guest = guests[id] else { return [] }
        switch guest.phase {
        case .waiting:
            gate.withdraw(id)
            scheduler?.withdraw(id)
            guests.remove(id)
            return [.cancelTimer(.guest(id))] + grantConnects()
        case .connecting, .up:
            guests.set(id, .closing)
            return [.cancelTimer(.guest(id))] + (gate.disconnecting(guest.device) ? [.disconnect(guest.device)] : [])
        case .closing:
            return []
        }
    }

    /// Guest `id`'s Connect was answered.
    mutating func guestConnectReplied(_ id: MachineID, _ result: Result<Void, BlueZError>) -> [Action] {
        let ours = gate.replied(id)
        scheduler?.attemptEnded(id)
        guard ours, let guest = guests[id], guest.phase == .connecting else { return grantConnects() }
        switch result {
        case .success:
            // Up: its services resolving (`guestResolved`).
            return connectedPastLimit(id, guest.device) + grantConnects()
        case .failure(let error):
            guests.remove(id)
            return [.cancelTimer(.guest(id)), .guestFailed(guest.address, error)] + grantConnects()
        }
    }

    /// A guest's device has its services resolved: its link is up.
    mutating func guestResolved(_ device: ObjectPath) -> [Action] {
        guard let id = guests.id(ofDevice: device), let guest = guests[id], guest.phase == .connecting else { return [] }
        guests.set(id, .up)
        return [.cancelTimer(.guest(id)), .guestLinked(guest.address, device)]
    }

    /// A device's link went down: a guest's is said, and its slot is free.
    mutating func guestLinkEnded(_ device: ObjectPath) -> [Action] {
        guard let id = guests.id(ofDevice: device), let guest = guests.remove(id) else { return [] }
        switch guest.phase {
        case .waiting: return []
        case .connecting:
            return [.cancelTimer(.guest(id)), .guestFailed(guest.address, BlueZError(.failed, message: "the link went down as it was made"))]
                + grantConnects()
        case .up, .closing: return [.guestUnlinked(guest.address)] + grantConnects()
        }
    }

    /// Guest `id`'s connect deadline passed with `connectedDevices` up on
    /// its adapter: as a bird's, it may teach the limit or show the adapter
    /// stuck; the attempt is undone and the guest told.
    mutating func guestDeadlinePassed(_ id: MachineID, connectedDevices: [ObjectPath], adapter: String) -> [Action] {
        scheduler?.attemptEnded(id)
        guard let guest = guests.remove(id) else { return [] }
        let others = connectedDevices.count { $0 != guest.device }
        let learned = learnedLimit(others, adapter: adapter, path: AdapterPool.adapter(of: guest.device))
        let stuck = adapterStuck(id, device: guest.device, connectedDevices: connectedDevices, adapter: adapter)
        _ = gate.disconnecting(guest.device)
        return [.disconnect(guest.device), .guestFailed(guest.address, BlueZError(.timeout, message: "no link before the connect deadline"))]
            + learned + stuck + grantConnects()
    }

    /// bluetoothd or an adapter went (nil: every adapter): the guests' links
    /// and attempts there with it, each said.
    mutating func guestsLost(on adapter: ObjectPath?) -> [Action] {
        guests.gone(on: adapter).flatMap { guest -> [Action] in
            switch guest.phase {
            case .waiting, .connecting: [.guestFailed(guest.address, BlueZError(.notReady, message: "the adapter went"))]
            // One being undone is down too: the guest waits to be told so.
            case .up, .closing: [.guestUnlinked(guest.address)]
            }
        }
    }

    /// The command ends: the guests' links are undone with the birds'.
    mutating func guestsUndone() -> [Action] {
        guests.gone(on: nil).compactMap { guest in guest.phase == .waiting ? nil : .disconnect(guest.device) }
    }
}
