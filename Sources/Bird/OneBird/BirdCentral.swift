import BlueZ
import DBus

/// One bird's session as a state machine, after CoreBluetooth's flow: wait
/// for Bluetooth → find the bird (`BirdFinder`: scan, listen, connect, retry)
/// → work on the link (`BirdLink`: resolve, pair if asked, write, subscribe,
/// read, stream) → (watch: the link lost → find it again). A watch
/// subscribes before it reads, so a change between its first reading and its
/// subscription cannot be missed. `birdctl unpair` needs no link and uses
/// neither half. It does no I/O: each event is one mutating method that
/// returns the actions for the driver to perform, timers included.
public struct BirdCentral: Sendable {
    public let configuration: Configuration

    private enum Phase: Sendable {
        case waitingForBluetooth
        case finding(BirdFinder)
        case onLink(BirdLink)
        /// A polled bird between polls (disconnected), until the `poll` timer.
        case resting(Peripheral)
        /// `birdctl unpair`: BlueZ is forgetting the device.
        case forgetting
        case finished
    }

    /// What a half of the machine decided.
    enum Step: Sendable {
        /// It goes on: perform these.
        case next([Action])
        /// The finder connected: the link's work begins.
        case linked(Peripheral, bonded: Bool)
        /// The link is gone and the bird is to be found again.
        case findAgain([Action])
        /// A polled bird was read: it rests until its next poll.
        case rest(Peripheral, [Action])
        /// The session is over (the `finish` action follows these).
        case finished(CommandOutcome, [Action])
    }

    private var phase = Phase.waitingForBluetooth
    /// Notifications the hot path read on the link and has not yet told it
    /// (its watchdog counts them): told before the link's next event.
    private var untoldNotifications = 0
    /// Bluetooth was usable once: later outages are waited out, not failures.
    private var wasReady = false
    /// A link was up once: a watch then finds its bird again after losing it.
    private var hasConnected = false
    private var readings = 0

    public init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    /// A bird polled from now on that was held until now (its link being
    /// undone): it rests, then polls (`configuration.pollInterval`).
    public static func polling(_ configuration: Configuration, _ peripheral: Peripheral) -> (BirdCentral, [Action]) {
        var central = BirdCentral(configuration)
        central.wasReady = true
        central.hasConnected = true
        central.phase = .resting(peripheral)
        return (central, [.armTimer(.poll, configuration.pollInterval ?? .zero)])
    }

    public var isFinished: Bool { if case .finished = phase { true } else { false } }

    /// Polled, between two polls (no link, none being made).
    public var isResting: Bool { if case .resting = phase { true } else { false } }

    /// Connecting to its bird (or waiting to retry): no link yet.
    public var isFinding: Bool {
        if case .finding(let finder) = phase { finder.peripheral != nil } else { false }
    }

    /// Looking for its bird (discovery on, not yet connecting).
    public var isScanning: Bool {
        if case .finding(let finder) = phase { finder.state == .scanning } else { false }
    }

    /// `watch --all` with several adapters: its Connect, still waiting at the
    /// gate (not sent), goes to the bird's device object under another
    /// adapter. False if it is not connecting.
    public mutating func redirect(to device: ObjectPath) -> Bool {
        guard case .finding(var finder) = phase, finder.redirect(to: device) else { return false }
        phase = .finding(finder)
        return true
    }

    /// Connecting to a bird it never had a link to (a bird new to the command).
    public var isFindingAnew: Bool { !hasConnected && isFinding }

    /// The connected (or connecting) peripheral's device path.
    public var currentDevice: ObjectPath? {
        switch phase {
        case .finding(let finder): finder.peripheral?.path
        case .onLink(let link): link.peripheral.path
        case .waitingForBluetooth, .resting, .forgetting, .finished: nil
        }
    }

    /// The bird this machine has a link to, if any.
    public var linkedAddress: BluetoothAddress? {
        if case .onLink(let link) = phase { link.peripheral.address } else { nil }
    }

    /// The peripheral being paired with at `device`, if this machine is pairing it.
    public func pairing(_ device: ObjectPath) -> Peripheral? {
        if case .onLink(let link) = phase { link.pairing(device) } else { nil }
    }

    // MARK: Bluetooth availability

