import BlueZ
import DBus

/// The central's state machine, after CoreBluetooth's flow: wait for
/// Bluetooth → scan → connect → resolve services → (watch: subscribe) → read
/// → (watch: stream → disconnected → scan again). A watch subscribes before
/// it reads, so a change between its first reading and its subscription
/// cannot be missed. It does no I/O: each event is one mutating
/// method that returns the actions for the driver to perform, timers included.
public struct BirdCentral: Sendable {
    public let configuration: Configuration

    private enum State: Hashable, Sendable {
        case waitingForBluetooth
        case scanning
        /// No address asked for: Birds were heard; listening a little longer for a nearer one.
        case listening(Candidates)
        case connecting(Peripheral, attempt: Int)
        case retryWait(Peripheral, attempt: Int)
        /// Connected; waiting for ServicesResolved.
        case resolving(Peripheral)
        /// A watch reads once subscribed; a read only reads.
        case reading(Link, pending: Set<BirdField>)
        case writing(Link)
        case subscribing(Link, pending: Set<BirdField>)
        case streaming(Link)
        /// The peripheral asked for security (or `birdctl pair`): pairing, then `then`.
        case pairing(Peripheral, then: AfterPairing)
        /// `birdctl unpair`: BlueZ is forgetting the device.
        case forgetting
        case finished
    }

    /// What a pairing was for: the step it interrupted, or (`birdctl pair`) nothing more.
    private enum AfterPairing: Hashable, Sendable {
        case subscribe(Link)
        case read(Link)
        case write(Link)
        case done
    }

    /// A connected peripheral and its Bird characteristics.
    private struct Link: Hashable, Sendable {
        var peripheral: Peripheral
        var characteristics: [BirdField: ObjectPath]

        func field(of path: ObjectPath) -> BirdField? {
            characteristics.first { $0.value == path }?.key
        }
    }

    /// The Birds heard in the listening window, and how strongly.
    private struct Candidates: Hashable, Sendable {
        struct Candidate: Hashable, Sendable {
            var peripheral: Peripheral
            var rssiTotal = 0
            var rssiSamples = 0
            var bonded = false
            /// The mean of the samples heard in the window; nil without any.
            var rssi: Int16? { rssiSamples == 0 ? nil : Int16(rssiTotal / rssiSamples) }
        }

        /// In the order first heard.
        var heard: [Candidate] = []

        mutating func add(_ sighting: Sighting) {
            let address = sighting.address.uppercased()
            var index = heard.firstIndex { $0.peripheral.address.uppercased() == address }
            if index == nil {
                heard.append(Candidate(peripheral: Peripheral(path: sighting.device, address: sighting.address, name: nil)))
                index = heard.count - 1
            }
            if let name = sighting.name { heard[index!].peripheral.name = name }
            heard[index!].bonded = sighting.bonded
            if let rssi = sighting.rssi {
                heard[index!].rssiTotal += Int(rssi)
                heard[index!].rssiSamples += 1
            }
        }

        /// The strongest on average; one heard without RSSI only if none had it;
        /// the first heard of equals.
        var nearest: Candidate {
            heard.enumerated().max { a, b in
                (a.element.rssi ?? Int16.min, -a.offset) < (b.element.rssi ?? Int16.min, -b.offset)
            }!.element
        }
    }

    private var state = State.waitingForBluetooth
    /// Bluetooth was usable once: later outages are waited out, not failures.
    private var wasReady = false
    private var hasConnected = false
    private var anyBadValue = false
    /// Connecting to a bird known from BlueZ's cache without having heard it:
    /// if that fails, discovery decides (see `deviceKnown`).
    private var connectingUnheard = false
    /// Fields whose StartNotify failed on the current link.
    private var unsubscribed: Set<BirdField> = []
    /// A pairing was tried on the current link (a second refusal ends it).
    private var pairedOnThisLink = false
    /// BlueZ holds a bond with the bird being connected: a bird the user
    /// paired with before, which may pair again.
    private var bonded = false
    /// The last unordered notification of each field whose read is pending
    /// (see `valueChanged`), reported after the read.
    private var heldNotifications: [BirdField: HeldNotification] = [:]
    private struct HeldNotification: Hashable, Sendable {
        var raw: [UInt8]
        var mtu: Int?
    }
    private var readings = 0

