import DBus

/// The fleet's machines and what it keeps of each: the bird it follows
/// (`all`), that bird's last sighting, the characteristics found to be its
/// own, whether its first scan looked in BlueZ's cache; and the links the
/// machines made. A collection of `(id, central)` in the order the machines
/// were started, which is the order of their ids. A value, no I/O: part of
/// `BirdFleet`, which runs the events on the machines.
struct FleetMachines: RandomAccessCollection, Sendable {
    typealias MachineID = BirdFleet.MachineID
    typealias Element = (id: MachineID, central: BirdCentral)

    /// Few (one per Bird in range). Each is appended with the next id, and
    /// removals keep the order (`index(of:)` relies on it).
    private var list: [Element] = []
    private var nextID: MachineID = 0
    /// `all`: each machine's bird.
    private(set) var byAddress: [BluetoothAddress: MachineID] = [:]
    /// `all`: the last sighting of each machine's bird.
    private(set) var sightings: [MachineID: Sighting] = [:]
    /// `all`: the machine each notifying characteristic was last found to belong to (see `owner(of:)`).
    private var notifiers: [ObjectPath: MachineID] = [:]
    /// Machines whose first scan looked in BlueZ's cache.
    private var lookedUp: Set<MachineID> = []
    /// `all`: devices with a link up, from Connect's success to Connected
    /// turning false — also while a link we undo is still going down
    /// (bluetoothd holds a Disconnect for 2 s), its machine dropped or not:
    /// the scheduler counts them.
    private(set) var linked: Set<ObjectPath> = []

    var startIndex: Int { list.startIndex }
    var endIndex: Int { list.endIndex }
    subscript(position: Int) -> Element { list[position] }

    /// The id of the machine at `index` (without copying its central).
    func id(at index: Int) -> MachineID { list[index].id }

    // MARK: Machines

    /// An id of no machine, for a link made for a guest (`GuestLinks`).
    mutating func newID() -> MachineID {
        defer { nextID += 1 }
        return nextID
    }

    /// Starts a machine; with `address`, the one following that bird, last seen in `sighting`.
    mutating func add(_ central: BirdCentral, for address: BluetoothAddress? = nil, seen sighting: Sighting? = nil) -> MachineID {
        let id = nextID
        nextID += 1
        list.append((id, central))
        if let address { byAddress[address] = id }
        sightings[id] = sighting
        return id
    }

    /// Forgets machine `id` and all that was kept of it (but not its link,
    /// which is counted until it is down).
    mutating func drop(_ id: MachineID) {
        list.removeAll { $0.id == id }
        sightings[id] = nil
        lookedUp.remove(id)
        if !notifiers.isEmpty { notifiers = notifiers.filter { $0.value != id } }
        if let address = byAddress.first(where: { $0.value == id })?.key { byAddress[address] = nil }
    }

    /// Forgets every machine, and all that was kept of them.
    mutating func removeAll() {
        list.removeAll()
        byAddress.removeAll()
        sightings.removeAll()
        notifiers.removeAll()
        lookedUp.removeAll()
    }

    /// Where machine `id` is: a binary search (the list is sorted by id),
    /// not a walk through every bird: each notification and each machine's
    /// timer looks its machine up.
    func index(of id: MachineID) -> Int? {
        var low = 0
        var high = list.count
        while low < high {
            let middle = (low + high) / 2
            if list[middle].id < id { low = middle + 1 } else { high = middle }
        }
        return low < list.count && list[low].id == id ? low : nil
    }

    /// Machine `id`'s central, if it runs.
    func central(_ id: MachineID) -> BirdCentral? {
        index(of: id).map { list[$0].central }
    }

    /// Runs `event` on the machine at `index`, in place.
    mutating func run<Result>(at index: Int, _ event: (inout BirdCentral) -> Result) -> Result {
        event(&list[index].central)
    }

    /// `all`: the machine following the bird at `address`.
    func id(of address: BluetoothAddress) -> MachineID? { byAddress[address] }

