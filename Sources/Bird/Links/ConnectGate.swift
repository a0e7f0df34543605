import DBus

/// Connection attempts, one at a time, and whose each reply is. An LE
/// controller makes one connection at a time and bluetoothd 5.66 was seen to
/// die on two concurrent Connects, so an attempt (its deadline and its
/// Connect) waits here until the last Connect is answered — not merely until
/// its deadline passed, or the next deadline would run out before its Connect
/// went. First come, first served, on each adapter: `LinkScheduler` says
/// whether an adapter takes one more link (`watch --all`); without it, any
/// adapter does. A value, no I/O: part of `BirdFleet`.
struct ConnectGate: Sendable {
    struct Attempt: Sendable {
        var id: BirdFleet.MachineID
        var device: ObjectPath
        /// Found once here rather than at every look at the line.
        var adapter: ObjectPath
        /// What was held back: the connect deadline and the Connect.
        var actions: [BirdFleet.Action]
    }

    /// The attempts waiting, in turn.
    private(set) var waiting: [Attempt] = []
    /// The attempt let through last, until its Connect is answered.
    /// `abandoned`: its machine gave it up (disconnected the device, or
    /// stopped): the reply is nobody's, so a machine that connects again does
    /// not take the old attempt's reply for its own.
    private var out: (id: BirdFleet.MachineID, device: ObjectPath, abandoned: Bool)?
    /// Devices that were connected before our Connect (another birdctl,
    /// bluetoothctl): their link is not ours to undo.
    private var borrowed: Set<ObjectPath> = []
    /// No attempt until the gap after the last one has passed (`watch --all`
    /// spaces its attempts, see `LinkScheduler.connectGap`).
    private var gapOpen = true

    var isWaiting: Bool { !waiting.isEmpty }

    func isWaiting(_ id: BirdFleet.MachineID) -> Bool { waiting.contains { $0.id == id } }

    /// Whether an attempt may be let through now (none is out, the gap has passed).
    var isOpen: Bool { gapOpen && out == nil }

    /// Whether machine `id` waits for the answer to its Connect to `device`
    /// (not an attempt it gave up).
    func awaitsReply(_ id: BirdFleet.MachineID, _ device: ObjectPath) -> Bool {
        guard let out else { return false }
        return out.id == id && out.device == device && !out.abandoned
    }

    /// A machine asks to connect: its actions wait their turn. A request it
    /// made before is replaced, but a connect deadline still held back with
    /// it is kept (a retry's Connect comes without one); and an attempt of
    /// its own still out is given up — it asks again, so the old answer is
    /// nobody's (its link may have come and gone before that answer).
    mutating func request(_ id: BirdFleet.MachineID, device: ObjectPath, _ actions: [BirdFleet.Action]) {
        if out?.id == id { out?.abandoned = true }
        let deadline = { (action: BirdFleet.Action) in
            if case .armTimer(.machine(_, .connect), _) = action { true } else { false }
        }
        let heldDeadline = actions.contains(where: deadline)
            ? [] : (waiting.first { $0.id == id }?.actions.filter(deadline) ?? [])
        waiting.removeAll { $0.id == id }
        waiting.append(Attempt(id: id, device: device, adapter: AdapterPool.adapter(of: device), actions: heldDeadline + actions))
    }

    /// A waiting machine connects to another device (its bird under another
    /// adapter): its place in line is kept.
    mutating func redirect(_ id: BirdFleet.MachineID, to device: ObjectPath) {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return }
        waiting[index].device = device
        waiting[index].adapter = AdapterPool.adapter(of: device)
        waiting[index].actions = waiting[index].actions.map {
            if case .connect(let id, _) = $0 { .connect(id, device) } else { $0 }
        }
    }

    /// A machine no longer connects (it stopped, was dropped, gave up): out
    /// of line, and the reply to its Connect, if one is out, is nobody's.
    mutating func withdraw(_ id: BirdFleet.MachineID) {
        waiting.removeAll { $0.id == id }
        if out?.id == id { out?.abandoned = true }
    }

    /// A machine undoes its link to `device`, or the attempt being made: the
    /// Connect out to it, if any, is given up. False if the link is
    /// borrowed (up before our Connect): no Disconnect is sent.
    mutating func disconnecting(_ device: ObjectPath) -> Bool {
        if out?.device == device { out?.abandoned = true }
        return borrowed.remove(device) == nil
    }

    /// The Connect out went to a device already connected (another
    /// program's link): it is borrowed from now on, before the answer comes,
    /// so that an attempt given up meanwhile does not undo it.
    mutating func sentWhileConnected(_ device: ObjectPath) {
        if out?.device == device { borrowed.insert(device) }
    }

    /// The device's link went down (or the device went): a link made later
    /// is ours.
    mutating func linkEnded(_ device: ObjectPath) { borrowed.remove(device) }

    /// bluetoothd went: every link went with it, and the Connect out (the bus
    /// answers it with NoReply) is nobody's: the machines start afresh.
    mutating func bluetoothGone() {
        borrowed.removeAll()
        out?.abandoned = true
    }

    /// The Connect of machine `id` was answered (a link it found up is
    /// borrowed already: `sentWhileConnected`). The next attempt may go.
    /// True if the reply is the machine's (its attempt out, not given up).
    mutating func replied(_ id: BirdFleet.MachineID) -> Bool {
        guard let attempt = out, attempt.id == id else { return false }
        out = nil
        return !attempt.abandoned
    }

    /// The next attempt, if none is out, the gap has passed and `mayGo` lets
    /// one through on its adapter: its held-back actions. A machine waits
    /// only for those ahead of it on the same adapter. `stillWants` says
    /// whether a machine still connects to that device; `mayGo(id, adapter)`
    /// is asked once per adapter on each pass, and a yes is the attempt let through.
    mutating func next(
        stillWants: (BirdFleet.MachineID, ObjectPath) -> Bool,
        mayGo: (BirdFleet.MachineID, ObjectPath) -> Bool
    ) -> [BirdFleet.Action] {
        guard isOpen else { return [] }
        // Adapters found full on this pass (with one adapter: at most one, and nothing allocated).
        var lastFull: ObjectPath?
        var moreFull: [ObjectPath] = []
        var index = 0
        while index < waiting.count {
            let attempt = waiting[index]
            guard stillWants(attempt.id, attempt.device) else {
                waiting.remove(at: index)
                continue
            }
            if attempt.adapter != lastFull && !moreFull.contains(attempt.adapter) {
                if mayGo(attempt.id, attempt.adapter) {
                    waiting.remove(at: index)
                    out = (attempt.id, attempt.device, false)
                    return attempt.actions
                }
                if let lastFull { moreFull.append(lastFull) }
                lastFull = attempt.adapter
            }
            index += 1
        }
        return []
    }

    /// An attempt went (or Bluetooth came back): none until the gap has passed.
    mutating func closeGap() { gapOpen = false }

    /// The gap after the last attempt has passed.
    mutating func gapPassed() { gapOpen = true }
}
