import Bird
import DBus
import Formats
import Health
import MQTT

/// `watch --mqtt`: the gateway's machines (`GatewayMachine`, what is
/// published and when; `GatewayCommands`, writes from MQTT; `FleetOwnership`
/// with `--fleet`) wired to the broker (`MQTTPublisher`, which never blocks
/// the loop), the loop and the central (`GatewayCentral`): reports, wake-ups,
/// broker events and timers go in; the machines' publications are rendered
/// into topics and payloads (`GatewayMessages`) and their actions performed.
///
/// Loop-confined, except the publisher's events, which it moves onto the loop.
public final class MQTTGateway: @unchecked Sendable {
    private let options: GatewayConfiguration
    private let messages: GatewayMessages
    private let loop: EventLoop
    private var publisher: MQTTPublisher?
    private var machine: GatewayMachine
    private let events = ReportFormatter(json: true, color: false)
    private var exitTimer: EventLoop.TimerID?
    private var exitDone: (@Sendable (Bool) -> Void)?

    /// Broker connections and messages dropped so far (`health`).
    private var connections = 0
    private var dropped = 0

    /// The gateway's side of the health page (on the loop).
    public var health: GatewayHealth {
        GatewayHealth(queued: publisher?.undelivered ?? 0, dropped: dropped, reconnects: max(0, connections - 1))
    }

    /// How long an exit waits for the broker to take more of what is queued.
    static let closeDeadline: Duration = .seconds(3)

    /// Called on the loop when the gateway cannot go on: the command stops,
    /// and `end` says `.failed`.
    public var onFailure: (@Sendable () -> Void)?
    private var failed = false

    /// The central that follows the birds: it carries out writes and, in a
    /// fleet, connects the birds this gateway is granted.
    public weak var central: (any GatewayCentral)?

    /// `--fleet`: which birds this gateway connects, agreed with the others
    /// through the broker; the central is told through these (on the loop).
    private var ownership: FleetOwnership?
    private let fleetTopics: FleetTopics?
    private let startedAt = MonotonicInstant.now

    /// Writes asked for over MQTT; the central carries one out on the bird's
    /// link, answered by a `written` report.
    private var commands: GatewayCommands

    public init(_ options: GatewayConfiguration, loop: EventLoop) {
        self.options = options
        machine = GatewayMachine(.init(discovery: options.discovery, shared: options.fleet != nil))
        commands = GatewayCommands(.init(timeToLive: options.writeTimeToLive))
        self.loop = loop
        if var fleet = options.fleet, let root = options.fleetRoot {
            fleet.discovery = options.discovery
            ownership = FleetOwnership(fleet)
            fleetTopics = FleetTopics(root: root, room: fleet.room)
        } else {
            fleetTopics = nil
        }
        messages = GatewayMessages(prefix: options.prefix, fleet: fleetTopics)
    }

    /// Whether this gateway shares the birds with a fleet (`--fleet`).
    public var isShared: Bool { ownership != nil }

    /// Connects in the background; readings queue until the broker answers.
    public func start() {
        var settings = options.settings
        // At every connect: what the broker says of our birds' availability,
        // to correct what a gateway that died left (its will covers only
        // PREFIX/status).
        // The probe last: its echo comes after every retained status.
        settings.subscriptions = [messages.birdStatusFilter, messages.commandFilter] + (fleetTopics?.filters ?? [])
            + [messages.probeTopic]
        let publisher: MQTTPublisher
        do throws(MQTTError) {
            publisher = try MQTTPublisher(settings) { [weak self] event in self?.publisherEvent(event) }
        } catch {
            return fail(error)
        }
        self.publisher = publisher
        perform(machine.start())
        publisher.start()
        loop.addBeforePollHook { [weak self] in self?.wakeUpEnds() }
        scheduleTick()
    }

    // MARK: Events (on the loop)

    public func handle(_ report: BirdCentral.Report) {
        loop.assertInLoop()
        guard publisher != nil else { return }
        if case .reading(let peripheral, let value, _, _) = report {
            // The hot path: no action array, no publication.
            if commands.hasPending { perform(commands.streams(peripheral.address)) }
            switch machine.reading(peripheral.address, value) {
            case .publishValue: break
            case .forgetStickyThenPublishValue(let forgotten): perform(.forgetSticky(addresses: forgotten))
            case .ignore: return
            }
            publisher?.publish(messages.value(peripheral.address, value))
            return
        }
        switch report {
        case .connected(let peripheral):
            // Writes may go from now on (one refused as not ready yet goes again at the next reading).
            perform(commands.streams(peripheral.address))
            fleet { $0.linked(peripheral.address, true, now: $1) }
        case .disconnected(let peripheral):
            perform(commands.disconnected(peripheral.address))
            fleet { $0.linked(peripheral.address, false, now: $1) }
        case .written(let peripheral, let value, let failure):
            perform(commands.written(peripheral.address, value, failure: failure))
        default: break
        }
        perform(machine.report(report))
    }