    public init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    public var isFinished: Bool { state == .finished }

    /// Connecting to its bird (or waiting to retry): no link yet.
    public var isFinding: Bool {
        switch state {
        case .connecting, .retryWait: true
        default: false
        }
    }

    /// The connected (or connecting) peripheral's device path.
    public var currentDevice: ObjectPath? {
        switch state {
        case .connecting(let p, _), .retryWait(let p, _), .resolving(let p), .pairing(let p, _): p.path
        case .reading(let link, _), .writing(let link), .subscribing(let link, _), .streaming(let link):
            link.peripheral.path
        case .waitingForBluetooth, .scanning, .listening, .forgetting, .finished: nil
        }
    }

    // MARK: Bluetooth availability

    /// The BlueZ tree is loaded; `adapter` is the chosen one, nil if none
    /// (or none named `requested`).
    public mutating func bluetoothReady(adapter: AdapterChoice?, requested: String? = nil) -> [Action] {
        guard state == .waitingForBluetooth else { return [] }
        guard let adapter else {
            if wasReady { return [.report(.waiting("no Bluetooth adapter; waiting for one"))] }
            return finish(.failed(.noAdapter(requested)))
        }
        guard adapter.powered else {
            if wasReady || configuration.isWatch && hasConnected {
                return [.report(.waiting("\(adapter.name) is powered off; waiting"))]
            }
            return finish(.failed(.adapterOff(adapter.name)))
        }
        let firstTime = !wasReady
        wasReady = true
        if case .unpair = configuration.mode, let address = configuration.address {
            state = .forgetting
            return [.forget(address)]
        }
        var actions = beginScanning()
        if firstTime, let duration = configuration.duration, configuration.isWatch {
            actions.insert(.armTimer(.duration, duration), at: 0)
        }
        return actions
    }

    /// bluetoothd is gone (or never was there).
    public mutating func bluetoothUnavailable(_ error: BlueZError) -> [Action] {
        guard state != .finished else { return [] }
        if !wasReady { return finish(.failed(.unavailable(error))) }
        return lostBluetooth(
            failure: .bluetoothUnavailable(error), waiting: "bluetoothd is not running; waiting for it to return")
    }

    /// The chosen adapter's power changed.
    public mutating func adapterPowered(_ powered: Bool, adapter: AdapterChoice) -> [Action] {
        if powered {
            return state == .waitingForBluetooth ? bluetoothReady(adapter: adapter) : []
        }
        guard state != .finished, state != .waitingForBluetooth else { return [] }
        return lostBluetooth(
            failure: .adapterOff(adapter.name), waiting: "\(adapter.name) was powered off; waiting")
    }

    /// The chosen adapter was removed.
    public mutating func adapterRemoved(name: String) -> [Action] {
        guard state != .finished, state != .waitingForBluetooth else { return [] }
        return lostBluetooth(failure: .noAdapter(name), waiting: "\(name) was removed; waiting")
    }

    /// bluetoothd or the adapter went away: the link (if any) is gone with it.
    private mutating func lostBluetooth(failure: CommandFailure, waiting: String) -> [Action] {
        var actions = stopTimers()
        if let peripheral = currentPeripheralIfConnected { actions.append(.report(.disconnected(peripheral))) }
        guard configuration.reconnects else {
            state = .finished
            return actions + [.finish(.failed(failure))]
        }
        state = .waitingForBluetooth
        return actions + [.report(.waiting(waiting))]
    }

    // MARK: Discovery

    /// The default listening window: long enough to hear every Bird in
    /// range a few times (they advertise every 20 ms to 1 s), short enough
    /// not to be noticed.
    public static let defaultListeningWindow = Duration.seconds(1)

