import BlueZ
import DBus

/// Who gets one of the adapter's few links, and when (`watch --all`). A
/// controller holds few LE links (about 5 on CSR dongles, 7 on Broadcom, 3
/// on an ESP32 proxy) and Linux 6.1 does not even report the refusal: a
/// Connect past the limit never completes. So each bird is either *held* (a
/// link kept, notifications streamed) or *polled* (connect, read, disconnect,
/// every `pollInterval`), connection attempts go one at a time through the
/// fleet's `ConnectGate` with a random gap after each (no storm after
/// bluetoothd or the adapter comes back), and the scheduler never lets more
/// links up than the limit once it is known: given (`--links`), or learned
/// from a connection that never came while k links were up (the limit is then k).
///
/// Guarantees (see docs/scheduling.md): a held bird is never dropped for a
/// polled one; polled birds take the free links in turn (first come, first
/// served), so each gets a reading at least every `pollInterval` + (polled
/// birds ÷ free links) × the connect deadline; with the automatic policy one
/// link is kept for polling once birds outnumber links, so no bird starves.
///
/// A deadline also passes for a bird that left or a bluetoothd that is
/// restarting, so one is not proof: a limit is learned from two in a row at
/// the same count k with no connection between made while k or more links
/// were up (one made with fewer says nothing of k), and a learned limit is checked
/// again every `limitRecheck` by one attempt past it while a bird waits; if
/// that one connects, the limit is forgotten. A value, no I/O: part of `BirdFleet`.
struct LinkScheduler: Sendable {
    let policy: LinkPolicy
    /// Each adapter's link limit (by path) once learned; the one given
    /// (`policy.links`) applies to every adapter of the pool.
    private var learnedLimits: [ObjectPath: Int] = [:]
    /// Per adapter, the links up at a deadline not yet believed: a second at
    /// the same count, with no connection past that count between, teaches the limit.
    private var strikes: [ObjectPath: Int] = [:]
    /// Adapters whose learned limit one attempt may pass, to check it; and
    /// the attempt out making such a check (one attempt is out at a time).
    private var rechecking: Set<ObjectPath> = []
    private var check: (id: BirdFleet.MachineID, adapter: ObjectPath)?
    /// How many links were up when each machine's last attempt was let
    /// through: what the controller held if it never answers (links going
    /// down meanwhile no longer show at the deadline).
    private(set) var linkedAtAttempt: [BirdFleet.MachineID: Int] = [:]
    /// Per adapter, the most links seen up at once (at a connection, or at a
    /// deadline): the controller holds at least that many, so a deadline
    /// with fewer up is no limit.
    private var mostLinked: [ObjectPath: Int] = [:]
    /// Per adapter, connect deadlines since its last connection.
    private var deadlinesInARow: [ObjectPath: Int] = [:]
    /// Adapters being powered off and on to unstick their connect path: the
    /// limit learned stays when they come back (the same controller).
    private var resetting: Set<ObjectPath> = []
    /// Adapters that needed that: their learned limit is no longer checked
    /// (an attempt past it is what sticks them).
    private var stuckBefore: Set<ObjectPath> = []
    /// Per adapter, the deadlines in a row that make it stuck: 2, doubled
    /// after each reset that no connection followed (at most 64), so birds
    /// heard but out of reach do not power-cycle the adapter every minute.
    private var resetAfter: [ObjectPath: Int] = [:]
    private var random: SplitMix64
    /// Adapter addresses whose remembered limit was looked at (once each).
    private var recalled: Set<BluetoothAddress> = []
    /// Remembered birds whose link may still be adopted (the first Connect to each only).
    private var adoptable: Set<BluetoothAddress>

    /// The shortest gap between two connection attempts; a random part of up
    /// to as much again is added, so that gateways restarted together drift apart.
    static let connectGapMilliseconds: Int64 = 100
    static var connectGap: Duration { .milliseconds(connectGapMilliseconds) }
    /// How often a learned limit is checked by one attempt past it.
    static let limitRecheck = Duration.seconds(600)