    /// Machine `id`'s bird was seen in `sighting`.
    mutating func sighted(_ id: MachineID, _ sighting: Sighting) { sightings[id] = sighting }

    /// The address of the bird last seen at `device`.
    func address(of device: ObjectPath) -> BluetoothAddress? {
        sightings.values.first(where: { $0.device == device })?.address
    }

    /// True the first time it is asked of machine `id`: whether its scan
    /// may start from BlueZ's cache (later ones, after a lost link, listen).
    mutating func firstLookUp(_ id: MachineID) -> Bool { lookedUp.insert(id).inserted }

    /// Birds held (not polled) by the machines.
    var heldBirds: Int { list.count { $0.central.configuration.pollInterval == nil } }

    /// The links the birds may still need beyond those they have up or being
    /// made (see `linksUp`): one for each held bird without, and one for the
    /// polled birds' turns if none is taking one.
    func linksReservedForBirds(waiting waits: (MachineID) -> Bool) -> Int {
        func counted(_ machine: Element) -> Bool {
            guard let device = machine.central.currentDevice else { return false }
            return linked.contains(device) || (machine.central.isFinding && !waits(machine.id))
        }
        let held = list.count { $0.central.configuration.pollInterval == nil && !counted($0) }
        let polled = list.filter { $0.central.configuration.pollInterval != nil }
        return held + (!polled.isEmpty && !polled.contains(where: counted) ? 1 : 0)
    }

    // MARK: Notifications

    /// The index of the machine whose bird is at or above `characteristic`
    /// (nil: nobody's). The machine found is remembered per characteristic
    /// until it is dropped: each bird has one machine, and a machine without
    /// a link ignores notifications, so the entry stays right without being
    /// checked at each notification (checking would copy the machine's state).
    mutating func owner(of characteristic: ObjectPath) -> Int? {
        if let known = notifiers[characteristic], let index = index(of: known) { return index }
        guard let found = list.firstIndex(where: { Self.owns($0.central, characteristic) }) else { return nil }
        // Bounded: a few characteristics per bird (more only if a bird's paths changed).
        if notifiers.count >= 8 * list.count + 64 { notifiers.removeAll() }
        notifiers[characteristic] = list[found].id
        return found
    }

    private static func owns(_ central: BirdCentral, _ characteristic: ObjectPath) -> Bool {
        guard let device = central.currentDevice else { return false }
        return characteristic.isDescendant(of: device)
    }

    // MARK: Links

    /// A link to `device` is up.
    mutating func linkUp(_ device: ObjectPath) { linked.insert(device) }

    /// The link to `device` is down.
    mutating func linkDown(_ device: ObjectPath) { linked.remove(device) }

    /// The links on `adapter` are gone with it; nil: every link is.
    mutating func linksGone(on adapter: ObjectPath?) {
        guard let adapter else { return linked.removeAll() }
        linked = linked.filter { AdapterPool.adapter(of: $0) != adapter }
    }

    /// Links up (or still going down), and those being made: machines
    /// connecting, but not those whose Connect still `waits` at the gate.
    func linksUp(waiting waits: (MachineID) -> Bool) -> Int {
        linked.count + list.count {
            $0.central.isFinding && !linked.contains($0.central.currentDevice ?? "/") && !waits($0.id)
        }
    }

    /// The links up or being made on one adapter, and those up. (Compared
    /// by path prefix, nothing allocated: the gate asks while connects wait.)
    func linksUp(on adapter: ObjectPath, waiting waits: (MachineID) -> Bool) -> (up: Int, linked: Int) {
        var here = 0
        for device in linked where device.isDescendant(of: adapter) { here += 1 }
        let making = list.count {
            guard $0.central.isFinding, let device = $0.central.currentDevice else { return false }
            return !linked.contains(device) && device.isDescendant(of: adapter) && !waits($0.id)
        }
        return (here + making, here)
    }
}