    /// A device was heard after discovery started. The Bird asked for by
    /// address is connected to at once; without an address, the machine
    /// listens for `listeningWindow` from the first Bird heard and then
    /// connects to the strongest heard in it.
    public mutating func deviceSighted(_ sighting: Sighting) -> [Action] {
        guard sighting.matches(address: configuration.address, minimumRSSI: configuration.minimumRSSI) else { return [] }
        switch state {
        case .scanning:
            guard configuration.address == nil, let window = configuration.listeningWindow else {
                let peripheral = Peripheral(path: sighting.device, address: sighting.address, name: sighting.name)
                bonded = sighting.bonded
                return connect(to: peripheral, heardAt: sighting.rssi)
            }
            var candidates = Candidates()
            candidates.add(sighting)
            state = .listening(candidates)
            return [.cancelTimer(.scan), .armTimer(.listen, window)]
        case .listening(var candidates):
            candidates.add(sighting)
            state = .listening(candidates)
            return []
        default:
            return []
        }
    }

    private mutating func connect(to peripheral: Peripheral, heardAt rssi: Int16?) -> [Action] {
        state = .connecting(peripheral, attempt: 1)
        return [
            .cancelTimer(.scan), .stopScanning, .report(.found(peripheral, rssi: rssi)),
            .armTimer(.connect, configuration.connectTimeout), .connect(peripheral.path),
        ]
    }

    /// The bird asked for by address is in BlueZ's cache: connect to it
    /// straight away, as `bluetoothctl connect` does, instead of waiting to
    /// hear it advertise. If that fails or takes longer than
    /// `unheardConnectTimeout`, the machine falls back to discovery, so a
    /// cached bird that is out of range still ends as "not found".
    public mutating func deviceKnown(_ sighting: Sighting) -> [Action] {
        guard state == .scanning, configuration.address != nil, !hasConnected,
            sighting.matches(address: configuration.address, minimumRSSI: nil)
        else { return [] }
        let peripheral = Peripheral(path: sighting.device, address: sighting.address, name: sighting.name)
        state = .connecting(peripheral, attempt: 1)
        bonded = sighting.bonded
        connectingUnheard = true
        return [
            .cancelTimer(.scan), .report(.found(peripheral, rssi: nil)),
            .armTimer(.connect, min(configuration.connectTimeout, Self.unheardConnectTimeout)), .connect(peripheral.path),
        ]
    }

    /// How long a connection to a cached, unheard bird may take before discovery.
    public static let unheardConnectTimeout = Duration.milliseconds(2500)

    /// A connection to an unheard cached bird failed: look for it instead.
    private mutating func discoverInstead(of peripheral: Peripheral) -> [Action] {
        connectingUnheard = false
        return stopTimers() + [.disconnect(peripheral.path)] + beginScanning()
    }

    /// SetDiscoveryFilter or StartDiscovery failed.
    public mutating func scanFailed(_ error: BlueZError) -> [Action] {
        guard state == .scanning else { return [] }
        switch error.kind {
        case .notReady:
            // The adapter is (being) powered off; its power event decides.
            return []
        default:
            return stopTimers() + finish(.failed(.failed("start discovery", error)))
        }
    }

    // MARK: Connection

    public mutating func connectReplied(_ result: Result<Void, BlueZError>) -> [Action] {
        guard case .connecting(let peripheral, let attempt) = state else { return [] }
        switch result {
        case .success:
            state = .resolving(peripheral)
            hasConnected = true
            connectingUnheard = false
            pairedOnThisLink = false
            if configuration.mode == .pair {
                return [.cancelTimer(.connect), .report(.connected(peripheral))] + beginPairing(peripheral, then: .done)
            }
            return [.report(.connected(peripheral))]
        case .failure(let error) where connectingUnheard && error.kind != .permissionDenied:
            return discoverInstead(of: peripheral)
        case .failure(let error) where error.isTransient && attempt < configuration.connectAttempts:
            state = .retryWait(peripheral, attempt: attempt + 1)
            let delay = configuration.retryBackoff * (1 << (attempt - 1))
            return [.report(.retrying(peripheral, attempt: attempt + 1, error)), .armTimer(.retry, delay)]
        case .failure(let error):
            if error.kind == .permissionDenied { return stopTimers() + finish(.failed(.permissionDenied(error))) }
            return connectionEnded(peripheral, failure: .connectFailed(error), wasConnected: false)
        }
    }

