import Bird

/// The MQTT gateway's policy as a value with no I/O, like `BirdFleet`: what
/// it remembers of each bird, what goes to the broker and when, what a
/// reconnect sends again, and how an exit waits for the broker. One
/// `mutating` method per event (a report, the end of a loop wake-up, a
/// broker event, a timer, the close) returns what to do; `GatewayMessages`
/// renders publications into topics and payloads and `MQTTGateway` performs
/// the actions. Tested through events (`Tests/GatewayTests`).
public struct GatewayMachine: Sendable {
    /// What to publish, before it is a topic and bytes.
    public enum Publication: Hashable, Sendable {
        case gatewayStatus(online: Bool)
        /// Not retained, to the gateway itself: once it comes back, every
        /// retained bird status the broker held has arrived (and been corrected).
        case probe
        case gatewayDiscovery
        case birdStatus(address: BluetoothAddress, online: Bool)
        /// The bird's sensors' discovery configs.
        case birdDiscovery(BirdCentral.Peripheral)
        /// A reading's value (at once, every one).
        case value(address: BluetoothAddress, BirdValue)
        /// The bird's latest values (its state; once per wake-up).
        case state(address: BluetoothAddress, [BirdField: BirdValue])
        /// A report as an event on the bird's event topic (or the gateway's).
        case event(address: BluetoothAddress?, BirdCentral.Report)
        /// The buffer dropped this many of its oldest.
        case dropped(Int)
        /// How many birds the gateway holds links to, and the adapter's limit
        /// when known (given, or learned): retained, for Home Assistant. With
        /// several adapters (a pool), each one's too, by name.
        case links(used: Int, limit: Int?, adapters: [AdapterLinks] = [])
        /// The gateway's links sensor (its discovery config).
        case linksDiscovery
        /// With several adapters: one adapter's links sensors.
        case adapterLinksDiscovery(adapter: String)
        /// Connect attempts given up since the gateway started (a deadline
        /// passed, or Connect failed): retained, for Home Assistant.
        case health(connectFailures: Int)
        /// The gateway's Connect failures sensor (its discovery config).
        case healthDiscovery
        /// Empty retained messages on each of the bird's topics and configs.
        case clearing(address: BluetoothAddress)
    }

    /// One adapter's links in use and its limit (nil: not known).
    public struct AdapterLinks: Hashable, Sendable {
        public let adapter: String
        public let used: Int
        public let limit: Int?

        public init(adapter: String, used: Int, limit: Int?) {
            (self.adapter, self.used, self.limit) = (adapter, used, limit)
        }
    }

    public enum Action: Hashable, Sendable {
        /// Queued, in order.
        case publish(Publication)
        /// Published now and again after every reconnect (the latest per topic).
        case publishSticky(Publication)
        /// These birds' status and discovery are no longer sent again.
        case forgetSticky(addresses: [BluetoothAddress])
        /// Stop re-sending the fleet's shared sensor configs of the bird
        /// after a reconnect (`shared`: the bird's next holder publishes them).
        case forgetSharedDiscovery(address: BluetoothAddress)
        /// Publish `final`, then disconnect once everything queued is taken.
        case closePublisher(final: [Publication])
        case armExitTimer
        case cancelExitTimer
        /// The broker did not take this many before the deadline (a message for people).
        case gaveUp(undelivered: Int)
        /// The gateway has ended; `delivered`: the broker took everything.
        case finish(delivered: Bool)
    }

    /// What a reading does: its value goes out (`.value`); rarely, birds are
    /// forgotten first. No array and no publication in the common case: a
    /// reading is the hot path.
    public enum ReadingOutcome: Hashable, Sendable {
        case publishValue
        case forgetStickyThenPublishValue([BluetoothAddress])
        /// Not running (not started, or closing).
        case ignore
    }

    public struct Configuration: Sendable {
        public var discovery: Bool
        /// At most this many birds remembered (strangers may come and go all day).
        public var maximumBirds: Int
        /// `--fleet`: the bird's sensors are the fleet's, pointed at the
        /// gateway that holds it: published again at every connection.
        public var shared: Bool

        public init(discovery: Bool, maximumBirds: Int = 4096, shared: Bool = false) {
            self.discovery = discovery
            self.maximumBirds = maximumBirds
            self.shared = shared
        }
    }