    init(_ policy: LinkPolicy, seed: UInt64) {
        self.policy = policy
        self.random = SplitMix64(seed: seed)
        self.adoptable = Set(policy.rememberedBirds.keys)
    }

    /// Birds heard as discovery starts, in the order they take their turn:
    /// links up already first (an earlier run's, adopted and counted before
    /// a new link is tried), then the longest unread first as the earlier
    /// run left them (`rememberedBirds`; one it never read comes before any
    /// it read), so a restart keeps the poll turns rather than starting them
    /// over in the order bluetoothd lists its devices. Otherwise as heard.
    func inTurn(_ heard: [Sighting]) -> [Sighting] {
        let key = { (sighting: Sighting) in (sighting.connected ? 0 : 1, self.policy.rememberedBirds[sighting.address] ?? 0) }
        return heard.enumerated().sorted { a, b in
            let (keyA, keyB) = (key(a.element), key(b.element))
            return keyA != keyB ? keyA < keyB : a.offset < b.offset
        }.map(\.element)
    }

    /// An earlier run's limit for `adapter`, taken as learned the first time
    /// the adapter is seen (not after an outage: see `restarting`); nil
    /// if there is none, or a limit is given or known already.
    mutating func recall(_ adapter: AdapterChoice) -> Int? {
        guard policy.links == nil, let address = adapter.address, learnedLimits[adapter.path] == nil,
            recalled.insert(address).inserted,
            let limit = policy.remembered[address], limit > 0
        else { return nil }
        learnedLimits[adapter.path] = limit
        return limit
    }

    /// Birds an earlier run followed whose link, if bluetoothd still holds
    /// it, is to be adopted: in address order.
    var adoptableBirds: [BluetoothAddress] { adoptable.sorted() }

    /// The first Connect of this run to `address` went: true if an earlier
    /// run followed it (a link up now is adopted); once per bird.
    mutating func adopts(_ address: BluetoothAddress) -> Bool { adoptable.remove(address) != nil }

    /// The link limit of this adapter, if known (given or learned).
    func limit(on adapter: ObjectPath) -> Int? { policy.links ?? learnedLimits[adapter] }

    /// Whether a bird new to the fleet is polled: named so, or by default, or
    /// (automatic) when the held birds already fill all links but one;
    /// `limit`: the links of every adapter the fleet uses, if known.
    func polls(_ address: BluetoothAddress, heldBirds: Int, limit: Int?) -> Bool {
        if policy.hold.contains(address) { return false }
        if policy.poll.contains(address) { return true }
        switch policy.otherBirds {
        case .held: return false
        case .polled: return true
        case .auto:
            guard let limit else { return false }
            return heldBirds >= limit - 1
        }
    }

    /// Whether the automatic policy chose to hold this bird (it may be polled later to share the last link).
    func holdsByChoice(_ address: BluetoothAddress) -> Bool {
        return policy.otherBirds == .auto && !policy.hold.contains(address) && !policy.poll.contains(address)
    }

    /// A machine no longer connects (it stopped, was dropped, gave up).
    mutating func withdraw(_ id: BirdFleet.MachineID) {
        linkedAtAttempt[id] = nil
        attemptEnded(id)
    }

    /// Machine `id`'s Connect was answered, or its deadline passed: a check
    /// of a limit it made is over.
    mutating func attemptEnded(_ id: BirdFleet.MachineID) {
        if check?.id == id { check = nil }
    }

    /// Whether machine `id` may try to connect through `adapter` now (its
    /// turn at `ConnectGate`), with `links` up or being made there, and those
    /// up: below the limit, or one past a learned limit being checked; never
    /// through an adapter being powered off and on. A yes is the attempt let through.
    mutating func mayConnect(_ id: BirdFleet.MachineID, on adapter: ObjectPath, links: (up: Int, linked: Int)) -> Bool {
        guard !resetting.contains(adapter) else { return false }
        let limit = limit(on: adapter) ?? Int.max
        let checking = links.up == limit && rechecking.contains(adapter)
        guard links.up < limit || checking else { return false }
        if checking {
            rechecking.remove(adapter)
            check = (id, adapter)
        }
        linkedAtAttempt[id] = links.linked
        return true
    }