    /// The device's services are resolved; `characteristics` are the Bird
    /// characteristics found under it.
    public mutating func servicesResolved(device: ObjectPath, characteristics: [BirdField: ObjectPath]) -> [Action] {
        let peripheral: Peripheral
        switch state {
        case .resolving(let p) where p.path == device: peripheral = p
        case .connecting(let p, _) where p.path == device:
            // ServicesResolved can precede Connect's reply (cached GATT).
            peripheral = p
            hasConnected = true
        default: return []
        }
        var actions: [Action] = []
        if case .connecting = state { actions.append(.report(.connected(peripheral))) }
        let missing = configuration.fields.filter { characteristics[$0] == nil }
        guard missing.isEmpty else {
            // BlueZ may announce ServicesResolved before the GATT objects: give
            // them a moment (the driver calls again as they appear).
            state = .resolving(peripheral)
            return actions + [.cancelTimer(.connect), .armTimer(.services, Self.servicesGrace)]
        }
        // Only the fields asked for: another client's read of one we do not
        // watch shows as a change, and its removal is not ours to react to.
        let watched = characteristics.filter { configuration.fields.contains($0.key) }
        let link = Link(peripheral: peripheral, characteristics: watched)
        actions += [.cancelTimer(.connect), .cancelTimer(.services)]
        if case .write(let value) = configuration.mode {
            state = .writing(link)
            return actions + [.write(value.field, characteristics[value.field]!, BirdCodec.encode(value))]
        }
        if configuration.isWatch {
            state = .subscribing(link, pending: Set(configuration.fields))
            unsubscribed = []
            return actions + configuration.fields.map { .startNotify($0, characteristics[$0]!) }
        }
        return actions + beginReading(link)
    }

    private mutating func beginReading(_ link: Link) -> [Action] {
        state = .reading(link, pending: Set(configuration.fields))
        heldNotifications = [:]
        return configuration.fields.map { .read($0, link.characteristics[$0]!) }
    }

    /// The write (with response) of `set` completed.
    public mutating func writeCompleted(_ result: Result<Void, BlueZError>) -> [Action] {
        guard case .writing(let link) = state, case .write(let value) = configuration.mode else { return [] }
        if case .failure(let error) = result, error.needsPairing {
            return securityRequired(link, then: .write(link), error)
        }
        state = .finished
        switch result {
        case .success:
            return [.disconnect(link.peripheral.path), .finish(.success)]
        case .failure(let error):
            return [.disconnect(link.peripheral.path),
                    .finish(.failed(.failed("write \(value.field)", error)))]
        }
    }

    /// How long after ServicesResolved the Bird characteristics may still be appearing.
    static let servicesGrace: Duration = .seconds(2)

    /// Connected went false for a device.
    public mutating func deviceDisconnected(_ device: ObjectPath) -> [Action] {
        guard currentDevice == device else { return [] }
        // While Connect is pending, BlueZ reports the outcome in its reply.
        if case .connecting = state { return [] }
        if case .retryWait = state { return [] }
        return linkLost()
    }

    /// The device object left BlueZ's tree.
    public mutating func deviceRemoved(_ device: ObjectPath) -> [Action] {
        guard currentDevice == device else { return [] }
        return linkLost()
    }

    private mutating func linkLost() -> [Action] {
        guard let peripheral = currentPeripheral else { return [] }
        let wasConnected = currentPeripheralIfConnected != nil
        return connectionEnded(peripheral, failure: .connectionLost, wasConnected: wasConnected)
    }

