import DBus

/// The devices whose GetAll is in flight, in a tree of adapters only
/// (`BlueZClient.Scope.adapters`): a device BlueZ cached before the tree was
/// loaded enters it when it is heard again. Loop-confined (in the client).
struct HeardDevices {
    private var pending: Set<ObjectPath> = []

    /// Whether to ask for the device now: not while a GetAll of it is in flight.
    mutating func ask(_ device: ObjectPath) -> Bool { pending.insert(device).inserted }

    /// The reply is in. (A device removed before it makes it an error:
    /// bluetoothd sends in order.)
    mutating func answered(_ device: ObjectPath) { pending.remove(device) }
}

extension BlueZClient {
    /// A cached device heard again (`ObjectTree.unknownDeviceHeard`): its
    /// Device1 properties are asked once (and, if it is connected, the GATT
    /// objects below it), and it enters the tree with a `.deviceAdded`.
    /// Signals about it before a reply are already in the reply (bluetoothd
    /// sends in order); those after it find it in the tree.
    func heard(_ device: ObjectPath) {
        guard heardDevices.ask(device) else { return }
        let current = treeGeneration
        perform(.getAll(device, interface: BlueZNames.device)) { [self] result in
            guard current == treeGeneration else { return }
            heardDevices.answered(device)
            // Already in: announced (InterfacesAdded) while the reply was on its way.
            guard case .success(let properties) = result, tree.properties(device, BlueZNames.device) == nil
            else { return }
            tree.set(device, interface: BlueZNames.device, properties: properties)
            guard tree.device(device)?.connected == true else { return announce(device) }
            loadBelow(device) { [self] in announce(device) }
        }
    }

    /// A device BlueZ may hold connected that a tree of adapters does not
    /// show: a connected device does not advertise, so it is not heard
    /// again (an earlier run's link, kept by bluetoothd). Its Device1
    /// properties are asked; connected, it enters the tree with what is
    /// below it and `body` gets it; else `body` gets nil and the tree stays
    /// as it was (no cached device is brought in). On the loop.
    public func linkedDevice(_ device: ObjectPath, _ body: @escaping @Sendable (Device?) -> Void) {
        if holdsEveryDevice || tree.device(device) != nil { return body(tree.device(device).flatMap { $0.connected ? $0 : nil }) }
        // One GetAll per remembered bird, once per start: not the whole cache (GetManagedObjects).
        let current = treeGeneration
        perform(.getAll(device, interface: BlueZNames.device)) { [self] result in
            guard current == treeGeneration, case .success(let properties) = result, properties["Connected"]?.bool == true
            else { return body(nil) }
            if tree.properties(device, BlueZNames.device) == nil { tree.set(device, interface: BlueZNames.device, properties: properties) }
            loadBelow(device) { [self] in body(tree.device(device)) }
        }
    }

    /// A tree that does not hold every device may lack the GATT objects of a
    /// device that resolved its services: bluetoothd keeps a bird's GATT
    /// objects from an earlier connection (its GATT cache) and announces
    /// nothing when it connects again. Loads what is below `device` (once),
    /// then `body`, on the loop. A tree of everything has them already.
    public func loadBelow(_ device: ObjectPath, _ body: @escaping @Sendable () -> Void) {
        guard !holdsEveryDevice else { return body() }
        let current = treeGeneration
        FocusedLoad(client: self, address: nil) { [self] in current == treeGeneration }.start(below: device) { [self] _ in
            if current == treeGeneration { body() }
        }
    }

    private func announce(_ device: ObjectPath) {
        guard let view = tree.device(device) else { return }
        pendingEvents.append(.deviceAdded(view))
        deliverPendingEvents()
    }

    /// The devices on `adapter` BlueZ heard recently (they have an RSSI) or
    /// is connected to, for a discovery that has just started: BlueZ does not
    /// announce them again while nothing changes. A tree that holds every
    /// device answers at once, and so does a tree of adapters when
    /// `othersDiscovering` is false: the discovery that starts then hears
    /// every device in range afresh, and bluetoothd announces each one
    /// (InterfacesAdded, or an RSSI change, which brings a cached device in).
    /// When another client's discovery was already running, bluetoothd may
    /// not hear them anew (an unchanged filter does not restart the scan,
    /// and controllers drop repeated reports), so BlueZ is asked once,
    /// with GetManagedObjects, and the tree keeps those devices (and what is
    /// below them) — the one case whose cost grows with BlueZ's cache.
    /// `body` runs on the loop.
    public func devicesInRange(
        on adapter: ObjectPath, othersDiscovering: Bool, _ body: @escaping @Sendable ([Device]) -> Void
    ) {
        guard scope == .adapters, othersDiscovering else { return body(tree.devicesInRange(on: adapter)) }
        let current = treeGeneration
        perform(.getManagedObjects()) { [self] result in
            guard current == treeGeneration else { return body([]) }
            if case .success(let all) = result {
                let inRange = all.devicesInRange(on: adapter).map(\.path)
                for (path, interfaces) in all.objects
                where inRange.contains(where: { path == $0 || path.isDescendant(of: $0) }) {
                    for (interface, properties) in interfaces { tree.set(path, interface: interface, properties: properties) }
                }
            }
            body(tree.devicesInRange(on: adapter))
        }
    }
}