    /// What the gateway remembers of a bird.
    struct Bird: Sendable {
        var values: [BirdField: BirdValue] = [:]
        var online = false
        /// While online: the adapter of its link (`hciN`), if known.
        var adapter: String?
        var discovered = false
        /// Listed in `stateDue`.
        var stateDue = false
    }

    private enum Phase: Sendable {
        case idle, running
        /// Closing: the undelivered count at the last deadline, or nil once
        /// the broker took everything (the publisher's end is awaited once more).
        case closing(lastUndelivered: Int?)
        case finished
    }

    public let configuration: Configuration
    private(set) var birds: [BluetoothAddress: Bird] = [:]
    /// Birds with a reading since their state was last published, in the
    /// order of their first such reading.
    private var stateDue: [BluetoothAddress] = []
    private var phase = Phase.idle
    /// The gateway said `online` (after its first probe came back).
    private var announced = false
    /// Birds online (links up), the adapter's limit when known, and whether
    /// the links sensor was described.
    private var linksUsed = 0
    /// Each adapter's limit: with several adapters as one pool the sensor's
    /// limit is their sum (the links in use are every adapter's too).
    /// Per adapter said, its limit (nil: not known, a learned one forgotten).
    private var linkLimits: [String: Int?] = [:]
    /// Their sum, if every one is known.
    private var linkLimit: Int? {
        guard !linkLimits.isEmpty else { return nil }
        return linkLimits.values.reduce(0) { sum, limit in limit.flatMap { limit in sum.map { $0 + limit } } }
    }
    private var linksDescribed = false
    /// Connect attempts given up, and whether their sensor was described.
    private var connectFailures = 0
    private var healthDescribed = false
    /// With several adapters: each one's links in use, and those whose sensors were described.
    private var adapterLinksUsed: [String: Int] = [:]
    private var adapterLinksDescribed: Set<String> = []

    public init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    /// How many birds it remembers (for tests and bounds).
    public var birdCount: Int { birds.count }

    public var isRunning: Bool { if case .running = phase { true } else { false } }

    // MARK: Events

    /// The gateway's `online` waits for the probe: a gateway killed while it
    /// held birds left their statuses `online`, and Home Assistant would show
    /// them available (with their old values) between this gateway's
    /// `online` and its corrections. Until then the broker holds `offline`
    /// (the will, or the last clean exit).
    public mutating func start() -> [Action] {
        guard case .idle = phase else { return [] }
        phase = .running
        return configuration.discovery ? [.publishSticky(.gatewayDiscovery)] : []
    }

    /// Connected to the broker (again): the probe, at every connect — its
    /// echo says what the broker retains has come in (a clean session loses
    /// an echo that was under way when the connection went).
    public mutating func brokerConnected() -> [Action] {
        isRunning ? [.publish(.probe)] : []
    }

    /// The probe came back: every retained bird status has been seen, the
    /// stale ones corrected; the gateway is online from now on (sticky: sent
    /// again at every reconnect, after the birds' statuses).
    public mutating func probeReturned() -> [Action] {
        guard isRunning, !announced else { return [] }
        announced = true
        return [.publishSticky(.gatewayStatus(online: true))]
    }

    /// A reading: its value goes out at once and its bird's state is due.
    /// (One dictionary access per reading, no array.)
    public mutating func reading(_ address: BluetoothAddress, _ value: BirdValue) -> ReadingOutcome {
        guard case .running = phase else { return .ignore }
        let forgotten = birds.count >= configuration.maximumBirds ? makeRoom(for: address) : []
        if Self.update(&birds[address, default: Bird()], with: value) { stateDue.append(address) }
        return forgotten.isEmpty ? .publishValue : .forgetStickyThenPublishValue(forgotten)
    }