    /// A link ended (or never came up): stream on after a rescan, or fail.
    private mutating func connectionEnded(_ peripheral: Peripheral, failure: CommandFailure, wasConnected: Bool) -> [Action] {
        var actions = stopTimers()
        if wasConnected { actions.append(.report(.disconnected(peripheral))) }
        if configuration.reconnects && hasConnected {
            return actions + beginScanning()
        }
        state = .finished
        return actions + [.finish(.failed(failure))]
    }

    // MARK: Pairing

    /// A read, subscription or write was refused for want of security: pair
    /// and try again, once per link — unless pairing is off, or was just done.
    /// A bird the user chose to bond with: one named on the command line or
    /// in `pairsWith`, or one BlueZ already holds a bond with. Anything else
    /// that asks for pairing may be a stranger (`watch --all` hears every
    /// device advertising the Bird Service) and is not bonded with.
    private func mayPair(_ peripheral: Peripheral) -> Bool {
        bonded || configuration.pairsWith.contains(peripheral.address.uppercased())
    }

    /// A read, subscription or write was refused for want of security: pair
    /// and try again, once per link — unless pairing is off, or was just done,
    /// or the bird is not one the user named.
    private mutating func securityRequired(_ link: Link, then next: AfterPairing, _ error: BlueZError) -> [Action] {
        guard configuration.pairs, !pairedOnThisLink, mayPair(link.peripheral) else {
            state = .finished
            let failure: CommandFailure =
                if pairedOnThisLink { .pairingFailed(error) }
                else if configuration.pairs { .pairingNotNamed(link.peripheral, error) }
                else { .pairingRequired(error) }
            return stopTimers() + cleanUp(link, subscribed: configuration.isWatch) + [.finish(.failed(failure))]
        }
        return beginPairing(link.peripheral, then: next)
    }

    /// Pairing has a deadline of its own (Pair's reply may never come:
    /// bluetoothd 5.66), a little past the one Pair is sent with.
    private mutating func beginPairing(_ peripheral: Peripheral, then next: AfterPairing) -> [Action] {
        state = .pairing(peripheral, then: next)
        pairedOnThisLink = true
        return [
            .report(.pairing(peripheral)), .armTimer(.pairing, configuration.pairTimeout + Self.pairingGrace),
            .pair(peripheral.path),
        ]
    }

    /// How long past Pair's own timeout the machine waits for its answer.
    static let pairingGrace = Duration.seconds(1)

    /// The peripheral being paired with at `device`, if this machine is pairing it.
    public func pairing(_ device: ObjectPath) -> Peripheral? {
        if case .pairing(let peripheral, _) = state, peripheral.path == device { peripheral } else { nil }
    }

    /// BlueZ says the device is paired (`Paired` turned true). bluetoothd 5.66
    /// never answers a Pair whose bonding completes while the link's own
    /// service discovery runs (fixed in 5.87): this is its word.
    public mutating func devicePaired(_ device: ObjectPath) -> [Action] {
        guard pairing(device) != nil else { return [] }
        return pairCompleted(.success(()))
    }

    /// Device1.Pair answered. Already paired counts as paired.
    public mutating func pairCompleted(_ result: Result<Void, BlueZError>) -> [Action] {
        guard case .pairing(let peripheral, let next) = state else { return [] }
        if case .failure(let error) = result, !error.isAlreadyPaired {
            state = .finished
            // A pairing that timed out is still running in bluetoothd: cancel it.
            let cancel: [Action] = error.kind == .timeout ? [.cancelPairing(peripheral.path)] : []
            return stopTimers() + cancel + [.disconnect(peripheral.path), .finish(.failed(.pairingFailed(error)))]
        }
        bonded = true
        let paired: [Action] = [.cancelTimer(.pairing), .report(.paired(peripheral))]
        switch next {
        case .subscribe(let link):
            state = .subscribing(link, pending: Set(configuration.fields))
            unsubscribed = []
            return paired + configuration.fields.map { .startNotify($0, link.characteristics[$0]!) }
        case .read(let link):
            return paired + beginReading(link)
        case .write(let link):
            guard case .write(let value) = configuration.mode else { return [] }
            state = .writing(link)
            return paired + [.write(value.field, link.characteristics[value.field]!, BirdCodec.encode(value))]
        case .done:
            state = .finished
            return paired + [.disconnect(peripheral.path), .finish(.success)]
        }
    }

