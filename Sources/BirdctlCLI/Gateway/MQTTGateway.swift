import Bird
import DBus
import MQTT

/// `watch --mqtt`: hands every report to the broker as messages (through
/// `MQTTPublisher`, which never blocks the loop) and ends cleanly: "offline"
/// published, what is queued sent, within a deadline.
///
/// Loop-confined, except the publisher's events, which it moves onto the loop.
final class MQTTGateway: @unchecked Sendable {
    private let options: GatewayOptions
    private let messages: GatewayMessages
    private let loop: EventLoop
    private var publisher: MQTTPublisher?
    private let events = ReportFormatter(json: true, color: false)
    private var birds: [String: Bird] = [:]
    /// Birds with a reading since their state was last published, in the
    /// order of their first such reading.
    private var stateDue: [String] = []
    private var closing = false

    /// What the gateway remembers of a bird: its latest values (for the
    /// state topic), whether it is online, whether its discovery went out.
    private struct Bird {
        var values: [BirdField: BirdValue] = [:]
        var online = false
        var discovered = false
        /// Listed in `stateDue`.
        var stateDue = false
    }

    /// At most this many birds remembered (strangers may come and go all day).
    static let maximumBirds = 4096

    /// How long an exit waits for the broker to take more of what is queued.
    static let closeDeadline: Duration = .seconds(3)

    /// Called on the loop when the gateway cannot go on (exit code 11).
    var onFailure: (@Sendable (MQTTError) -> Void)?

    init(_ options: GatewayOptions, loop: EventLoop) {
        self.options = options
        messages = GatewayMessages(prefix: options.prefix)
        self.loop = loop
    }

    /// Connects in the background; readings queue until the broker answers.
    func start() throws(MQTTError) {
        var settings = options.settings
        // At every connect: what the broker says of our birds' availability,
        // to correct what a gateway that died left (its will covers only
        // PREFIX/status).
        settings.subscriptions = [messages.birdStatusFilter]
        let publisher = try MQTTPublisher(settings) { [weak self] event in self?.publisherEvent(event) }
        self.publisher = publisher
        publisher.publishSticky(messages.gatewayStatus(online: true))
        if options.discovery { publisher.publishSticky(messages.gatewayDiscovery(version: Version.text)) }
        publisher.start()
        loop.addBeforePollHook { [weak self] in self?.publishDueStates() }
    }

    // MARK: Reports (on the loop)

    func handle(_ report: BirdCentral.Report) {
        guard let publisher, !closing else { return }
        if case .reading(let peripheral, let value, _, _) = report {
            return gather(value, of: peripheral.address)
        }
        // Anything else goes out after the states of the readings before it.
        publishDueStates()
        switch report {
        case .reading: break
        case .badValue(let peripheral, let error):
            publisher.publish(messages.event(peripheral.address, events.badValueLine(peripheral, error)))
        case .connected(let peripheral):
            publish(event: report, about: peripheral)
            setOnline(peripheral, true)
        case .disconnected(let peripheral):
            setOnline(peripheral, false)
            publish(event: report, about: peripheral)
        case .found(let p, _), .retrying(let p, _, _), .operationFailed(let p, _, _), .pairing(let p), .paired(let p):
            publish(event: report, about: p)
        case .gaveUp, .waiting:
            publish(event: report, about: nil)
        }
    }

    /// A reading's value goes out at once; its bird's state is due.
    private func gather(_ value: BirdValue, of address: String) {
        makeRoom(for: address)
        publisher?.publish(messages.value(address, value))
        let firstSinceState = Self.update(&birds[address, default: Bird()], with: value)
        if firstSinceState { stateDue.append(address) }
    }

    private func publish(event report: BirdCentral.Report, about peripheral: BirdCentral.Peripheral?) {
        guard let line = events.eventLine(report) else { return }
        publisher?.publish(messages.event(peripheral?.address, line))
    }

    /// A bird's state (its latest values) goes out once per loop wake-up,
    /// after every reading the wake-up found, not once per reading: in a
    /// burst of notifications, one state message per wake-up instead of one
    /// per notification (each was built, then mostly replaced in the queue),
    /// and the last one published always holds the newest values. It goes
    /// before the loop sleeps, so it waits for nothing.
    private func publishDueStates() {
        guard !stateDue.isEmpty, let publisher else { return }
        let time = Timestamp.iso8601()
        for address in stateDue {
            guard let values = birds[address]?.values else { continue }
            birds[address]?.stateDue = false
            publisher.publish(messages.state(address, values, time: time))
        }
        stateDue.removeAll(keepingCapacity: true)
    }

    /// Keeps `value` as the bird's latest and marks its state due; true if
    /// it was not due yet. (One dictionary access per reading.)
    private static func update(_ bird: inout Bird, with value: BirdValue) -> Bool {
        bird.values[value.field] = value
        defer { bird.stateDue = true }
        return !bird.stateDue
    }

