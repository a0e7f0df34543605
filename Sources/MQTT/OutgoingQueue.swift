/// What waits to be published, as a value (the publisher guards it with a
/// lock): a bounded FIFO of messages that drops its oldest when full, the
/// "sticky" messages the broker must hold after every (re)connect (status,
/// discovery configs; the latest per topic), and how many messages are in
/// flight (handed to libmosquitto, PUBACK not yet seen).
struct OutgoingQueue {
    let capacity: Int
    let window: Int
    /// Handed to libmosquitto and not yet acknowledged. libmosquitto keeps
    /// these itself across a reconnect and sends them again (with DUP), so
    /// they stay counted until their PUBACK.
    private(set) var inFlight = 0
    /// Dropped since the last `takeDropped()`.
    private(set) var dropped = 0
    private(set) var sticky: [String: MQTTMessage] = [:]
    private(set) var stickyOrder: [String] = []

    // A ring: `storage[head]` is the oldest of `count` messages; the oldest
    // is message number `sent + dropped so far` of all ever appended.
    private var storage: [MQTTMessage?]
    private var head = 0
    private(set) var count = 0
    private var headNumber = 0
    /// Snapshot topics with a message still waiting: topic → its number.
    private var waitingSnapshots: [String: Int] = [:]

    init(capacity: Int, window: Int) {
        precondition(capacity > 0 && window > 0)
        self.capacity = capacity
        self.window = window
        storage = []
    }

    var isEmpty: Bool { count == 0 }
    /// Nothing queued and nothing unacknowledged.
    var isSettled: Bool { count == 0 && inFlight == 0 }

    /// Appends; when full, the oldest message makes room (and is counted).
    /// Returns true when this append dropped one.
    @discardableResult
    mutating func append(_ message: MQTTMessage) -> Bool {
        if message.isSnapshot, let number = waitingSnapshots[message.topic] {
            // Still waiting: the newer snapshot takes its place.
            storage[(head + number - headNumber) % storage.count] = message
            return false
        }
        if message.isSnapshot { waitingSnapshots[message.topic] = headNumber + count }
        if count == capacity {
            forgetSnapshot(storage[head])
            storage[head] = message
            head = (head + 1) % capacity
            headNumber += 1
            dropped += 1
            return true
        }
        if count == storage.count { grow() }
        storage[(head + count) % storage.count] = message
        count += 1
        return false
    }

    /// Doubles the ring (up to capacity), oldest first again: a gateway that
    /// never loses its broker never holds more than a window's worth.
    private mutating func grow() {
        let size = min(capacity, max(16, storage.count * 2))
        var larger = [MQTTMessage?](repeating: nil, count: size)
        for i in 0..<count { larger[i] = storage[(head + i) % storage.count] }
        storage = larger
        head = 0
    }

    /// The next message to hand over while the window has room.
    mutating func nextToSend() -> MQTTMessage? {
        guard count > 0, inFlight < window else { return nil }
        let message = storage[head]
        forgetSnapshot(message)
        storage[head] = nil
        head = (head + 1) % storage.count
        headNumber += 1
        count -= 1
        inFlight += 1
        return message
    }

    private mutating func forgetSnapshot(_ message: MQTTMessage?) {
        if let message, message.isSnapshot, waitingSnapshots[message.topic] == headNumber {
            waitingSnapshots[message.topic] = nil
        }
    }

    /// A sticky message is handed over outside the FIFO; it is in flight too.
    mutating func sendingSticky() { inFlight += 1 }

    /// A PUBACK arrived.
    mutating func acknowledged() { inFlight = max(0, inFlight - 1) }

    mutating func takeDropped() -> Int {
        defer { dropped = 0 }
        return dropped
    }

    /// Remembers `message` as its topic's sticky value (replacing an older one).
    mutating func setSticky(_ message: MQTTMessage) {
        if sticky.updateValue(message, forKey: message.topic) == nil { stickyOrder.append(message.topic) }
    }

    /// The sticky messages in the order their topics first appeared.
    var stickyMessages: [MQTTMessage] { stickyOrder.compactMap { sticky[$0] } }
}
