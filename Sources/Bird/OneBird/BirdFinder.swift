import BlueZ
import DBus

/// The first half of a `BirdCentral`: finding its bird — scanning, listening
/// for the nearest, connecting, retrying — until there is a link (the
/// `BirdLink` half takes it from there) or the search ends. A value, no I/O:
/// each event returns a `BirdCentral.Step`. Waiting for Bluetooth is the
/// central's business; the finder starts once Bluetooth is usable.
struct BirdFinder: Sendable {
    typealias Action = BirdCentral.Action
    typealias Peripheral = BirdCentral.Peripheral
    typealias Step = BirdCentral.Step

    enum State: Hashable, Sendable {
        case scanning
        /// No address asked for: Birds were heard; listening a little longer for a nearer one.
        case listening(Candidates)
        case connecting(Peripheral, attempt: Int)
        case retryWait(Peripheral, attempt: Int)
        /// Found again after we ended its link ourselves: Connect waits until
        /// that link is down (see `disconnecting`).
        case awaitingDisconnect(Peripheral)
    }

    let configuration: BirdCentral.Configuration
    private(set) var state = State.scanning
    /// The command had a link before: a failed connection is found again,
    /// and there is no find deadline (it is for finding a bird at first).
    let hasConnected: Bool
    /// Connecting to a bird known from BlueZ's cache without having heard it:
    /// if that fails, discovery decides (see `deviceKnown`).
    private var connectingUnheard = false
    /// BlueZ holds a bond with the bird being connected.
    private var bonded = false
    /// A link came up and went while Connect was pending (bluetoothd then
    /// fails the Connect: on 5.82, when the bird vanished before the ATT
    /// channel was up): at the deadline, the connection was lost.
    private var linkLostWhileConnecting = false
    /// The device whose link we just ended (our Disconnect is out), until its
    /// `Connected` turns false or the `connect` deadline passes. bluetoothd
    /// holds a Disconnect ~2 s and meanwhile answers a Connect at once, for a
    /// link about to go: subscribing on it then fails (NotConnected).
    private var disconnecting: ObjectPath?

    /// Scanning starts: discovery on, and (at first) the find deadline.
    /// `disconnecting`: the device whose link we ended just now, not
    /// connected to again before it is down (or the connect deadline passes).
    static func start(
        _ configuration: BirdCentral.Configuration, hasConnected: Bool, disconnecting: ObjectPath? = nil
    ) -> (BirdFinder, [Action]) {
        var finder = BirdFinder(configuration: configuration, hasConnected: hasConnected)
        finder.disconnecting = disconnecting
        let deadline: [Action] = disconnecting == nil ? [] : [.armTimer(.connect, configuration.connectTimeout)]
        return (finder, finder.scanningActions + deadline)
    }

    /// A polled bird's next poll: connect straight to it (BlueZ knows it);
    /// if that fails, look for it.
    static func poll(_ configuration: BirdCentral.Configuration, _ peripheral: Peripheral) -> (BirdFinder, [Action]) {
        var finder = BirdFinder(configuration: configuration, hasConnected: true)
        finder.state = .connecting(peripheral, attempt: 1)
        finder.connectingUnheard = true
        return (finder, [.armTimer(.connect, configuration.connectTimeout), .connect(peripheral.path)])
    }

    private init(configuration: BirdCentral.Configuration, hasConnected: Bool) {
        self.configuration = configuration
        self.hasConnected = hasConnected
    }

    private var scanningActions: [Action] {
        var actions: [Action] = [.startScanning]
        if let timeout = configuration.scanTimeout, !hasConnected { actions.append(.armTimer(.scan, timeout)) }
        return actions
    }

    /// Connecting (or waiting to retry): the peripheral.
    var peripheral: Peripheral? {
        switch state {
        case .connecting(let p, _), .retryWait(let p, _): p
        case .scanning, .listening, .awaitingDisconnect: nil
        }
    }

    // MARK: Discovery

