import Bird
/// `watch --all --mqtt URL --fleet`: gateways sharing a broker agree, through
/// the broker alone, that each bird is connected by exactly one of them — the
/// one that hears it best — with hysteresis, and a takeover when the holder
/// dies. A pure machine like `GatewayMachine`: events in (what this gateway
/// hears, what the broker says, its link reports, the clock), actions out.
/// docs/fleet.md states the rules and their bounds.
///
/// What the broker holds, all retained, under the fleet's ROOT:
/// - `ROOT/ROOM/status`: each gateway's `online`/`offline` (its will);
/// - `ROOT/fleet/ADDRESS/heard/ROOM`: the smoothed RSSI ROOM hears the bird
///   at (cleared when it no longer hears it);
/// - `ROOT/fleet/ADDRESS/holder`: the ROOM that holds the bird.
///
/// A claim is a retained `holder` naming this room; the gateway connects only
/// once its claim comes back from the broker, and lets the bird go as soon as
/// a claim naming another room comes. The broker orders claims, so the last
/// one wins everywhere.
public struct FleetOwnership: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// This gateway's name in the fleet (the last level of its prefix).
        public var room: String
        /// How much louder (dB, smoothed) another room must hear a held bird…
        public var margin: Int
        /// …for how long, before it takes the bird over.
        public var dwell: Duration
        /// After (re)connecting to the broker, how long to take in what it
        /// retains before claiming a bird nobody holds: longer than the 10 s
        /// a gateway waits at most between reconnects, so that after a
        /// broker restart every holder is back (and says so) first.
        public var settle: Duration
        /// A holder's `offline` (its will) stands this long before its birds
        /// are taken: a broker shutting down publishes every gateway's will
        /// just before it closes the connections, which is no death.
        public var takeoverDelay: Duration
        /// A gateway that lost the broker for this long lets its birds go
        /// (others may have taken them over once its will was published).
        public var brokerGrace: Duration
        /// A bird this gateway has not heard (nor held) for this long: its
        /// heard report is withdrawn, and it is forgotten once nobody reports
        /// it. (A bird it claimed: after `dwell`.)
        public var silence: Duration
        /// At most this many birds remembered.
        public var maximumBirds: Int
        /// At most this many other rooms known (what the broker says is
        /// anyone's: more are ignored).
        public var maximumRooms: Int
        /// Whether Home Assistant hears of the fleet's hearing sensors
        /// (`--no-discovery` says no).
        public var discovery: Bool

        public init(
            room: String, margin: Int = 8, dwell: Duration = .seconds(20), settle: Duration = .seconds(12),
            takeoverDelay: Duration = .seconds(2), brokerGrace: Duration = .seconds(30), silence: Duration = .seconds(60),
            maximumBirds: Int = 4096, maximumRooms: Int = 64, discovery: Bool = true
        ) {
            self.room = room
            self.margin = margin
            self.dwell = dwell
            self.settle = settle
            self.takeoverDelay = takeoverDelay
            self.brokerGrace = brokerGrace
            self.silence = silence
            self.maximumBirds = maximumBirds
            self.maximumRooms = maximumRooms
            self.discovery = discovery
        }
    }

    public enum Action: Hashable, Sendable {
        /// Retained `heard/ROOM` for this room: the smoothed RSSI, or cleared (nil).
        case publishHeard(address: BluetoothAddress, rssi: Int?)
        /// Retained `holder`: this room's claim. Not sent again by itself
        /// after a reconnect: once what the broker retains has come in
        /// (`retainedSeen`), a claim the broker lost is made again, and one
        /// another room made meanwhile is yielded to.
        case claim(address: BluetoothAddress)
        /// This room lets the bird go: its claim cleared on the broker (an
        /// empty retained `holder`).
        case withdrawClaim(address: BluetoothAddress)
        /// The fleet may connect the bird (this room's claim came back).
        case grant(address: BluetoothAddress)
        /// The fleet lets the bird go (its link undone).
        case release(address: BluetoothAddress)
        /// Another room came to hold a bird this one never claimed: what
        /// waited here for it (writes from MQTT) is that room's to answer.
        case heldElsewhere(address: BluetoothAddress)
        /// Nothing of the bird is remembered any more.
        case forgotten(address: BluetoothAddress)
        /// A sensor of how loud this room hears a bird of the fleet (one with
        /// a holder) is described to Home Assistant (true), or removed (false).
        case hearingSensor(address: BluetoothAddress, Bool)
    }

    struct Bird: Sendable {
        /// What the other rooms report (smoothed RSSI).
        var heard: [String: Int] = [:]
        var holder: String?
        /// This room's smoothed RSSI, and when it last heard the bird.
        var smoothed: Double?
        var lastHeard: Duration = .zero
        var published: Int?
        /// Since when this room hears the held bird louder by the margin.
        var louderSince: Duration?
        /// This room's claim is being sent (not yet seen back, or seen back).
        var claimed = false
        var granted = false
        var linked = false
        var hearingSensor = false
    }

    public let configuration: Configuration
    private(set) var birds: [BluetoothAddress: Bird] = [:]
    /// Rooms whose gateway says `online`.
    private(set) var alive: Set<String> = []
    /// Since when each room that said `offline` has been so (rooms are few).
    private var offlineSince: [String: Duration] = [:]
    /// Since when the broker is connected, or nil.
    private var connectedSince: Duration?
    /// Since when the broker is lost, while birds are still held.
    private var lostSince: Duration?
    /// Birds whose retained holder came since the last connect.
    private var holderSeen: Set<BluetoothAddress> = []

    public init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    public var birdCount: Int { birds.count }
    var room: String { configuration.room }

    /// The bird's holder as this gateway knows it.
    public func holder(of address: BluetoothAddress) -> String? { birds[address]?.holder }

    /// Another room, online, holds the bird (a write from MQTT is its to carry out).
    public func heldElsewhere(_ address: BluetoothAddress) -> Bool {
        guard let holder = birds[address]?.holder else { return false }
        return holder != room && alive.contains(holder)
    }

    /// How many other rooms it knows of, and how many report a bird (for tests and bounds).
    public var roomsKnown: Int { alive.count + offlineSince.count }
    public func reportsKept(_ address: BluetoothAddress) -> Int { birds[address]?.heard.count ?? 0 }


    // MARK: What this gateway hears and holds

    /// An advertisement of a bird at `rssi`.
    public mutating func heard(_ address: BluetoothAddress, rssi: Int, now: Duration) -> [Action] {
        guard birds[address] != nil || birds.count < configuration.maximumBirds else { return [] }
        var bird = birds[address, default: Bird()]
        // Smoothed over about four advertisements: noise of ±6 dB moves it by ±1.5.
        bird.smoothed = bird.smoothed.map { $0 + (Double(rssi) - $0) / 4 } ?? Double(rssi)
        bird.lastHeard = now
        birds[address] = bird
        return publishHeardIfMoved(address) + decide(address, now: now)
    }

    /// The fleet connected the bird (or lost its link).
    public mutating func linked(_ address: BluetoothAddress, _ up: Bool, now: Duration) -> [Action] {
        guard birds[address] != nil else { return [] }
        birds[address]?.linked = up
        // A link is as good as hearing it: silence counts from its end.
        birds[address]?.lastHeard = now
        return []
    }

    // MARK: What the broker says

    public mutating func brokerConnected(now: Duration) -> [Action] {
        connectedSince = now
        lostSince = nil
        // Who is online comes again with the retained statuses (within `settle`).
        alive.removeAll()
        holderSeen.removeAll()
        return []
    }

    /// Everything the broker retained has come in since the connect (the
    /// gateway's probe came back): a claim of this room the broker lost
    /// (restarted without persistence) is made again.
    public mutating func retainedSeen(now: Duration) -> [Action] {
        guard connectedSince != nil else { return [] }
        let lost = birds.filter { $0.value.claimed && !holderSeen.contains($0.key) }.keys.sorted()
        return lost.map { .claim(address: $0) }
    }

    public mutating func brokerLost(now: Duration) -> [Action] {
        connectedSince = nil
        if lostSince == nil { lostSince = now }
        return []
    }

    /// A gateway's status (`ROOT/ROOM/status`).
    public mutating func gatewayStatus(_ other: String, online: Bool, now: Duration) -> [Action] {
        guard other != room else { return [] }
        if online {
            guard alive.contains(other) || alive.count + offlineSince.count < configuration.maximumRooms else { return [] }
            alive.insert(other)
            offlineSince[other] = nil
            return []
        }
        guard alive.remove(other) != nil || offlineSince[other] != nil
            || alive.count + offlineSince.count < configuration.maximumRooms
        else { return [] }
        if offlineSince[other] == nil { offlineSince[other] = now }
        // Its birds are nobody's now: the best room left takes each (after
        // the takeover delay). Its reports are kept (it may be back at once,
        // as after a broker restart) but count only while it is online.
        var actions: [Action] = []
        for address in birds.filter({ $0.value.holder == other || $0.value.heard[other] != nil }).keys.sorted() {
            actions += decide(address, now: now) + forgetIfNobodyHearsIt(address)
        }
        return actions
    }

    /// Another room's heard report (nil: it no longer hears the bird).
    public mutating func reportedHeard(_ address: BluetoothAddress, by other: String, rssi: Int?, now: Duration) -> [Action] {
        // Kept whatever the room's status (a gateway's reports may come before
        // its `online`), counted only while it is online; at most
        // `maximumRooms` per bird.
        guard other != room,
            birds[address] != nil || (rssi != nil && birds.count < configuration.maximumBirds),
            birds[address]?.heard[other] != nil || (birds[address]?.heard.count ?? 0) < configuration.maximumRooms
        else {
            return []
        }
        birds[address, default: Bird()].heard[other] = rssi
        return decide(address, now: now) + forgetIfNobodyHearsIt(address)
    }

    /// The bird's holder as the broker retains it (nil: cleared).
    public mutating func reportedHolder(_ address: BluetoothAddress, _ holder: String?, now: Duration) -> [Action] {
        guard birds[address] != nil || (holder != nil && birds.count < configuration.maximumBirds) else { return [] }
        var bird = birds[address, default: Bird()]
        bird.holder = holder
        bird.louderSince = nil
        if connectedSince != nil { holderSeen.insert(address) }
        var actions: [Action] = []
        if holder == room {
            // The last claim the broker took is this room's (also one from
            // before a restart): others let the bird go when they saw it.
            // Silence counts from now (it may not be heard here any more).
            if !bird.claimed { bird.lastHeard = now }
            if !bird.granted { actions.append(.grant(address: address)) }
            bird.claimed = true
            bird.granted = true
        } else {
            if bird.granted { actions.append(.release(address: address)) }
            if holder != nil && !bird.claimed { actions.append(.heldElsewhere(address: address)) }
            bird.claimed = false
            bird.granted = false
        }
        birds[address] = bird
        return actions + describeHearing(address) + decide(address, now: now) + forgetIfNobodyHearsIt(address)
    }

    // MARK: The clock

    /// About once a second: dwell times, silence, the broker's absence.
    public mutating func tick(now: Duration) -> [Action] {
        var actions: [Action] = []
        if let lostSince, now - lostSince >= configuration.brokerGrace {
            // Its will said offline long ago: the others may hold these birds now.
            self.lostSince = nil
            for address in birds.filter({ $0.value.claimed }).keys.sorted() {
                if birds[address]?.granted == true { actions.append(.release(address: address)) }
                birds[address]?.claimed = false
                birds[address]?.granted = false
                birds[address]?.holder = nil
            }
        }
        for address in birds.keys.sorted() {
            guard let bird = birds[address] else { continue }
            // A bird this room claimed but lost the link to, and no longer hears,
            // has most likely left: its report and claim go after the dwell time.
            let silence = bird.claimed ? configuration.dwell : configuration.silence
            if bird.smoothed != nil || bird.claimed, !bird.linked, now - bird.lastHeard >= silence {
                // Gone from this room (and not held here): whoever hears it may take it at once.
                if bird.claimed { actions += withdraw(address) }
                birds[address]?.smoothed = nil
                birds[address]?.louderSince = nil
                if bird.published != nil {
                    birds[address]?.published = nil
                    actions.append(.publishHeard(address: address, rssi: nil))
                }
            }
            actions += decide(address, now: now) + forgetIfNobodyHearsIt(address)
        }
        return actions
    }

    // MARK: Deciding

    /// Claims the bird when this room should hold it: nobody (alive) does
    /// and this room hears it best, or the holder has been heard more
    /// quietly by the margin for the dwell time.
    private mutating func decide(_ address: BluetoothAddress, now: Duration) -> [Action] {
        guard let connectedSince, var bird = birds[address], !bird.claimed, let mine = bird.smoothed.map({ Int($0.rounded()) })
        else { return [] }
        defer { birds[address] = bird }
        if let holder = bird.holder, holder != room, alive.contains(holder) {
            // A held bird moves only when heard louder by the margin, for the dwell time.
            let theirs = bird.heard[holder] ?? Int.min / 2
            guard mine >= theirs + configuration.margin else {
                bird.louderSince = nil
                return []
            }
            let since = bird.louderSince ?? now
            bird.louderSince = since
            guard now - since >= configuration.dwell else { return [] }
        } else {
            // Nobody holds it (once what the broker retains has come in): the
            // room that hears it best (ties: the first name).
            guard now - connectedSince >= configuration.settle else { return [] }
            if let holder = bird.holder, holder != room, let since = offlineSince[holder] ?? Optional(connectedSince),
                now - since < configuration.takeoverDelay
            {
                return []
            }
            let rivals = bird.heard.filter { alive.contains($0.key) }
            guard rivals.allSatisfy({ mine > $0.value || (mine == $0.value && room < $0.key) }) else { return [] }
        }
        bird.claimed = true
        bird.louderSince = nil
        return [.claim(address: address)]
    }

    private mutating func withdraw(_ address: BluetoothAddress) -> [Action] {
        guard let bird = birds[address], bird.claimed else { return [] }
        birds[address]?.claimed = false
        birds[address]?.granted = false
        birds[address]?.holder = nil
        return (bird.granted ? [.release(address: address)] : []) + [.withdrawClaim(address: address)]
    }

    /// This room's heard report, when it moved by 3 dB or more (or is new).
    private mutating func publishHeardIfMoved(_ address: BluetoothAddress) -> [Action] {
        guard let smoothed = birds[address]?.smoothed else { return [] }
        let value = Int(smoothed.rounded())
        if let published = birds[address]?.published, abs(value - published) < 3 { return [] }
        birds[address]?.published = value
        return [.publishHeard(address: address, rssi: value)] + describeHearing(address)
    }

    /// Once a bird this room reports has a holder (it is one of the fleet's
    /// birds, not a stranger passing by), its hearing sensor is described.
    private mutating func describeHearing(_ address: BluetoothAddress) -> [Action] {
        guard configuration.discovery, let bird = birds[address], !bird.hearingSensor, bird.holder != nil, bird.published != nil
        else { return [] }
        birds[address]?.hearingSensor = true
        return [.hearingSensor(address: address, true)]
    }

    /// A bird nobody hears, holds or claims is not remembered (reports of
    /// rooms known to be offline do not count: a dead room's stay retained).
    private mutating func forgetIfNobodyHearsIt(_ address: BluetoothAddress) -> [Action] {
        guard let bird = birds[address], bird.smoothed == nil, bird.heard.keys.allSatisfy({ offlineSince[$0] != nil }),
            bird.holder == nil, !bird.claimed, !bird.linked
        else { return [] }
        birds[address] = nil
        return (bird.hearingSensor ? [.hearingSensor(address: address, false)] : []) + [.forgotten(address: address)]
    }
}
