import BlueZ
import DBus

/// `birdctl serve`: a Bird peripheral published through BlueZ on one adapter.
/// Values are validated with the same codec as the central's; writes from
/// centrals that do not decode are refused and change nothing.
/// Loop-confined; `start`, `set` and `stop` may be called from anywhere.
public final class BirdPeripheral: @unchecked Sendable {
    public typealias EventHandler = @Sendable (Event) -> Void
    public typealias FinishHandler = @Sendable (CommandOutcome) -> Void

    public enum Event: Sendable {
        /// Registered and advertising on this adapter.
        case advertising(adapter: String)
        /// bluetoothd went: nothing is advertised or served until it is back
        /// (then registered again, and `advertising` said).
        case stoppedAdvertising
        /// A value changed (set here, or written by a central).
        case valueChanged(BirdValue, byCentral: Bool)
        case refusedWrite(BirdValueError)
        case subscription(BirdField, subscribed: Bool)
    }

    private let core: DriverCore
    private let onEvent: EventHandler
    private let onFinish: FinishHandler
    private var application: GattApplication!
    private var registered = false

    private var client: BlueZClient { core.client }

    public init(
        connection: Connection, name: BirdValue, color: BirdValue, alpha: BirdValue,
        options: AdapterOptions, onEvent: @escaping EventHandler, onFinish: @escaping FinishHandler
    ) {
        core = DriverCore(connection: connection, options: options)
        self.onEvent = onEvent
        self.onFinish = onFinish
        application = Self.application(connection: connection, name: name, color: color, alpha: alpha, onEvent: onEvent)
    }

    /// The objects `serve` exports: the Bird service with the three values,
    /// writes from centrals validated by the codec (the fuzz target builds
    /// the same, in fuzz/).
    public static func application(
        connection: Connection, name: BirdValue, color: BirdValue, alpha: BirdValue, onEvent: @escaping EventHandler
    ) -> GattApplication {
        let initial = [name, color, alpha]
        return GattApplication(
            connection: connection, serviceUUID: BirdService.uuid, localName: name.text,
            characteristics: initial.map { .init(uuid: $0.field.uuid, value: BirdCodec.encode($0)) },
            onWrite: { uuid, bytes throws(BlueZError) in
                guard let field = BirdField(uuid: uuid) else { throw BlueZError(.notSupported) }
                switch BirdCodec.decode(field, bytes) {
                case .success(let value):
                    onEvent(.valueChanged(value, byCentral: true))
                case .failure(let error):
                    onEvent(.refusedWrite(error))
                    throw BlueZError(.failed, message: error.description)
                }
            },
            onSubscription: { uuid, on in
                guard let field = BirdField(uuid: uuid) else { return }
                onEvent(.subscription(field, subscribed: on))
            })
    }

    public func start() {
        core.start(prepare: { [self] _ in application.export() }) { [self] event in handle(event) }
    }

    /// Changes a value; subscribed centrals are notified.
    public func set(_ value: BirdValue) {
        core.connection.loop.execute { [self] in
            application.update(value.field.uuid, BirdCodec.encode(value))
            onEvent(.valueChanged(value, byCentral: false))
        }
    }

    /// SIGINT/SIGTERM: unregister the advertisement and the application.
    public func stop() {
        core.connection.loop.execute { [self] in
            if registered, let adapter = core.adapter {
                registered = false
                let requests = BlueZRequest.unregister(application, adapter: adapter.path)
                core.cleanup { done in perform(requests) { _ in done() } }
            }
            finish(.success)
        }
    }

    private func handle(_ event: BlueZEvent) {
        core.connection.loop.assertInLoop()
        guard !core.isFinished else { return }
        if let adapter = core.powerChange(event) {
            if adapter.powered, !registered { register() }
            return
        }
        switch event {
        case .ready:
            guard !registered else { return }
            register()
        case .unavailable(let error):
            if registered {
                // bluetoothd restarted: register again when it is back.
                registered = false
                application.subscriptionsEnded()
                onEvent(.stoppedAdvertising)
            } else if core.adapter == nil {
                finish(.failed(.unavailable(error)))
            }
        default:
            break
        }
    }

    private func register() {
        guard let choice = core.usableAdapter(fail: { [self] failure in finish(.failed(failure)) }) else { return }
        perform(BlueZRequest.register(application, adapter: choice.path)) { [self] error in
            if let error {
                let what = error.kind == .failed || error.kind == .notSupported ? "advertise on \(choice.name)" : "register the Bird service"
                return finish(.failed(.failed(what, error)))
            }
            registered = true
            onEvent(.advertising(adapter: choice.name))
        }
    }

    /// Performs requests one after the other; `done` gets the first error.
    private func perform(_ requests: [BlueZRequest<Void>], done: @escaping @Sendable (BlueZError?) -> Void) {
        guard let first = requests.first else { return done(nil) }
        client.perform(first) { [self] result in
            if case .failure(let error) = result { return done(error) }
            perform(Array(requests.dropFirst()), done: done)
        }
    }

    private func finish(_ outcome: CommandOutcome) {
        core.connection.loop.assertInLoop()
        core.finish { [onFinish] in onFinish(outcome) }
    }
}