    /// `birdctl unpair`: BlueZ forgot the device (and its bond), or could not.
    public mutating func forgetCompleted(_ result: Result<Void, BlueZError>) -> [Action] {
        guard state == .forgetting else { return [] }
        state = .finished
        switch result {
        case .success: return [.finish(.success)]
        case .failure(let error) where error.kind == .notFound || error.kind == .doesNotExist: return [.finish(.failed(.notFound))]
        case .failure(let error): return [.finish(.failed(.failed("unpair", error)))]
        }
    }

    // MARK: Reading and streaming

    public mutating func readCompleted(_ field: BirdField, _ result: Result<[UInt8], BlueZError>) -> [Action] {
        guard case .reading(let link, _) = state else { return [] }
        let actions = settleRead(field, result)
        guard let held = heldNotifications.removeValue(forKey: field), let path = link.characteristics[field] else {
            return actions
        }
        // The bytes the read returned: the update the read already reported (its
        // notification overtook the reply), not a newer one.
        if case .success(let raw) = result, raw == held.raw { return actions }
        return actions + valueChanged(path, held.raw, mtu: held.mtu, ordered: false)
    }

    private mutating func settleRead(_ field: BirdField, _ result: Result<[UInt8], BlueZError>) -> [Action] {
        guard case .reading(let link, var pending) = state, pending.remove(field) != nil else { return [] }
        var actions: [Action]
        switch result {
        case .success(let raw):
            actions = report(field, raw, from: link, notified: false)
        case .failure(let error) where error.needsPairing:
            return securityRequired(link, then: .read(link), error)
        case .failure(let error):
            if !configuration.isWatch {
                state = .finished
                return [.disconnect(link.peripheral.path), .finish(.failed(.failed("read \(field)", error)))]
            }
            actions = [.report(.operationFailed(link.peripheral, "read \(field)", error))]
        }
        if state == .finished { return actions }
        guard pending.isEmpty else {
            state = .reading(link, pending: pending)
            return actions
        }
        guard configuration.isWatch else {
            state = .finished
            return actions + [.disconnect(link.peripheral.path), .finish(anyBadValue ? .badValue : .success)]
        }
        state = .streaming(link)
        return actions
    }

    public mutating func notifyStarted(_ field: BirdField, _ result: Result<Void, BlueZError>) -> [Action] {
        guard case .subscribing(let link, var pending) = state, pending.remove(field) != nil else { return [] }
        var actions: [Action] = []
        if case .failure(let error) = result, error.needsPairing {
            return securityRequired(link, then: .subscribe(link), error)
        }
        if case .failure(let error) = result {
            // One field that cannot be subscribed is reported; the others stream.
            // With none left there is nothing to watch.
            unsubscribed.insert(field)
            guard unsubscribed.count < configuration.fields.count else {
                state = .finished
                return cleanUp(link, subscribed: true) + [.finish(.failed(.failed("subscribe to \(field)", error)))]
            }
            actions.append(.report(.operationFailed(link.peripheral, "subscribe to \(field)", error)))
        }
        guard pending.isEmpty else {
            state = .subscribing(link, pending: pending)
            return actions
        }
        return actions + beginReading(link)
    }