    /// Bluetooth is back (bluetoothd restarted, the adapter powered on): the
    /// limits learned of these
    /// adapters (nil: of all) are forgotten, to be learned again: a controller
    /// powered on again, or another under the same name, starts afresh, and a
    /// deadline that passed as bluetoothd went may have taught a wrong one (the
    /// hour-long VM soak learned a limit of 1 so, and streamed no more).
    /// Returns the adapters whose learned limit was forgotten.
    mutating func restarting(forgetting adapters: [ObjectPath]? = nil) -> [ObjectPath] {
        // An adapter birdctl powered off and on itself is the same controller.
        let forgotten = (adapters ?? Array(Set(learnedLimits.keys).union(mostLinked.keys).union(strikes.keys)))
            .filter { !resetting.contains($0) }
        resetting.subtract(adapters ?? Array(resetting))
        let forgottenLimits = forgotten.filter { learnedLimits[$0] != nil }.sorted { $0.rawValue < $1.rawValue }
        for adapter in forgotten {
            (learnedLimits[adapter], strikes[adapter], mostLinked[adapter], resetAfter[adapter]) = (nil, nil, nil, nil)
            stuckBefore.remove(adapter)
            rechecking.remove(adapter)
            if check?.adapter == adapter { check = nil }
        }
        deadlinesInARow.removeAll()
        return forgottenLimits
    }

    /// A connection never came while `links` others were up on `adapter`:
    /// the second time in a row at that count, its controller holds no more
    /// (unless the user said otherwise). True if that is news.
    mutating func learnLimit(_ links: Int, adapter: ObjectPath) -> Bool {
        // Fewer than it held before: no limit (a stuck adapter, or a bird gone; see `deadlinePassed`).
        guard policy.links == nil, links > 0, links >= mostLinked[adapter, default: 0], learnedLimits[adapter] != links
        else { return false }
        guard strikes[adapter] == links else {
            strikes[adapter] = links
            return false
        }
        (learnedLimits[adapter], strikes[adapter]) = (links, nil)
        // A check waiting for the old limit would pass the new one.
        rechecking.remove(adapter)
        return true
    }

    /// Machine `id` connected on `adapter`: if as many links as the strike's
    /// count (or more) were up when its attempt went, that deadline was no
    /// limit. True if it was checking the adapter's learned limit, which is
    /// then forgotten (the controller holds more).
    mutating func connected(_ id: BirdFleet.MachineID, on adapter: ObjectPath) -> Bool {
        if let strike = strikes[adapter], linkedAtAttempt[id, default: 0] >= strike { strikes[adapter] = nil }
        mostLinked[adapter] = max(mostLinked[adapter, default: 0], linkedAtAttempt[id, default: 0] + 1)
        (deadlinesInARow[adapter], resetAfter[adapter]) = (nil, nil)
        guard let check, check.id == id, check.adapter == adapter, learnedLimits[adapter] != nil else { return false }
        self.check = nil
        learnedLimits[adapter] = nil
        return true
    }

    /// Machine `id`'s connect deadline passed on `adapter` with `links` up
    /// (at the deadline, or when its attempt went, whichever is more). True
    /// if the adapter's connect path is stuck and is to be powered off and on:
    /// a deadline with fewer links up than the adapter held before (or none)
    /// cannot be its limit, and right after another deadline with no
    /// connection between, nothing comes through. Linux 6.1 loses track of a
    /// connection its controller refused and sends no connection request
    /// again until the adapter is closed; a Disconnect or RemoveDevice of the
    /// device does not help, a power cycle does (docs/scheduling.md).
    mutating func deadlinePassed(_ id: BirdFleet.MachineID, links: Int, on adapter: ObjectPath) -> Bool {
        let links = max(links, linkedAtAttempt[id, default: 0])
        let before = mostLinked[adapter, default: 0]
        mostLinked[adapter] = max(before, links)
        let inARow = deadlinesInARow[adapter, default: 0] + 1
        deadlinesInARow[adapter] = inARow
        let threshold = resetAfter[adapter, default: 2]
        guard links < max(before, 1), inARow >= threshold, !resetting.contains(adapter) else { return false }
        resetAfter[adapter] = min(threshold * 2, 64)
        resetting.insert(adapter)
        stuckBefore.insert(adapter)
        rechecking.remove(adapter)
        deadlinesInARow[adapter] = nil
        return true
    }