    /// Makes room when a new bird would make too many (strangers may come
    /// and go all day): the offline birds are forgotten here (their due states
    /// go out first), and their status and discovery are no longer re-sent at
    /// each reconnect; what the broker retains of them stays true (offline).
    private func makeRoom(for address: String) {
        guard birds.count >= Self.maximumBirds && birds[address] == nil else { return }
        publishDueStates()
        let offline = birds.filter { !$0.value.online }.keys
        publisher?.forgetSticky(Set(offline.flatMap(messages.retainedTopics)))
        for address in offline { birds[address] = nil }
    }

    /// Forgets a bird for good (the fleet forgot it, unseen for long): what
    /// the gateway remembers of it, its sticky status and discovery, and what
    /// the broker retains of it — its values, state, status and discovery
    /// configs, cleared with empty retained messages, so that Home Assistant
    /// drops its entities and no retained topic of it outlives the truth.
    /// Queued like readings: a buffer that overflows while the broker is away
    /// may drop some (docs/mqtt.md). On the loop.
    func forget(address: String) {
        guard let publisher, !closing else { return }
        publishDueStates()
        birds[address] = nil
        let topics = messages.retainedTopics(of: address)
        publisher.forgetSticky(Set(topics))
        for topic in topics { publisher.publish(GatewayMessages.clearing(topic)) }
    }

    private func setOnline(_ peripheral: BirdCentral.Peripheral, _ online: Bool) {
        let address = peripheral.address
        makeRoom(for: address)
        var bird = birds[address, default: Bird()]
        if online && options.discovery && !bird.discovered {
            for config in messages.birdDiscovery(peripheral, version: Version.text) { publisher?.publishSticky(config) }
            bird.discovered = true
        }
        bird.online = online
        birds[address] = bird
        publisher?.publishSticky(messages.birdStatus(address, online: online))
    }

    /// The broker holds "online" for a bird this gateway does not hold (a
    /// gateway killed while it held it left it): "offline" it is. Sticky, like
    /// every status, so that a later "online" cannot overtake it.
    private func markOfflineUnlessHeld(_ address: String) {
        guard let publisher, !closing, birds[address]?.online != true else { return }
        // Remembered (as offline), so that `makeRoom` bounds these too.
        makeRoom(for: address)
        if birds[address] == nil { birds[address] = Bird() }
        publisher.publishSticky(messages.birdStatus(address, online: false))
    }

    // MARK: Ending (on the loop)

    /// Publishes "offline" for every bird still online and the gateway, then
    /// waits for the broker to take everything queued, giving up after
    /// `closeDeadline` without progress (a dead or hung broker); then `done`,
    /// told whether the broker took everything.
    func close(_ done: @escaping @Sendable (_ delivered: Bool) -> Void) {
        guard let publisher, !closing else { return done(true) }
        publishDueStates()
        closing = true
        let offline = birds.filter(\.value.online).keys.sorted().map { messages.birdStatus($0, online: false) }
            + [messages.gatewayStatus(online: false)]
        exitDone = done
        exitTimer = loop.schedule(after: Self.closeDeadline) { [self] in checkExitProgress() }
        publisher.close(final: offline) { [self] in
            loop.execute { [self] in
                if let exitTimer { loop.cancel(exitTimer) }
                finishExit(delivered: publisher.undelivered == 0)
            }
        }
    }

    private var exitTimer: EventLoop.TimerID?
    private var exitDone: (@Sendable (Bool) -> Void)?
    private var undeliveredAtLastCheck = Int.max

    private func checkExitProgress() {
        let left = publisher?.undelivered ?? 0
        if left > 0 && left < undeliveredAtLastCheck {
            undeliveredAtLastCheck = left
            exitTimer = loop.schedule(after: Self.closeDeadline) { [self] in checkExitProgress() }
            return
        }
        guard left > 0 else {
            // All taken; the publisher's own end is on its way (and if the
            // DISCONNECT hangs, this is as good).
            exitTimer = loop.schedule(after: Self.closeDeadline) { [self] in finishExit(delivered: true) }
            return
        }
        Diagnostics.error(
            "the MQTT broker did not take \(left) message(s) before the exit deadline; its will marks the gateway offline")
        finishExit(delivered: false)
    }

    /// Once, whichever comes first: the publisher's end or the deadline.
    private func finishExit(delivered: Bool) {
        let done = exitDone
        exitDone = nil
        done?(delivered)
    }

    // MARK: The publisher's events (its thread)

    private func publisherEvent(_ event: MQTTEvent) {
        let broker = options.brokerDescription
        switch event {
        case .connected(let backlog):
            Diagnostics.say("connected to the MQTT broker at \(broker)" + (backlog > 0 ? "; sending \(backlog) queued message(s)" : ""))
        case .lost(let reason, let queued):
            Diagnostics.say("lost the MQTT broker at \(broker) (\(reason)); queuing (\(queued) waiting) and reconnecting")
        case .dropped(let count):
            Diagnostics.error("the MQTT buffer was full while the broker was away: dropped the \(count) oldest message(s)")
            var object = events.event("dropped", nil)
            object.add("messages", .integer(count))
            publisher?.publish(messages.event(nil, object.rendered))
        case .failed(let error):
            loop.execute { [self] in onFailure?(error) }
        case .received(let message):
            guard let address = messages.retainedOnline(message) else { return }
            loop.execute { [self] in markOfflineUnlessHeld(address) }
        }
    }
}