    /// Any other report; it goes out after the states of the readings before it.
    public mutating func report(_ report: BirdCentral.Report) -> [Action] {
        guard isRunning else { return [] }
        if case .reading(let peripheral, let value, _, _) = report {
            let publish = Action.publish(.value(address: peripheral.address, value))
            switch reading(peripheral.address, value) {
            case .publishValue: return [publish]
            case .forgetStickyThenPublishValue(let forgotten): return [.forgetSticky(addresses: forgotten), publish]
            case .ignore: return []
            }
        }
        var actions = dueStates()
        switch report {
        case .reading: break
        case .connected(let peripheral):
            actions.append(.publish(.event(address: peripheral.address, report)))
            actions += setOnline(peripheral, true)
        case .disconnected(let peripheral):
            actions += setOnline(peripheral, false)
            actions.append(.publish(.event(address: peripheral.address, report)))
            // The next holder publishes the fleet's sensors of the bird: ours must not come back after a reconnect.
            if configuration.shared { actions.append(.forgetSharedDiscovery(address: peripheral.address)) }
        case .badValue(let p, _), .found(let p, _), .retrying(let p, _, _), .operationFailed(let p, _, _), .pairing(let p),
            .paired(let p), .polled(let p), .held(let p), .written(let p, _, _), .adapter(let p, _, _):
            actions.append(.publish(.event(address: p.address, report)))
        case .quiet(let p, _):
            actions.append(.publish(.event(address: p.address, report)))
        case .links(let adapter, _, let limit, _):
            actions.append(.publish(.event(address: nil, report)))
            linkLimits[adapter] = .some(limit)
            actions += linksNow()
        case .gaveUp(let failure, let bird):
            actions.append(.publish(.event(address: bird?.address, report)))
            if failure.isConnectFailure { actions += connectFailed() }
        case .waiting, .adapterReset, .discoveryDeaf:
            actions.append(.publish(.event(address: nil, report)))
        case .forgotten(let address):
            // The fleet no longer hears it: nothing of it stays on the broker
            // (a bird never published, such as a stranger, leaves nothing to clear).
            actions.append(.publish(.event(address: address, report)))
            if birds[address] != nil { actions += forget(address) }
        }
        return actions
    }

    /// The loop is about to sleep: the states of the birds read since.
    public mutating func wakeUpEnds() -> [Action] {
        guard isRunning, !stateDue.isEmpty else { return [] }
        return dueStates()
    }

    /// The broker held "online" for this bird when the gateway subscribed (a
    /// gateway killed while it held it left it): "offline" unless held here.
    /// Sticky, like every status, so that a later "online" cannot overtake it.
    public mutating func retainedOnline(_ address: BluetoothAddress) -> [Action] {
        guard isRunning, birds[address]?.online != true else { return [] }
        // Remembered (as offline), so that `makeRoom` bounds these too.
        let forgotten = makeRoom(for: address)
        if birds[address] == nil { birds[address] = Bird() }
        return (forgotten.isEmpty ? [] : [.forgetSticky(addresses: forgotten)])
            + [.publishSticky(.birdStatus(address: address, online: false))]
    }

    /// Forgets a bird for good (the fleet forgot it, unseen for long): what
    /// is remembered, its sticky messages, and what the broker retains of it.
    public mutating func forget(_ address: BluetoothAddress) -> [Action] {
        guard isRunning else { return [] }
        let actions = dueStates()
        birds[address] = nil
        return actions + [.forgetSticky(addresses: [address]), .publish(.clearing(address: address))]
    }

    /// The publisher's buffer dropped its oldest while the broker was away.
    public mutating func dropped(_ count: Int) -> [Action] {
        isRunning ? [.publish(.dropped(count))] : []
    }

    // MARK: Ending

    /// "offline" for every bird still online and the gateway, then the wait
    /// for the broker, at most one deadline without progress at a time.
    public mutating func close() -> [Action] {
        switch phase {
        case .idle:
            phase = .finished
            return [.finish(delivered: true)]
        case .closing, .finished:
            return []
        case .running:
            let actions = dueStates()
            phase = .closing(lastUndelivered: .max)
            let offline = birds.filter(\.value.online).keys.sorted().map { Publication.birdStatus(address: $0, online: false) }
            return actions + [.closePublisher(final: offline + [.gatewayStatus(online: false)]), .armExitTimer]
        }
    }

    /// The exit deadline passed with `undelivered` messages not yet taken:
    /// another deadline while the broker makes progress; once it took all,
    /// one more for the publisher's own end; else give up.
    public mutating func exitDeadlinePassed(undelivered left: Int) -> [Action] {
        guard case .closing(let last) = phase else { return [] }
        guard let last else {
            phase = .finished
            return [.finish(delivered: true)]
        }
        if left > 0 && left < last {
            phase = .closing(lastUndelivered: left)
            return [.armExitTimer]
        }
        guard left > 0 else {
            phase = .closing(lastUndelivered: nil)
            return [.armExitTimer]
        }
        phase = .finished
        return [.gaveUp(undelivered: left), .finish(delivered: false)]
    }

    /// The publisher ended (after its DISCONNECT, or failing).
    public mutating func publisherClosed(undelivered: Int) -> [Action] {
        guard case .closing = phase else { return [] }
        phase = .finished
        return [.cancelExitTimer, .finish(delivered: undelivered == 0)]
    }

