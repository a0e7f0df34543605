import Bird
import BlueZ

/// Writes asked for over MQTT (`…/ADDRESS/FIELD/set`): each waits until its
/// bird streams on a link of this gateway, is written there once, and gets a
/// result — done, or why not (a bad value, the write refused, the link lost,
/// another gateway holding the bird, or no link before its time to live). A
/// pure machine like `GatewayMachine`: events in, actions out.
public struct GatewayCommands: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// How long a write waits for its bird.
        public var timeToLive: Duration
        /// At most this many birds with writes waiting.
        public var maximumBirds: Int
        /// A command's payload is refused above this many bytes, before it is decoded.
        public var maximumPayload: Int

        public init(timeToLive: Duration = .seconds(60), maximumBirds: Int = 256, maximumPayload: Int = 1024) {
            self.timeToLive = timeToLive
            self.maximumBirds = maximumBirds
            self.maximumPayload = maximumPayload
        }
    }

    public enum Action: Hashable, Sendable {
        /// Write the value on the bird's link (the central answers with a `written` report).
        case write(address: BluetoothAddress, BirdValue)
        /// The result for whoever asked: the value written, or the reason it was not.
        case result(address: BluetoothAddress, BirdField, Result)
    }

    public enum Result: Hashable, Sendable {
        case written(BirdValue)
        case failed(String)
    }

    struct Pending: Sendable, Hashable {
        var value: BirdValue
        var deadline: Duration
        var inFlight = false
    }

    public let configuration: Configuration
    /// Per bird, per field: the newest write asked for (a newer one replaces it).
    private(set) var pending: [BluetoothAddress: [BirdField: Pending]] = [:]
    /// Birds streaming on a link of this gateway (a reading came since it connected).
    private var streaming: Set<BluetoothAddress> = []

    public init(_ configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Whether any write waits (the gateway's readings skip this machine otherwise).
    public var hasPending: Bool { !pending.isEmpty }

    // MARK: Events

    /// A command's payload from the broker: decoded with `birdctl set`'s
    /// rules (a payload over `maximumPayload` is refused unread).
    public mutating func requested(_ address: BluetoothAddress, _ field: BirdField, payload: [UInt8], now: Duration) -> [Action] {
        let value =
            payload.count <= configuration.maximumPayload
            ? BirdCodec.decode(field, payload)
            : .failure(BirdValueError(field: field, raw: [], reason: "over \(configuration.maximumPayload) bytes"))
        return requested(address, field, value, now: now)
    }

    /// A command: the text as `birdctl set` takes it, already validated with
    /// its rules into `value` — or the reason it is not one.
    public mutating func requested(_ address: BluetoothAddress, _ field: BirdField, _ value: Swift.Result<BirdValue, BirdValueError>, now: Duration)
        -> [Action]
    {
        guard case .success(let value) = value else {
            if case .failure(let error) = value { return [.result(address: address, field, .failed(error.description))] }
            return []
        }
        guard pending[address] != nil || pending.count < configuration.maximumBirds else {
            return [.result(address: address, field, .failed("too many birds with writes waiting"))]
        }
        var actions: [Action] = []
        if let older = pending[address]?[field], !older.inFlight {
            actions.append(.result(address: address, field, .failed("replaced by a newer value")))
        }
        if pending[address]?[field]?.inFlight == true {
            // The one in flight answers first; this one goes after it.
            pending[address]?[field] = Pending(value: value, deadline: now + configuration.timeToLive, inFlight: true)
            return actions
        }
        pending[address, default: [:]][field] = Pending(value: value, deadline: now + configuration.timeToLive)
        return actions + writes(address)
    }

    /// The write could not go (no machine follows the bird yet, or its link is
    /// going or not ready): it goes again at the bird's next reading.
    public mutating func notWritten(_ address: BluetoothAddress, _ value: BirdValue) -> [Action] {
        guard pending[address]?[value.field]?.inFlight == true else { return [] }
        pending[address]?[value.field]?.inFlight = false
        streaming.remove(address)
        return []
    }

    /// The bird is connected here, or streams (a reading; the gateway tells
    /// this machine only while writes wait): what waits for it goes.
    public mutating func streams(_ address: BluetoothAddress) -> [Action] {
        guard streaming.insert(address).inserted || pending[address] != nil else { return [] }
        return writes(address)
    }

    /// The bird's link went: a write in flight may or may not have landed.
    public mutating func disconnected(_ address: BluetoothAddress) -> [Action] {
        streaming.remove(address)
        return fail(address, onlyInFlight: true, "the link was lost before the bird answered")
    }

    /// Another gateway holds the bird now: its writes are not this one's.
    public mutating func handedOver(_ address: BluetoothAddress) -> [Action] {
        streaming.remove(address)
        return fail(address, onlyInFlight: false, "another gateway holds the bird now")
    }

    /// Another gateway came to hold a bird this one never held: it answers
    /// the writes that waited here too, so these go without a result.
    public mutating func answeredElsewhere(_ address: BluetoothAddress) {
        guard let fields = pending[address], !fields.values.contains(where: \.inFlight) else { return }
        pending[address] = nil
    }

    /// The central's answer to a write (`written` report). A link not ready
    /// yet, or another write in flight on it, is no answer: the write goes
    /// again at the bird's next reading.
    public mutating func written(_ address: BluetoothAddress, _ value: BirdValue, failure: BlueZError?) -> [Action] {
        guard let entry = pending[address]?[value.field], entry.inFlight else { return [] }
        let field = value.field
        if failure?.kind == .notReady || failure?.kind == .inProgress { return notWritten(address, value) }
        let actions: [Action] = [.result(address: address, field, failure.map { .failed("\($0)") } ?? .written(value))]
        if entry.value != value {
            // A newer value came while this one was in flight: it goes next.
            pending[address]?[field]?.inFlight = false
        } else {
            remove(address, field)
        }
        return actions + writes(address)
    }

    /// About once a second: writes past their time to live fail.
    public mutating func tick(now: Duration) -> [Action] {
        var actions: [Action] = []
        for address in pending.keys.sorted() {
            for (field, entry) in pending[address] ?? [:] where !entry.inFlight && now >= entry.deadline {
                remove(address, field)
                actions.append(.result(address: address, field, .failed("the bird was not connected in time")))
            }
        }
        return actions
    }

    // MARK: Helpers

    /// The next write waiting for the bird, if none is in flight: a link
    /// carries one write at a time (the next goes when it is answered).
    private mutating func writes(_ address: BluetoothAddress) -> [Action] {
        guard streaming.contains(address), let fields = pending[address], !fields.values.contains(where: \.inFlight),
            let field = BirdField.allCases.first(where: { fields[$0] != nil }), let entry = fields[field]
        else { return [] }
        pending[address]?[field]?.inFlight = true
        return [.write(address: address, entry.value)]
    }

    private mutating func fail(_ address: BluetoothAddress, onlyInFlight: Bool, _ reason: String) -> [Action] {
        guard let fields = pending[address] else { return [] }
        var actions: [Action] = []
        for field in BirdField.allCases {
            guard let entry = fields[field], entry.inFlight || !onlyInFlight else { continue }
            remove(address, field)
            actions.append(.result(address: address, field, .failed(reason)))
        }
        return actions
    }

    private mutating func remove(_ address: BluetoothAddress, _ field: BirdField) {
        pending[address]?[field] = nil
        if pending[address]?.isEmpty == true { pending[address] = nil }
    }
}