    /// `--fleet`: a Bird heard at `rssi` (from the central, on the loop).
    public func heard(_ address: BluetoothAddress, rssi: Int16) {
        fleet { $0.heard(address, rssi: Int(rssi), now: $1) }
    }

    private func wakeUpEnds() {
        let actions = machine.wakeUpEnds()
        if !actions.isEmpty { perform(actions) }
    }

    /// Forgets a bird for good: its memory, its sticky messages, and what the
    /// broker retains of it (docs/mqtt.md). For the fleet's `.forgotten`.
    public func forget(address: BluetoothAddress) {
        loop.assertInLoop()
        perform(machine.forget(address))
    }

    /// How a gateway ended.
    public enum Outcome: Sendable {
        /// The broker took everything.
        case delivered
        /// The broker did not take everything before the exit deadline.
        case undelivered
        /// The gateway could not go on (the broker refused it or failed TLS).
        case failed
    }

    /// Ends the gateway once the command's Bluetooth side ended: the broker
    /// gets what is queued, then `done` is told how that went (on the loop).
    public func end(_ done: @escaping @Sendable (Outcome) -> Void) {
        let failed = failed
        close { delivered in done(failed ? .failed : delivered ? .delivered : .undelivered) }
    }

    private func fail(_ error: MQTTError) {
        Diagnostics.error(error.description)
        failed = true
        onFailure?()
    }

    /// Publishes "offline" for every bird still online and the gateway, then
    /// waits for the broker to take everything queued, giving up after
    /// `closeDeadline` without progress (a dead or hung broker); then `done`,
    /// told whether the broker took everything.
    public func close(_ done: @escaping @Sendable (_ delivered: Bool) -> Void) {
        loop.assertInLoop()
        guard publisher != nil else { return done(true) }
        exitDone = done
        perform(machine.close())
    }

    // MARK: Actions (on the loop)