    /// The BlueZ tree is loaded; `adapter` is the chosen one, nil if none
    /// (or none named `requested`).
    public mutating func bluetoothReady(adapter: AdapterChoice?, requested: String? = nil) -> [Action] {
        guard case .waitingForBluetooth = phase else { return [] }
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
            phase = .forgetting
            return [.forget(address)]
        }
        var actions = beginFinding()
        if firstTime, let duration = configuration.duration, configuration.isWatch {
            actions.insert(.armTimer(.duration, duration), at: 0)
        }
        return actions
    }

    /// bluetoothd is gone (or never was there).
    public mutating func bluetoothUnavailable(_ error: BlueZError) -> [Action] {
        if case .finished = phase { return [] }
        if !wasReady { return finish(.failed(.unavailable(error))) }
        return lostBluetooth(
            failure: .bluetoothUnavailable(error), waiting: "bluetoothd is not running; waiting for it to return")
    }

    /// The chosen adapter's power changed.
    public mutating func adapterPowered(_ powered: Bool, adapter: AdapterChoice) -> [Action] {
        switch phase {
        case .waitingForBluetooth: return powered ? bluetoothReady(adapter: adapter) : []
        case .finished: return []
        default:
            guard !powered else { return [] }
            return lostBluetooth(failure: .adapterOff(adapter.name), waiting: "\(adapter.name) was powered off; waiting")
        }
    }

    /// The chosen adapter was removed.
    public mutating func adapterRemoved(name: String) -> [Action] {
        switch phase {
        case .waitingForBluetooth, .finished: return []
        default: return lostBluetooth(failure: .noAdapter(name), waiting: "\(name) was removed; waiting")
        }
    }

    /// bluetoothd or the adapter went away: the link (if any) is gone with it.
    private mutating func lostBluetooth(failure: CommandFailure, waiting: String) -> [Action] {
        var actions = Self.stopTimers()
        if case .onLink(let link) = phase { actions.append(.report(.disconnected(link.peripheral))) }
        guard configuration.reconnects else { return settle(.finished(.failed(failure), actions)) }
        phase = .waitingForBluetooth
        return actions + [.report(.waiting(waiting))]
    }

    // MARK: Finding the bird

    /// The default listening window: long enough to hear every Bird in
    /// range a few times (they advertise every 20 ms to 1 s), short enough
    /// not to be noticed.
    public static let defaultListeningWindow = Duration.seconds(1)

    /// How long a connection to a cached, unheard bird may take before discovery.
    public static let unheardConnectTimeout = Duration.milliseconds(2500)

    /// A device was heard after discovery started. The Bird asked for by
    /// address is connected to at once; without an address, the machine
    /// listens for `listeningWindow` from the first Bird heard and then
    /// connects to the strongest heard in it.
    public mutating func deviceSighted(_ sighting: Sighting) -> [Action] {
        withFinder { $0.deviceSighted(sighting) }
    }

    /// The bird asked for by address is in BlueZ's cache: connect to it
    /// straight away, as `bluetoothctl connect` does, instead of waiting to
    /// hear it advertise. If that fails or takes longer than
    /// `unheardConnectTimeout`, the machine falls back to discovery, so a
    /// cached bird that is out of range still ends as "not found".
    public mutating func deviceKnown(_ sighting: Sighting) -> [Action] {
        withFinder { $0.deviceKnown(sighting) }
    }

    /// SetDiscoveryFilter or StartDiscovery failed.
    public mutating func scanFailed(_ error: BlueZError) -> [Action] {
        withFinder { $0.scanFailed(error) }
    }

    public mutating func connectReplied(_ result: Result<Void, BlueZError>) -> [Action] {
        withFinder { $0.connectReplied(result) }
    }

    // MARK: Working on the link

    /// The device's services are resolved; `characteristics` are the Bird
    /// characteristics found under it. (It can precede Connect's reply: cached GATT.)
    public mutating func servicesResolved(device: ObjectPath, characteristics: [BirdField: ObjectPath]) -> [Action] {
        let linked = withFinder { $0.servicesResolved(device: device) }
        return linked + withLink { $0.servicesResolved(device: device, characteristics: characteristics) }
    }

    /// A watch writes `value` on the link it streams on (see `BirdLink.writeRequested`).
    /// Without a link, nothing happens: the caller knows the bird is not connected.
    public mutating func writeRequested(_ value: BirdValue) -> [Action] {
        withLink { $0.writeRequested(value) }
    }

    /// The write (with response) of `set` completed.
    public mutating func writeCompleted(_ result: Result<Void, BlueZError>) -> [Action] {
        withLink { $0.writeCompleted(result) }
    }

    public mutating func readCompleted(_ field: BirdField, _ result: Result<[UInt8], BlueZError>) -> [Action] {
        withLink { $0.readCompleted(field, result) }
    }

    public mutating func notifyStarted(_ field: BirdField, _ result: Result<Void, BlueZError>) -> [Action] {
        withLink { $0.notifyStarted(field, result) }
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
    /// before the reply, it may still be newer than the value read. Each such
    /// one is kept and reported after the read, in order (none is lost, and
    /// the newest value is the last one printed), except those up to the last
    /// one that holds the bytes the read returned: that is the update the
    /// read reported, and those before it are older (see `BirdLink.readCompleted`).
    public mutating func valueChanged(
        _ characteristic: ObjectPath, _ raw: [UInt8], mtu: Int? = nil, ordered: Bool = true
    ) -> [Action] {
        // The hot path reads the link where it lies: `withLink` moves the
        // whole BirdLink (its configuration included) out and back, a large
        // share of what a notification costs birdctl (docs/performance.md,
        // "The signal path").
        if case .onLink(let link) = phase, let actions = link.plainNotification(characteristic, raw, mtu: mtu) {
            untoldNotifications &+= 1
            return counted(actions)
        }
        return withLink { $0.valueChanged(characteristic, raw, mtu: mtu, ordered: ordered) }
    }

    /// A characteristic left BlueZ's tree while the link stayed up (the
    /// peripheral's GATT database changed): see `BirdLink.characteristicRemoved`.
    public mutating func characteristicRemoved(_ path: ObjectPath) -> [Action] {
        withLink { $0.characteristicRemoved(path) }
    }

    /// ServicesResolved went false: the link is going. The GATT objects
    /// removed now are the disconnect's business, not a changed database.
    public mutating func servicesUnresolved(_ device: ObjectPath) -> [Action] {
        withLink { $0.servicesUnresolved(device) }
    }

    /// Connected went false for a device. (While Connect is pending, BlueZ
    /// reports the outcome in its reply.)
    public mutating func deviceDisconnected(_ device: ObjectPath) -> [Action] {
        guard case .onLink(let link) = phase, link.peripheral.path == device else { return withFinder { $0.deviceDisconnected(device) } }
        return withLink { $0.linkLost() }
    }

    /// The device object left BlueZ's tree.
    public mutating func deviceRemoved(_ device: ObjectPath) -> [Action] {
        if case .onLink(let link) = phase, link.peripheral.path == device { return withLink { $0.linkLost() } }
        return withFinder { $0.deviceRemoved(device) }
    }

    // MARK: Pairing

    /// How long past Pair's own timeout the machine waits for its answer.
    static let pairingGrace = Duration.seconds(1)

    /// BlueZ says the device is paired (`Paired` turned true). bluetoothd 5.66
    /// never answers a Pair whose bonding completes while the link's own
    /// service discovery runs (fixed in 5.87): this is its word.
    public mutating func devicePaired(_ device: ObjectPath) -> [Action] {
        guard pairing(device) != nil else { return [] }
        return pairCompleted(.success(()))
    }

    /// Device1.Pair answered. Already paired counts as paired.
    public mutating func pairCompleted(_ result: Result<Void, BlueZError>) -> [Action] {
        withLink { $0.pairCompleted(result) }
    }

    // MARK: Unpairing

    /// `birdctl unpair`: BlueZ forgot the device (and its bond), or could not.
    public mutating func forgetCompleted(_ result: Result<Void, BlueZError>) -> [Action] {
        guard case .forgetting = phase else { return [] }
        switch result {
        case .success: return finish(.success)
        case .failure(let error) where error.kind == .notFound || error.kind == .doesNotExist: return finish(.failed(.notFound))
        case .failure(let error): return finish(.failed(.failed("unpair", error)))
        }
    }

    // MARK: Timers and stopping

    /// The connect deadline passed while these devices were connected on the
    /// adapter: with links up besides this one, the controller may take no
    /// more, and a failure says so (Linux does not pass a controller's
    /// "Connection Limit Exceeded" on to BlueZ, so this is the most a client
    /// can say).
    public mutating func connectDeadlinePassed(connectedDevices: [ObjectPath], adapter: String) -> [Action] {
        let others = connectedDevices.filter { $0 != currentDevice }.count
        let actions = timerFired(.connect)
        guard others > 0 else { return actions }
        let explained = CommandFailure.connectTimeoutWithLinksUp(adapter: adapter, links: others)
        return actions.map { $0 == .finish(.failed(.connectTimeout)) ? .finish(.failed(explained)) : $0 }
    }

    public mutating func timerFired(_ timer: Timer) -> [Action] {
        switch (timer, phase) {
        case (.duration, .finished): return []
        case (.duration, _): return stop(outcome: .success)
        case (.poll, .resting(let peripheral)):
            // Straight to the bird BlueZ knows; if that fails, discovery decides.
            let (finder, actions) = BirdFinder.poll(configuration, peripheral)
            phase = .finding(finder)
            return actions
        case (_, .finding): return withFinder { $0.timerFired(timer) }
        case (_, .onLink): return withLink { $0.timerFired(timer) }
        default: return []
        }
    }

    /// SIGINT/SIGTERM: undo what we did (StopNotify, Disconnect, StopDiscovery).
    /// Ctrl-C is how a watch normally ends; a read cut short is "interrupted".
    public mutating func stopRequested() -> [Action] {
        stop(outcome: configuration.isWatch ? .success : .interrupted)
    }

    private mutating func stop(outcome: CommandOutcome) -> [Action] {
        var actions = Self.stopTimers(includingDuration: true)
        switch phase {
        case .finished: return []
        case .waitingForBluetooth, .resting, .forgetting: break
        case .finding(let finder): actions += finder.stopActions
        case .onLink(let link): actions += link.stopActions
        }
        return finish(outcome, after: actions)
    }

    // MARK: Helpers

    /// Runs an event on the finder, if the machine is finding its bird. The
    /// finder leaves `phase` while it runs, so that it is not copied.
    private mutating func withFinder(_ event: (inout BirdFinder) -> Step) -> [Action] {
        guard case .finding(var finder) = phase else { return [] }
        phase = .finished
        let step = event(&finder)
        phase = .finding(finder)
        return settle(step)
    }

    /// Runs an event on the link, if there is one (the notification path: the
    /// link leaves `phase` while it runs, so that its state is not copied).
    private mutating func withLink(_ event: (inout BirdLink) -> Step) -> [Action] {
        guard case .onLink(var link) = phase else { return [] }
        phase = .finished
        if untoldNotifications > 0 {
            link.notified(untoldNotifications)
            untoldNotifications = 0
        }
        let step = event(&link)
        phase = .onLink(link)
        return settle(step)
    }

    /// Moves the machine on as a half decided.
    private mutating func settle(_ step: Step) -> [Action] {
        switch step {
        case .next(let actions):
            return counted(actions)
        case .linked(let peripheral, let bonded):
            hasConnected = true
            let (link, started) = BirdLink.start(configuration, peripheral, bonded: bonded)
            phase = .onLink(link)
            untoldNotifications = 0
            return started
        case .findAgain(let actions):
            // A link we ended (our Disconnect among `actions`) is not connected again before it is down.
            let ended = actions.lazy.compactMap { if case .disconnect(let device) = $0 { device } else { nil } }.first
            return actions + beginFinding(disconnecting: configuration.awaitsOwnDisconnect ? ended : nil)
        case .rest(let peripheral, let actions):
            phase = .resting(peripheral)
            return counted(actions) + [.armTimer(.poll, configuration.pollInterval ?? .zero)]
        case .finished(let outcome, let actions):
            return finish(outcome, after: actions)
        }
    }

    private mutating func beginFinding(disconnecting: ObjectPath? = nil) -> [Action] {
        let (finder, actions) = BirdFinder.start(configuration, hasConnected: hasConnected, disconnecting: disconnecting)
        phase = .finding(finder)
        return actions
    }

    /// `--count`: a watch ends with the reading that makes it, undoing what it did.
    private mutating func counted(_ actions: [Action]) -> [Action] {
        guard configuration.isWatch, let maximum = configuration.maximumReadings else { return actions }
        for (index, action) in actions.enumerated() {
            guard case .report(.reading) = action else { continue }
            readings += 1
            guard readings >= maximum else { continue }
            var cleanup: [Action] = []
            if case .onLink(let link) = phase, let working = link.workingLink { cleanup = link.cleanUp(working, subscribed: true) }
            return finish(.success, after: Array(actions[...index]) + Self.stopTimers(includingDuration: true) + cleanup)
        }
        return actions
    }

    private mutating func finish(_ outcome: CommandOutcome, after actions: [Action] = []) -> [Action] {
        phase = .finished
        return actions + [.finish(outcome)]
    }

    static func stopTimers(includingDuration: Bool = false) -> [Action] {
        var timers: [Action] = [
            .cancelTimer(.scan), .cancelTimer(.listen), .cancelTimer(.connect), .cancelTimer(.retry), .cancelTimer(.services),
            .cancelTimer(.pairing), .cancelTimer(.poll), .cancelTimer(.quiet), .cancelTimer(.probe),
        ]
        if includingDuration { timers.append(.cancelTimer(.duration)) }
        return timers
    }
}