    // MARK: Helpers

    /// A bird's state (its latest values) goes out once per loop wake-up,
    /// after every reading the wake-up found, not once per reading: in a
    /// burst, one state message per wake-up, and the last one published
    /// always holds the newest values.
    private mutating func dueStates() -> [Action] {
        guard !stateDue.isEmpty else { return [] }
        var actions: [Action] = []
        for address in stateDue {
            guard let values = birds[address]?.values else { continue }
            birds[address]?.stateDue = false
            actions.append(.publish(.state(address: address, values)))
        }
        stateDue.removeAll(keepingCapacity: true)
        return actions
    }

    /// Keeps `value` as the bird's latest and marks its state due; true if
    /// it was not due yet.
    private static func update(_ bird: inout Bird, with value: BirdValue) -> Bool {
        bird.values[value.field] = value
        defer { bird.stateDue = true }
        return !bird.stateDue
    }

    /// When a new bird would make too many: the offline birds are forgotten
    /// (their sticky messages too; what the broker retains of them stays true:
    /// offline). Returns them. Their states are never due: any report but a
    /// reading, a disconnection included, publishes the due states first.
    private mutating func makeRoom(for address: BluetoothAddress) -> [BluetoothAddress] {
        guard birds.count >= configuration.maximumBirds && birds[address] == nil else { return [] }
        let offline = birds.filter { !$0.value.online && !$0.value.stateDue }.keys.sorted()
        for address in offline { birds[address] = nil }
        return offline
    }

    private mutating func setOnline(_ peripheral: BirdCentral.Peripheral, _ online: Bool) -> [Action] {
        let address = peripheral.address
        var actions: [Action] = []
        let forgotten = makeRoom(for: address)
        if !forgotten.isEmpty { actions.append(.forgetSticky(addresses: forgotten)) }
        var bird = birds[address, default: Bird()]
        if online && configuration.discovery && (!bird.discovered || configuration.shared) {
            actions.append(.publishSticky(.birdDiscovery(peripheral)))
            bird.discovered = true
        }
        let changed = bird.online != online
        bird.online = online
        birds[address] = bird
        actions.append(.publishSticky(.birdStatus(address: address, online: online)))
        if changed {
            linksUsed += online ? 1 : -1
            // Counted on the adapter it came up on, whatever the report going down says.
            if let adapter = online ? peripheral.adapterName : bird.adapter {
                adapterLinksUsed[adapter, default: 0] += online ? 1 : -1
            }
            birds[address]?.adapter = online ? peripheral.adapterName : nil
            actions += linksNow()
        }
        return actions
    }

    /// One more connect attempt given up: the count as it is now; its sensor described the first time.
    private mutating func connectFailed() -> [Action] {
        connectFailures += 1
        var actions: [Action] = []
        if configuration.discovery && !healthDescribed {
            healthDescribed = true
            actions.append(.publishSticky(.healthDiscovery))
        }
        return actions + [.publishSticky(.health(connectFailures: connectFailures))]
    }

    /// The links in use (and the limit) as they are now; the sensor described the first time.
    private mutating func linksNow() -> [Action] {
        var actions: [Action] = []
        if configuration.discovery && !linksDescribed {
            linksDescribed = true
            actions.append(.publishSticky(.linksDiscovery))
        }
        // One adapter: the gateway's sensors are its own. Several: each its sensors too.
        let adapters = Set(linkLimits.keys).union(adapterLinksUsed.keys).sorted()
        guard adapters.count > 1 else { return actions + [.publishSticky(.links(used: linksUsed, limit: linkLimit))] }
        if configuration.discovery {
            for adapter in adapters where adapterLinksDescribed.insert(adapter).inserted {
                actions.append(.publishSticky(.adapterLinksDiscovery(adapter: adapter)))
            }
        }
        let each = adapters.map { AdapterLinks(adapter: $0, used: adapterLinksUsed[$0] ?? 0, limit: linkLimits[$0] ?? nil) }
        return actions + [.publishSticky(.links(used: linksUsed, limit: linkLimit, adapters: each))]
    }
}

extension CommandFailure {
    /// A connect attempt given up: its deadline passed, or Connect failed.
    var isConnectFailure: Bool {
        switch self {
        case .connectTimeout, .connectTimeoutWithLinksUp, .connectFailed: true
        default: false
        }
    }
}