    private func perform(_ actions: [GatewayMachine.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: GatewayMachine.Action) {
        switch action {
        case .publish(let publication):
            publish(publication)
        case .publishSticky(let publication):
            for message in render(publication) { publisher?.publishSticky(message) }
        case .forgetSticky(let addresses):
            publisher?.forgetSticky(Set(addresses.flatMap(messages.retainedTopics)))
        case .forgetSharedDiscovery(let address):
            publisher?.forgetSticky(Set(messages.sharedDiscoveryTopics(of: address)))
        case .closePublisher(let final):
            publisher?.close(final: final.flatMap(render)) { [self] in
                loop.execute { [self] in perform(machine.publisherClosed(undelivered: publisher?.undelivered ?? 0)) }
            }
        case .armExitTimer:
            exitTimer = loop.schedule(after: Self.closeDeadline) { [self] in
                perform(machine.exitDeadlinePassed(undelivered: publisher?.undelivered ?? 0))
            }
        case .cancelExitTimer:
            if let exitTimer { loop.cancel(exitTimer) }
            exitTimer = nil
        case .gaveUp(let left):
            Diagnostics.error(
                "the MQTT broker did not take \(left) message(s) before the exit deadline; its will marks the gateway offline")
        case .finish(let delivered):
            let done = exitDone
            exitDone = nil
            done?(delivered)
        }
    }

    private func publish(_ publication: GatewayMachine.Publication) {
        guard let publisher else { return }
        if case .value(let address, let value) = publication {
            publisher.publish(messages.value(address, value))  // one message, no array
        } else {
            for message in render(publication) { publisher.publish(message) }
        }
    }

    private func render(_ publication: GatewayMachine.Publication) -> [MQTTMessage] {
        messages.render(publication, events: events, version: options.version)
    }

    // MARK: The fleet (on the loop)

    private var now: Duration { MonotonicInstant.now - startedAt }

    /// Runs an event on the fleet's machine, if any, and performs its actions.
    private func fleet(_ event: (inout FleetOwnership, Duration) -> [FleetOwnership.Action]) {
        guard ownership != nil, publisher != nil, machine.isRunning else { return }
        let actions = event(&ownership!, now)
        for action in actions { perform(action) }
    }

    /// Once a second: the fleet's dwell times and silences, the writes' time to live.
    private func scheduleTick() {
        _ = loop.schedule(after: .seconds(1)) { [weak self] in
            guard let self, machine.isRunning else { return }
            fleet { $0.tick(now: $1) }
            perform(commands.tick(now: now))
            scheduleTick()
        }
    }

    // MARK: Writes from MQTT (on the loop)

    /// A command from the broker; in a fleet, only the bird's holder (or
    /// every gateway, while none holds it) takes it.
    private func command(_ address: BluetoothAddress, _ field: BirdField, _ payload: [UInt8]) {
        guard machine.isRunning else { return }
        if ownership?.heldElsewhere(address) == true { return }
        perform(commands.requested(address, field, payload: payload, now: now))
    }

    private func perform(_ actions: [GatewayCommands.Action]) {
        for action in actions {
            switch action {
            case .write(let address, let value):
                if central?.write(address, value) != true { perform(commands.notWritten(address, value)) }
            case .result(let address, let field, let result):
                publisher?.publish(messages.commandResult(address, field, result))
            }
        }
    }

    private func perform(_ action: FleetOwnership.Action) {
        guard let topics = fleetTopics, let publisher else { return }
        switch action {
        case .publishHeard(let address, let rssi): publisher.publishSticky(topics.heard(address, rssi: rssi))
        case .claim(let address): publisher.publish(topics.claim(address))
        case .withdrawClaim(let address):
            publisher.publish(GatewayMessages.clearing(topics.holderTopic(address)))
        case .grant(let address): central?.grant(address)
        case .release(let address):
            perform(commands.handedOver(address))
            central?.release(address)
        case .heldElsewhere(let address): commands.answeredElsewhere(address)
        case .forgotten(let address): publisher.forgetSticky([topics.heardTopic(address)])
        case .hearingSensor(let address, true):
            publisher.publishSticky(messages.hearingDiscovery(address, fleet: topics, version: options.version))
        case .hearingSensor(let address, false):
            let config = messages.hearingDiscovery(address, fleet: topics, version: options.version).topic
            publisher.forgetSticky([config])
            publisher.publish(GatewayMessages.clearing(config))
        }
    }

    private func received(_ message: FleetTopics.Received) {
        switch message {
        case .gatewayStatus(let room, let online): fleet { $0.gatewayStatus(room, online: online, now: $1) }
        case .holder(let address, let room): fleet { $0.reportedHolder(address, room, now: $1) }
        case .heard(let address, let room, let rssi): fleet { $0.reportedHeard(address, by: room, rssi: rssi, now: $1) }
        }
    }

    // MARK: The publisher's events (its thread)

    private func publisherEvent(_ event: MQTTEvent) {
        let broker = options.brokerDescription
        switch event {
        case .connected(let backlog):
            Diagnostics.say("connected to the MQTT broker at \(broker)" + (backlog > 0 ? "; sending \(backlog) queued message(s)" : ""))
            loop.execute { [self] in
                connections += 1
                fleet { $0.brokerConnected(now: $1) }
                perform(machine.brokerConnected())
            }
        case .lost(let reason, let queued):
            Diagnostics.say("lost the MQTT broker at \(broker) (\(reason)); queuing (\(queued) waiting) and reconnecting")
            loop.execute { [self] in fleet { $0.brokerLost(now: $1) } }
        case .dropped(let count):
            Diagnostics.error("the MQTT buffer was full while the broker was away: dropped the \(count) oldest message(s)")
            loop.execute { [self] in
                dropped += count
                perform(machine.dropped(count))
            }
        case .failed(let error):
            loop.execute { [self] in fail(error) }
        case .received(let message):
            if messages.isProbe(message) {
                loop.execute { [self] in
                    perform(machine.probeReturned())
                    fleet { $0.retainedSeen(now: $1) }
                }
                return
            }
            if let fleetMessage = fleetTopics?.parse(message) {
                loop.execute { [self] in received(fleetMessage) }
                return
            }
            // A retained command would be carried out again at every connect: commands are not retained.
            if !message.retain, let (address, field) = messages.command(message.topic) {
                let payload = Array(message.payload)
                loop.execute { [self] in command(address, field, payload) }
                return
            }
            guard let address = messages.retainedOnline(message) else { return }
            loop.execute { [self] in perform(machine.retainedOnline(address)) }
        }
    }
}

/// What the gateway asks of the central that follows the birds.
public protocol GatewayCentral: AnyObject {
    /// Writes `value` on the bird's link; false if there is no link to it.
    func write(_ address: BluetoothAddress, _ value: BirdValue) -> Bool
    /// `--fleet`: this gateway holds the bird now, and connects it.
    func grant(_ address: BluetoothAddress)
    /// `--fleet`: another gateway holds the bird now; its link is let go.
    func release(_ address: BluetoothAddress)
}

extension CentralDriver: GatewayCentral {}