    mutating func deviceSighted(_ sighting: Sighting) -> Step {
        guard sighting.matches(address: configuration.address, minimumRSSI: configuration.minimumRSSI) else { return .next([]) }
        switch state {
        case .scanning:
            guard configuration.address == nil, let window = configuration.listeningWindow else {
                let peripheral = Peripheral(path: sighting.device, address: sighting.address, name: sighting.name)
                bonded = sighting.bonded
                return .next(connect(to: peripheral, heardAt: sighting.rssi))
            }
            var candidates = Candidates()
            candidates.add(sighting)
            state = .listening(candidates)
            return .next([.cancelTimer(.scan), .armTimer(.listen, window)])
        case .listening(var candidates):
            candidates.add(sighting)
            state = .listening(candidates)
            return .next([])
        default:
            return .next([])
        }
    }

    private mutating func connect(to peripheral: Peripheral, heardAt rssi: Int16?) -> [Action] {
        let found: [Action] = [.cancelTimer(.scan), .stopScanning, .report(.found(peripheral, rssi: rssi))]
        if peripheral.path == disconnecting {
            // Its deadline (`connect`) runs since the link was ended.
            state = .awaitingDisconnect(peripheral)
            return found
        }
        return found + dial(peripheral)
    }

    private mutating func dial(_ peripheral: Peripheral) -> [Action] {
        state = .connecting(peripheral, attempt: 1)
        disconnecting = nil
        linkLostWhileConnecting = false
        return [.armTimer(.connect, configuration.connectTimeout), .connect(peripheral.path)]
    }

    /// See `BirdCentral.redirect`.
    mutating func redirect(to device: ObjectPath) -> Bool {
        guard case .connecting(var peripheral, let attempt) = state else { return false }
        peripheral.path = device
        state = .connecting(peripheral, attempt: attempt)
        return true
    }

    /// See `BirdCentral.deviceKnown`.
    mutating func deviceKnown(_ sighting: Sighting) -> Step {
        guard state == .scanning, configuration.address != nil, !hasConnected,
            sighting.matches(address: configuration.address, minimumRSSI: nil)
        else { return .next([]) }
        let peripheral = Peripheral(path: sighting.device, address: sighting.address, name: sighting.name)
        state = .connecting(peripheral, attempt: 1)
        bonded = sighting.bonded
        connectingUnheard = true
        linkLostWhileConnecting = false
        return .next([
            .cancelTimer(.scan), .report(.found(peripheral, rssi: nil)),
            .armTimer(.connect, min(configuration.connectTimeout, BirdCentral.unheardConnectTimeout)), .connect(peripheral.path),
        ])
    }

    /// A connection to an unheard cached bird failed: look for it instead.
    private mutating func discoverInstead(of peripheral: Peripheral) -> Step {
        connectingUnheard = false
        state = .scanning
        return .next(BirdCentral.stopTimers() + [.disconnect(peripheral.path)] + scanningActions)
    }

    mutating func scanFailed(_ error: BlueZError) -> Step {
        guard state == .scanning else { return .next([]) }
        switch error.kind {
        case .notReady:
            // The adapter is (being) powered off; its power event decides.
            return .next([])
        default:
            return .finished(.failed(.failed("start discovery", error)), BirdCentral.stopTimers())
        }
    }

    // MARK: Connection

    mutating func connectReplied(_ result: Result<Void, BlueZError>) -> Step {
        guard case .connecting(let peripheral, let attempt) = state else { return .next([]) }
        switch result {
        case .success:
            return .linked(peripheral, bonded: bonded)
        case .failure(let error) where connectingUnheard && error.kind != .permissionDenied:
            return discoverInstead(of: peripheral)
        case .failure(let error) where error.isTransient && attempt < configuration.connectAttempts:
            state = .retryWait(peripheral, attempt: attempt + 1)
            let delay = configuration.retryBackoff * (1 << (attempt - 1))
            return .next([.report(.retrying(peripheral, attempt: attempt + 1, error)), .armTimer(.retry, delay)])
        case .failure(let error):
            if error.kind == .permissionDenied { return .finished(.failed(.permissionDenied(error)), BirdCentral.stopTimers()) }
            // The last attempt's link came up and went: the connection was lost.
            return ended(failure: error.isConnectionCanceled ? .connectionLost : .connectFailed(error), BirdCentral.stopTimers())
        }
    }