    /// A characteristic left BlueZ's tree while the link stayed up (the
    /// peripheral's GATT database changed). If it is one of ours, a watch
    /// reports it and reconnects to resolve the services again; a read or
    /// write fails.
    public mutating func characteristicRemoved(_ path: ObjectPath) -> [Action] {
        let link: Link
        let subscribed: Bool
        switch state {
        case .reading(let l, _): (link, subscribed) = (l, configuration.isWatch)
        case .writing(let l): (link, subscribed) = (l, false)
        case .subscribing(let l, _), .streaming(let l): (link, subscribed) = (l, true)
        default: return []
        }
        guard let field = link.field(of: path) else { return [] }
        let error = BlueZError(.doesNotExist, message: "the \(field) characteristic went away")
        let actions = stopTimers() + cleanUp(link, subscribed: subscribed)
        guard configuration.reconnects else {
            state = .finished
            return actions + [.finish(.failed(.failed("use \(field)", error)))]
        }
        return actions + [.report(.operationFailed(link.peripheral, "watch \(field)", error)),
                          .report(.disconnected(link.peripheral))] + beginScanning()
    }

    /// A characteristic's value changed (a notification). Until a field's
    /// first read has answered, its changes are not reported: BlueZ echoes
    /// the value it read as a change just before the read's reply, and a
    /// notification that arrives before that reply is older than the value
    /// the reply carries.
    /// A notification (or BlueZ's echo of a read) over a link whose ATT MTU
    /// is `mtu`, if known. A notification carries at most MTU − 3 bytes, and
    /// BlueZ passes on a longer value cut there: one that fills the whole
    /// space may be cut, so the field is read instead, and the read's value
    /// (the whole one) is reported. Notifications of it meanwhile are
    /// superseded by the read.
    ///
    /// `ordered`: false for a notification that came another way than the
    /// read's reply (AcquireNotify's socket, past dbus-daemon): arriving
    /// before the reply, it may still be newer than the value read. The last
    /// such one is kept and reported after the read, so the newest value is
    /// the last one printed.
    public mutating func valueChanged(
        _ characteristic: ObjectPath, _ raw: [UInt8], mtu: Int? = nil, ordered: Bool = true
    ) -> [Action] {
        let link: Link
        let unread: Set<BirdField>
        switch state {
        case .streaming(let l): (link, unread) = (l, [])
        case .reading(let l, let pending) where configuration.isWatch: (link, unread) = (l, pending)
        default: return []
        }
        guard let field = link.field(of: characteristic) else { return [] }
        if unread.contains(field) {
            if !ordered { heldNotifications[field] = HeldNotification(raw: raw, mtu: mtu) }
            return []
        }
        if let mtu, mtu > 3, raw.count >= mtu - 3 {
            state = .reading(link, pending: unread.union([field]))
            return [.read(field, characteristic)]
        }
        return report(field, raw, from: link, notified: true)
    }

    private mutating func report(_ field: BirdField, _ raw: [UInt8], from link: Link, notified: Bool) -> [Action] {
        var actions: [Action]
        switch BirdCodec.decode(field, raw) {
        case .success(let value):
            actions = [.report(.reading(link.peripheral, value, raw: raw, notified: notified))]
            readings += 1
        case .failure(let error):
            anyBadValue = true
            actions = [.report(.badValue(link.peripheral, error))]
        }
        if configuration.isWatch, let maximum = configuration.maximumReadings, readings >= maximum {
            actions += stopTimers(includingDuration: true) + cleanUp(link, subscribed: true) + [.finish(.success)]
            state = .finished
        }
        return actions
    }

    // MARK: Timers and stopping