    /// The adapter is powered off and on for another reason (its discovery
    /// hears nothing, see `DiscoveryWatchdog`): as for a stuck connect path,
    /// no attempt goes out on it until it is back, and its learned limit
    /// stays. False if it is being reset already.
    mutating func resetting(_ adapter: ObjectPath) -> Bool { resetting.insert(adapter).inserted }

    /// Whether the adapter is being powered off and on.
    func isResetting(_ adapter: ObjectPath) -> Bool { resetting.contains(adapter) }

    /// The adapter could not be powered off and on: it is not being reset.
    mutating func resetFailed(_ adapter: ObjectPath) { resetting.remove(adapter) }

    /// bluetoothd went: a reset under way is dropped (the adapters come back
    /// afresh, and their limits are learned again, see `restarting`).
    /// A link up after bluetoothd is back is not one an earlier run left.
    mutating func bluetoothGone() {
        resetting.removeAll()
        adoptable.removeAll()
    }

    /// Time to check the learned limits: one attempt past each may go (not
    /// past those of adapters that got stuck). False if there is none to
    /// check (the check need not come again).
    mutating func recheckDue() -> Bool {
        rechecking = Set(learnedLimits.keys).subtracting(stuckBefore)
        return !rechecking.isEmpty
    }

    /// The gap after an attempt: `connectGap` and a random part of up to as much again.
    mutating func nextGap() -> Duration {
        Self.connectGap + .milliseconds(Int64(random.next() % UInt64(Self.connectGapMilliseconds + 1)))
    }
}

/// A small, seedable random number generator (Steele, Lea and Flood's
/// SplitMix64): a value, so the fleet stays a pure, repeatable machine.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `watch --all`: which birds are held and which polled, and the adapter's link limit if known.
public struct LinkPolicy: Hashable, Sendable {
    public enum Default: String, Hashable, Sendable, CaseIterable {
        /// Held while the adapter has links for all; once birds outnumber
        /// links, one link is kept for the rest, which are polled.
        case auto
        case held
        case polled
    }

    /// Always held / always polled.
    public var hold: Set<BluetoothAddress>
    public var poll: Set<BluetoothAddress>
    public var otherBirds: Default
    public var pollInterval: Duration
    /// The adapter's link limit if the user knows it; else it is learned.
    public var links: Int?
    /// Limits learned by an earlier run, by adapter address (`--state-dir`):
    /// taken as learned when the adapter is first seen, so a restart does
    /// not learn them again from connects that never come.
    public var remembered: [BluetoothAddress: Int] = [:]
    /// Birds an earlier run followed, with when it last read each (seconds
    /// since 1970): a link to one that is up as this run starts was that
    /// run's, and is adopted as ours (ours to poll and undo), not left alone
    /// as another program's; and the longest unread takes its turn first.
    public var rememberedBirds: [BluetoothAddress: Int64] = [:]

    public static let defaultPollInterval = Duration.seconds(60)

    public init(
        hold: Set<BluetoothAddress> = [], poll: Set<BluetoothAddress> = [], otherBirds: Default = .auto,
        pollInterval: Duration = LinkPolicy.defaultPollInterval, links: Int? = nil
    ) {
        self.hold = hold
        self.poll = poll
        self.otherBirds = otherBirds
        self.pollInterval = pollInterval
        self.links = links
    }
}

