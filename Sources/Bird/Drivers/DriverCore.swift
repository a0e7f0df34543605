import BlueZ
import DBus

/// What the three drivers (`CentralDriver`, `ScanDriver`, `BirdPeripheral`)
/// do alike: a BlueZ client on the connection's loop, the adapter chosen by
/// the same rules, the chosen adapter's power changes, and a way out that
/// waits (briefly) for the cleanup calls in flight. Loop-confined.
final class DriverCore: @unchecked Sendable {
    let connection: Connection
    let options: AdapterOptions
    private(set) var client: BlueZClient!
    /// The adapter in use; nil before BlueZ's tree is loaded or when there is none.
    var adapter: AdapterChoice?
    private(set) var isFinished = false
    private var cleanupInFlight = 0
    private var delivery: Once?
    /// Run as the driver finishes, before the wait for cleanups.
    private var finishing: [() -> Void] = []

    /// How long the way out waits for cleanup replies (StopNotify, Disconnect,
    /// StopDiscovery, Unregister…). bluetoothd holds every Disconnect for 2 s
    /// (DISCONNECT_TIMER, for profiles to let go) and replies once the link is
    /// down: waiting for that reply means the next command finds the bird
    /// disconnected, not a link about to drop under it. An unresponsive
    /// bluetoothd is never waited for longer.
    static let exitWait = Duration.seconds(3)

    /// What the client loads of BlueZ's objects (`BlueZClient.Scope`).
    private let scope: BlueZClient.Scope

    init(connection: Connection, options: AdapterOptions, scope: BlueZClient.Scope) {
        self.connection = connection
        self.options = options
        self.scope = scope
    }

    /// `focus`: the one device a command is about (`.device`), else every object.
    convenience init(connection: Connection, options: AdapterOptions, focus: String? = nil) {
        self.init(connection: connection, options: options, scope: focus.map { .device(address: $0) } ?? .everything)
    }

    /// On the loop: makes the client (`prepare` sets up what uses it), then starts it.
    func start(prepare: @escaping @Sendable (BlueZClient) -> Void = { _ in }, onEvent: @escaping @Sendable (BlueZEvent) -> Void) {
        connection.loop.execute { [self] in
            client = BlueZClient(connection: connection, scope: scope, onEvent: onEvent)
            prepare(client)
            client.start()
        }
    }

    /// The chosen adapter, updated, when `event` is a change of its power.
    func powerChange(_ event: BlueZEvent) -> AdapterChoice? {
        connection.loop.assertInLoop()
        guard case .adapterChanged(let changed, let names) = event, changed.path == adapter?.path,
            names.contains(.powered)
        else { return nil }
        adapter = AdapterChoice(changed)
        return adapter
    }

    /// Chooses the adapter (see `AdapterStep.select`) and remembers it.
    func selectAdapter(onFailure: @escaping @Sendable (CommandFailure) -> Void) -> AdapterStep {
        let step = AdapterStep.select(client, options, onFailure: onFailure)
        switch step {
        case .missing: adapter = nil
        case .off(let choice), .poweringOn(let choice), .ready(let choice): adapter = choice
        }
        return step
    }

    /// For scan and serve, which do not wait for an adapter: the chosen one if
    /// it can be used now; `fail` hears why not (nothing while it is being
    /// powered on: the caller goes on when Powered changes).
    func usableAdapter(fail: @escaping @Sendable (CommandFailure) -> Void) -> AdapterChoice? {
        switch selectAdapter(onFailure: fail) {
        case .missing:
            fail(.noAdapter(options.adapterName))
            return nil
        case .off(let choice):
            fail(.adapterOff(choice.name))
            return nil
        case .poweringOn: return nil
        case .ready(let choice): return choice
        }
    }

    /// A cleanup call (StopNotify, Disconnect, StopDiscovery, Unregister…):
    /// the way out waits for its `done`.
    func cleanup(_ body: (@escaping @Sendable () -> Void) -> Void) {
        connection.loop.assertInLoop()
        cleanupInFlight += 1
        body { [self] in
            connection.loop.execute { [self] in
                cleanupInFlight -= 1
                if cleanupInFlight == 0 { delivery?.run() }
            }
        }
    }

    /// Something to undo on the way out (it may start cleanups).
    func onFinish(_ body: @escaping () -> Void) { finishing.append(body) }

    /// Ends the driver once: `deliver` runs when the cleanup calls in flight
    /// are answered, or after `exitWait`.
    func finish(_ deliver: @escaping () -> Void) {
        connection.loop.assertInLoop()
        guard !isFinished else { return }
        isFinished = true
        for body in finishing { body() }
        finishing.removeAll()
        let delivery = Once(deliver)
        self.delivery = delivery
        if cleanupInFlight == 0 {
            delivery.run()
        } else {
            connection.loop.schedule(after: Self.exitWait) { delivery.run() }
        }
    }
}
