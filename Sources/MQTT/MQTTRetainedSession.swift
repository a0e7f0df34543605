import Glibc
import Threads

/// A short session for a one-shot command (`birdctl retire`): reads every
/// message the broker retains under some filters, then publishes and
/// disconnects once the broker has acknowledged it all. Blocks its caller;
/// each step gives up after its deadline.
///
/// The end of the retained messages is known by a probe: a message the
/// session publishes (not retained) to a topic of its own after subscribing.
/// The broker handles one client's packets in order and delivers to it in
/// order, so every retained message of the subscriptions arrives before the
/// probe comes back.
public final class MQTTRetainedSession: @unchecked Sendable {
    private let publisher: MQTTPublisher
    private let probe: MQTTMessage
    private let state: Locked<State>

    private struct State {
        var retained: [String: MQTTMessage] = [:]
        var order: [String] = []
        var probeCameBack = false
        var failure: MQTTError?
        /// Opened when the step being waited for is over (or failed).
        var gate: ThreadGate?
    }

    /// `settings`' subscriptions are replaced by `filters` and the probe;
    /// `probeTopic` must be one no one else uses (a unique client id in it).
    public init(_ settings: MQTTSettings, filters: [String], probeTopic: String) throws(MQTTError) {
        var settings = settings
        settings.subscriptions = filters + [probeTopic]
        settings.will = nil
        let state = Locked(State())
        let probe = MQTTMessage(probeTopic, "probe \(getpid())", retain: false)
        self.state = state
        self.probe = probe
        publisher = try MQTTPublisher(settings) { event in
            state.withLock { state in
                switch event {
                case .received(let message) where message.topic == probe.topic:
                    guard message.payload == probe.payload else { return }
                    state.probeCameBack = true
                    state.gate?.open()
                case .received(let message):
                    guard message.retain else { return }
                    if state.retained.updateValue(message, forKey: message.topic) == nil { state.order.append(message.topic) }
                case .failed(let error):
                    state.failure = error
                    state.gate?.open()
                case .connected, .lost, .dropped:
                    break
                }
            }
        }
    }

    /// Connects, and returns the retained messages under the filters, in the
    /// order they came (a reconnect midway may bring them again: kept once).
    public func readRetained(deadline: Duration) throws(MQTTError) -> [MQTTMessage] {
        // Queued now, sent after the subscriptions (they go first at every connect).
        publisher.publish(probe)
        try wait(deadline, "answer", start: publisher.start) { state.withLock(\.probeCameBack) }
        return state.withLock { state in state.order.compactMap { state.retained[$0] } }
    }

    /// Publishes `messages` (in order) and disconnects once the broker has
    /// acknowledged them all.
    public func publishAndClose(_ messages: [MQTTMessage], deadline: Duration) throws(MQTTError) {
        for message in messages where !publisher.publish(message) {
            throw .invalidSettings("more messages than the MQTT buffer holds (\(messages.count))")
        }
        let closed = Locked(false)
        try wait(deadline, "acknowledge everything") { [publisher, state] in
            publisher.close(final: []) {
                closed.withLock { $0 = true }
                state.withLock { $0.gate?.open() }
            }
        } until: {
            closed.withLock { $0 }
        }
        let left = publisher.undelivered
        if left > 0 { throw .unreachable("the MQTT broker did not acknowledge \(left) message(s)") }
    }

    /// Runs `start`, then waits until `done` holds (checked whenever the gate
    /// opens), the publisher fails, or `deadline` passes.
    private func wait(
        _ deadline: Duration, _ what: String, start: () -> Void, until done: () -> Bool
    ) throws(MQTTError) {
        let gate = ThreadGate()
        state.withLock { $0.gate = gate }
        pthread_detach(startThread {
            let (seconds, attoseconds) = deadline.components
            var time = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            var left = timespec()
            while nanosleep(&time, &left) != 0 && errno == EINTR { time = left }
            gate.open()
        })
        start()
        gate.wait()
        if let failure = state.withLock(\.failure) { throw failure }
        if !done() { throw .unreachable("the MQTT broker did not \(what) within \(deadline)") }
    }
}