    public mutating func timerFired(_ timer: Timer) -> [Action] {
        switch (timer, state) {
        case (.scan, .scanning):
            state = .finished
            return [.stopScanning, .finish(.failed(.notFound))]
        case (.listen, .listening(let candidates)):
            let nearest = candidates.nearest
            bonded = nearest.bonded
            return connect(to: nearest.peripheral, heardAt: nearest.rssi)
        case (.retry, .retryWait(let peripheral, let attempt)):
            state = .connecting(peripheral, attempt: attempt)
            return [.connect(peripheral.path)]
        case (.connect, .connecting(let peripheral, _)) where connectingUnheard:
            return discoverInstead(of: peripheral)
        case (.connect, .connecting(let peripheral, _)), (.connect, .retryWait(let peripheral, _)),
            (.connect, .resolving(let peripheral)):
            var actions = stopTimers() + [.disconnect(peripheral.path)]
            let wasConnected = state == .resolving(peripheral)
            if wasConnected { actions.append(.report(.disconnected(peripheral))) }
            if configuration.reconnects && hasConnected { return actions + beginScanning() }
            state = .finished
            return actions + [.finish(.failed(.connectTimeout))]
        case (.pairing, .pairing):
            return pairCompleted(.failure(BlueZError(.timeout, message: "no answer to Pair")))
        case (.services, .resolving(let peripheral)):
            var actions = stopTimers() + [.disconnect(peripheral.path), .report(.disconnected(peripheral))]
            actions.append(.finish(.failed(.serviceMissing(configuration.fields))))
            state = .finished
            return actions
        case (.duration, _) where state != .finished:
            return stop(outcome: .success)
        default:
            return []
        }
    }

    /// SIGINT/SIGTERM: undo what we did (StopNotify, Disconnect, StopDiscovery).
    /// Ctrl-C is how a watch normally ends; a read cut short is "interrupted".
    public mutating func stopRequested() -> [Action] {
        stop(outcome: configuration.isWatch ? .success : .interrupted)
    }

    private mutating func stop(outcome: CommandOutcome) -> [Action] {
        var actions = stopTimers(includingDuration: true)
        switch state {
        case .finished: return []
        case .waitingForBluetooth: break
        case .scanning, .listening: actions.append(.stopScanning)
        case .connecting(let p, _), .retryWait(let p, _), .resolving(let p): actions.append(.disconnect(p.path))
        case .pairing(let p, _): actions += [.cancelPairing(p.path), .disconnect(p.path)]
        case .forgetting: break
        case .reading(let link, _): actions += cleanUp(link, subscribed: configuration.isWatch)
        case .writing(let link): actions += cleanUp(link, subscribed: false)
        case .subscribing(let link, _), .streaming(let link): actions += cleanUp(link, subscribed: true)
        }
        state = .finished
        return actions + [.finish(outcome)]
    }

    // MARK: Helpers

    private mutating func beginScanning() -> [Action] {
        state = .scanning
        var actions: [Action] = [.startScanning]
        // The find deadline is for finding a bird at first, not for finding it again.
        if let timeout = configuration.scanTimeout, !hasConnected { actions.append(.armTimer(.scan, timeout)) }
        return actions
    }

    /// StopNotify what we subscribed to, then Disconnect.
    private func cleanUp(_ link: Link, subscribed: Bool) -> [Action] {
        let stops = subscribed ? configuration.fields.compactMap { link.characteristics[$0].map(Action.stopNotify) } : []
        return stops + [.disconnect(link.peripheral.path)]
    }

    private func stopTimers(includingDuration: Bool = false) -> [Action] {
        var timers: [Action] = [
            .cancelTimer(.scan), .cancelTimer(.listen), .cancelTimer(.connect), .cancelTimer(.retry), .cancelTimer(.services),
            .cancelTimer(.pairing),
        ]
        if includingDuration { timers.append(.cancelTimer(.duration)) }
        return timers
    }

    private mutating func finish(_ outcome: CommandOutcome) -> [Action] {
        state = .finished
        return [.finish(outcome)]
    }

    private var currentPeripheral: Peripheral? {
        switch state {
        case .connecting(let p, _), .retryWait(let p, _), .resolving(let p), .pairing(let p, _): p
        case .reading(let link, _), .writing(let link), .subscribing(let link, _), .streaming(let link): link.peripheral
        default: nil
        }
    }

    /// The peripheral if the link is up (Connect has succeeded).
    private var currentPeripheralIfConnected: Peripheral? {
        switch state {
        case .resolving(let p), .pairing(let p, _): p
        case .reading(let link, _), .writing(let link), .subscribing(let link, _), .streaming(let link): link.peripheral
        default: nil
        }
    }
}