    /// ServicesResolved may come before Connect's reply (cached GATT): the link is up.
    mutating func servicesResolved(device: ObjectPath) -> Step {
        guard case .connecting(let peripheral, _) = state, peripheral.path == device else { return .next([]) }
        return .linked(peripheral, bonded: bonded)
    }

    /// Connected went false while the bird was being connected to: a link
    /// had come up (Connect's reply says how the attempt ended).
    /// (The link we ended ourselves is down: the bird may be connected to.)
    mutating func deviceDisconnected(_ device: ObjectPath) -> Step {
        if device == disconnecting { return .next(ownLinkDown()) }
        if let peripheral, peripheral.path == device { linkLostWhileConnecting = true }
        return .next([])
    }

    /// The link we ended is down, or the wait for it is over: connect if the bird was found meanwhile.
    private mutating func ownLinkDown() -> [Action] {
        disconnecting = nil
        guard case .awaitingDisconnect(let peripheral) = state else { return [.cancelTimer(.connect)] }
        return dial(peripheral)
    }

    /// The device object left BlueZ's tree while it was being connected to.
    /// (A Connected turning false then is Connect's reply's to report.)
    mutating func deviceRemoved(_ device: ObjectPath) -> Step {
        if device == disconnecting {
            // The link we ended went with it: a bird found meanwhile is looked for anew.
            disconnecting = nil
            guard case .awaitingDisconnect = state else { return .next([.cancelTimer(.connect)]) }
            state = .scanning
            return .next([.cancelTimer(.connect)] + scanningActions)
        }
        guard let peripheral, peripheral.path == device else { return .next([]) }
        return ended(failure: .connectionLost, BirdCentral.stopTimers())
    }

    /// No link came of it: a watch that had one looks again, anything else fails.
    private mutating func ended(failure: CommandFailure, _ actions: [Action]) -> Step {
        guard configuration.reconnects && hasConnected else { return .finished(.failed(failure), actions) }
        state = .scanning
        return .next(actions + scanningActions)
    }

    // MARK: Timers and stopping

    mutating func timerFired(_ timer: BirdCentral.Timer) -> Step {
        switch (timer, state) {
        case (.scan, .scanning):
            return .finished(.failed(.notFound), [.stopScanning])
        case (.listen, .listening(let candidates)):
            let nearest = candidates.nearest
            bonded = nearest.bonded
            return .next(connect(to: nearest.peripheral, heardAt: nearest.rssi))
        case (.retry, .retryWait(let peripheral, let attempt)):
            state = .connecting(peripheral, attempt: attempt)
            return .next([.connect(peripheral.path)])
        case (.connect, _) where disconnecting != nil:
            // The link we ended is not said to be down in time: connect anyway.
            return .next(ownLinkDown())
        case (.connect, .connecting(let peripheral, _)) where connectingUnheard:
            return discoverInstead(of: peripheral)
        case (.connect, .connecting(let peripheral, _)), (.connect, .retryWait(let peripheral, _)):
            let actions = BirdCentral.stopTimers() + [.disconnect(peripheral.path)]
            return ended(failure: linkLostWhileConnecting ? .connectionLost : .connectTimeout, actions)
        default:
            return .next([])
        }
    }

    /// What undoes the search (SIGINT, the end of the command).
    var stopActions: [Action] {
        switch state {
        case .scanning, .listening: [.stopScanning]
        case .connecting(let p, _), .retryWait(let p, _): [.disconnect(p.path)]
        case .awaitingDisconnect: []  // our Disconnect is out already
        }
    }
}

/// The Birds heard in the listening window, and how strongly.
struct Candidates: Hashable, Sendable {
    struct Candidate: Hashable, Sendable {
        var peripheral: BirdCentral.Peripheral
        var rssiTotal = 0
        var rssiSamples = 0
        var bonded = false
        /// The mean of the samples heard in the window; nil without any.
        var rssi: Int16? { rssiSamples == 0 ? nil : Int16(rssiTotal / rssiSamples) }
    }

    /// In the order first heard.
    var heard: [Candidate] = []

    mutating func add(_ sighting: Sighting) {
        let address = sighting.address
        var index = heard.firstIndex { $0.peripheral.address == address }
        if index == nil {
            heard.append(Candidate(peripheral: BirdCentral.Peripheral(path: sighting.device, address: sighting.address, name: nil)))
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
