/// What waits to be published, as a value (the publisher guards it with a
/// lock): a FIFO of messages bounded in messages and in bytes that drops its
/// oldest when full, the "sticky" messages the broker must hold after every
/// (re)connect (status, discovery configs; the latest per topic) and which
/// of them are due, and how many messages are in flight (handed to
/// libmosquitto, PUBACK not yet seen). Due sticky messages go before the
/// FIFO, and both only while the window has room: a reconnect's re-sends
/// included, however many birds there are.
struct OutgoingQueue {
    let capacity: Int
    /// The FIFO's bound in bytes, each message counted as its topic, its
    /// payload and `overhead` (what holding it costs besides).
    let byteCapacity: Int
    static let overhead = 64
    let window: Int
    /// Handed to libmosquitto and not yet acknowledged. libmosquitto keeps
    /// these itself across a reconnect and sends them again (with DUP), so
    /// they stay counted until their PUBACK.
    private(set) var inFlight = 0
    /// Dropped since the last `takeDropped()`.
    private(set) var dropped = 0
    private(set) var sticky: [String: MQTTMessage] = [:]
    private(set) var stickyOrder: [String] = []
    /// Sticky topics to (re)send, oldest first; an entry whose topic is not
    /// in `dueSet` (forgotten, or listed twice) is skipped.
    private var due: [String] = []
    private var dueHead = 0
    private var dueSet: Set<String> = []
    /// The FIFO's messages' size, as `byteCapacity` counts it.
    private(set) var bytes = 0

    // A ring: `storage[head]` is the oldest of `count` messages; the oldest
    // is message number `sent + dropped so far` of all ever appended.
    private var storage: [MQTTMessage?]
    private var head = 0
    private(set) var count = 0
    private var headNumber = 0
    /// Snapshot topics with a message still waiting: topic → its number.
    private var waitingSnapshots: [String: Int] = [:]

    init(capacity: Int, byteCapacity: Int = .max, window: Int) {
        precondition(capacity > 0 && byteCapacity > 0 && window > 0)
        self.capacity = capacity
        self.byteCapacity = byteCapacity
        self.window = window
        storage = []
    }

    static func size(_ message: MQTTMessage) -> Int { message.topic.utf8.count + message.payload.count + overhead }

    var isEmpty: Bool { count == 0 }
    /// Sticky messages due to be sent.
    var stickiesDue: Int { dueSet.count }
    /// Nothing queued, no sticky message due and nothing unacknowledged.
    var isSettled: Bool { count == 0 && inFlight == 0 && dueSet.isEmpty }

    /// Appends; when full (in messages or bytes), the oldest messages make
    /// room (and are counted). Returns true when this append dropped any.
    @discardableResult
    mutating func append(_ message: MQTTMessage) -> Bool {
        let droppedBefore = dropped
        if message.isSnapshot, let number = waitingSnapshots[message.topic] {
            // Still waiting: the newer snapshot takes its place.
            let index = (head + number - headNumber) % storage.count
            bytes += Self.size(message) - (storage[index].map(Self.size) ?? 0)
            storage[index] = message
        } else {
            if count == capacity { dropOldest() }
            if message.isSnapshot { waitingSnapshots[message.topic] = headNumber + count }
            if count == storage.count { grow() }
            storage[(head + count) % storage.count] = message
            count += 1
            bytes += Self.size(message)
        }
        // The newest stays, even alone over the bound.
        while bytes > byteCapacity && count > 1 { dropOldest() }
        return dropped > droppedBefore
    }

    private mutating func dropOldest() {
        _ = takeOldest()
        dropped += 1
    }

    private mutating func takeOldest() -> MQTTMessage? {
        let message = storage[head]
        forgetSnapshot(message)
        storage[head] = nil
        head = (head + 1) % storage.count
        headNumber += 1
        count -= 1
        bytes -= message.map(Self.size) ?? 0
        return message
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

    /// The next message to hand over while the window has room: a due
    /// sticky message first, else the oldest of the FIFO.
    mutating func nextToSend() -> MQTTMessage? {
        guard inFlight < window else { return nil }
        if !dueSet.isEmpty, let message = nextDueSticky() {
            inFlight += 1
            return message
        }
        guard count > 0 else { return nil }
        inFlight += 1
        return takeOldest()
    }

    private mutating func nextDueSticky() -> MQTTMessage? {
        defer {
            // Nothing due: the list starts again (else it would grow for ever).
            if dueSet.isEmpty {
                due.removeAll(keepingCapacity: true)
                dueHead = 0
            }
        }
        while dueHead < due.count {
            let topic = due[dueHead]
            dueHead += 1
            if dueSet.remove(topic) != nil, let message = sticky[topic] { return message }
        }
        return nil
    }

    /// The due list's length, read and skipped entries included (for a test).
    var dueListLength: Int { due.count }

    private mutating func forgetSnapshot(_ message: MQTTMessage?) {
        if let message, message.isSnapshot, waitingSnapshots[message.topic] == headNumber {
            waitingSnapshots[message.topic] = nil
        }
    }

    /// A PUBACK arrived.
    mutating func acknowledged() { inFlight = max(0, inFlight - 1) }

    mutating func takeDropped() -> Int {
        defer { dropped = 0 }
        return dropped
    }

    /// Remembers `message` as its topic's sticky value (replacing an older
    /// one) and makes it due.
    mutating func setSticky(_ message: MQTTMessage) {
        if sticky.updateValue(message, forKey: message.topic) == nil { stickyOrder.append(message.topic) }
        if dueSet.insert(message.topic).inserted { due.append(message.topic) }
    }

    /// After a (re)connect: every sticky message is due, in its order.
    mutating func makeAllStickiesDue() {
        due = stickyOrder
        dueHead = 0
        dueSet = Set(stickyOrder)
    }

    /// No longer sticky (nor due) — for a bird forgotten.
    mutating func forgetSticky(_ topics: Set<String>) {
        for topic in topics {
            sticky[topic] = nil
            dueSet.remove(topic)
        }
        stickyOrder.removeAll { topics.contains($0) }
    }

    /// The sticky messages in the order their topics first appeared.
    var stickyMessages: [MQTTMessage] { stickyOrder.compactMap { sticky[$0] } }
}
