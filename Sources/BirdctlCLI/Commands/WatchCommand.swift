import Formats
import Bird
import Gateway
import Glibc
import Health

/// `birdctl watch`: stream one line per reading until stopped.
enum WatchCommand {
    static let command = Command(
        name: "watch", summary: "stream a Bird's readings (or every Bird's, with --all)",
        operands: Arguments.addressAndFieldsOperands,
        details: """
            Subscribes, reads the current values, and prints one line per reading,
            each tagged with the peripheral's address, until Ctrl-C, --count N
            readings, or --duration S. After a lost link it scans and reconnects
            (unless --no-reconnect); if bluetoothd restarts or the adapter is powered
            off, it waits and resumes. --json prints JSON Lines: readings and events
            (found, connected, ...).

            Notifications come through a socket bluetoothd hands over (AcquireNotify,
            past dbus-daemon) where it offers one; bluetoothd then gives that bird's
            notifications to this watch only, and another client's subscription fails
            with "Notify acquired". --notify-method start uses signals instead, which
            several clients (a second watch, a gateway, bluetoothctl) can share.

            MQTT: with --mqtt URL, every reading is also published to the broker
            (QoS 1): the value to PREFIX/ADDRESS/FIELD and the bird's JSON state to
            PREFIX/ADDRESS (both retained), events to PREFIX/ADDRESS/event,
            availability to PREFIX/status (online/offline, also the will) and
            PREFIX/ADDRESS/status, and Home Assistant discovery configs under
            homeassistant/ (unless --no-discovery). PREFIX defaults to
            birdctl/HOSTNAME. While the broker is away, messages wait in a buffer
            bounded in messages (--mqtt-buffer) and bytes (--mqtt-buffer-bytes) and
            go out in order after reconnecting; Bluetooth never waits for the
            network. Credentials come from --mqtt-credentials FILE or
            BIRDCTL_MQTT_USERNAME and BIRDCTL_MQTT_PASSWORD, never from the command
            line. At every connect the gateway marks offline the birds the broker
            holds online under PREFIX that it does not hold (a gateway killed left
            them); birdctl retire clears a gateway's topics. If the broker cannot be
            reached at start, refuses the connection or fails TLS verification,
            birdctl exits 11 at once; it also exits 11 if the broker has not taken
            every reading when birdctl ends (it waits while the broker makes
            progress).

            Several gateways: with --all --mqtt mqtt://BROKER/ROOT/ROOM --fleet, the
            gateways sharing ROOT agree through the broker that each bird is
            connected by the one that hears it best; a held bird moves only when
            another hears it --fleet-margin dB louder for --fleet-dwell seconds, or
            when its holder dies (docs/fleet.md).
            """,
        options: [
            .all, .forgetAfter, .hold, .poll, .policy, .pollInterval, .links, .quietAfter, .discoveryWatchdog, .count, .duration, .noReconnect,
            .notifyMethod,
            .watchTimeout, .connectTimeout,
            .minimumRSSI, .noPair, .pairWith, .confirmPairing, .pairTimeout, .adapters, .powerOn, .json, .verbose,
            .mqtt, .mqttCredentials, .mqttCA, .mqttCertificate, .mqttKey, .mqttBuffer, .mqttBufferBytes, .mqttWriteTTL, .noDiscovery, .fleet, .fleetMargin, .fleetDwell,
            .stateDirectory, .metrics,
        ] + ProxyService.options + [.quiet, .help],
        run: run)

    static func run(_ arguments: Arguments) throws(UsageError) -> ExitStatus {
        var common = try CommonOptions(arguments, pool: true)
        let (address, requested) = try arguments.addressAndFields()
        let all = arguments.has(.all)
        let proxy = try ProxyService.requested(in: arguments, all: all)
        common.hearsEveryDevice = proxy != nil
        if all && address != nil { throw UsageError("--all follows every Bird; it takes no ADDRESS") }
        if common.adapterPool && !all {
            throw UsageError("--adapter with several adapters (or all) goes with --all: one bird is watched through one adapter")
        }
        var configuration = common.configuration(
            .watch(reconnect: !arguments.has(.noReconnect)), fields: requested.isEmpty ? BirdField.allCases : requested,
            address: address)
        configuration.maximumReadings = arguments.integer(.count)
        configuration.duration = arguments.seconds(.duration)
        configuration.quietAfter = arguments.integer(.quietAfter)

        if !all, let given = [Option.forgetAfter, .hold, .poll, .policy, .pollInterval, .links, .discoveryWatchdog, .stateDirectory].first(where: { arguments.value($0) != nil }) {
            throw UsageError("\(given.name) goes with --all")
        }
        let state = try all ? Self.stateKeeper(arguments) : nil
        var links = LinkPolicy(
            hold: arguments.addresses(.hold), poll: arguments.addresses(.poll), otherBirds: arguments.choice(.policy),
            pollInterval: arguments.deadline(.pollInterval), links: arguments.integer(.links))
        if let both = links.hold.intersection(links.poll).first { throw UsageError("\(both) is both held and polled") }
        links.remembered = state?.state.limits ?? [:]
        links.rememberedBirds = state?.state.birds ?? [:]

        let gatewayOptions = try GatewayOptions(arguments, environment: Self.gatewayEnvironment())
        let gatewayConfiguration = gatewayOptions?.configuration
        if gatewayConfiguration?.fleet != nil && !all { throw UsageError("--fleet goes with --all (the gateways share every Bird)") }
        let quiet = arguments.has(.quiet)
        if quiet && gatewayOptions == nil && proxy == nil {
            throw UsageError("--quiet goes with --mqtt or --proxy (else nothing would be printed)")
        }
        for warning in gatewayOptions?.warnings ?? [] { Diagnostics.say("warning: " + warning) }

        let metrics = try MetricsService.requested(in: arguments, for: .watch)

        return try Session.run(json: common.json, verbose: common.verbose) { session throws(UsageError) in
            let formatter = session.formatter
            let stdout = session.stdout
            let gateway = gatewayConfiguration.map { MQTTGateway($0, loop: session.connection.loop) }
            let ending = WatchEnding(session: session, gateway: gateway, proxy: proxy)
            let driver = try common.centralDriver(
                session,
                BirdFleet(
                    configuration, all: all, forgetAfter: common.forgetAfter, links: links, seed: UInt64.random(in: .min ... .max),
                    shared: gatewayConfiguration?.fleet != nil, pooled: common.adapterPool,
                    discoveryWatchdog: arguments.seconds(.discoveryWatchdog)),
                onReport: { report in
                    // The command is ending: what comes now (a notification socket's
                    // last datagrams, calls failing) is neither printed nor published.
                    if session.busLost { return }
                    metrics?.record(report)
                    state?.record(report)
                    gateway?.handle(report)
                    if quiet { return }
                    switch report {
                    case .reading(let peripheral, let value, let raw, let notified):
                        stdout.line { formatter.appendReading(peripheral, value, raw: raw, notified: notified, to: &$0) }
                    case .badValue(let peripheral, let error):
                        if formatter.json {
                            stdout.line(formatter.badValueLine(peripheral, error))
                        } else {
                            Diagnostics.error(formatter.badValueText(peripheral, error))
                        }
                    default:
                        if let line = formatter.eventLine(report) {
                            stdout.line(line)
                        } else if let text = formatter.eventText(report) {
                            Diagnostics.say(text)
                        }
                    }
                },
                onFinish: { outcome in
                    state?.finish()
                    // After the bus went, calls fail for that reason alone: the session said so.
                    guard !session.busLost else { return }
                    ending.end(exitStatus(for: outcome))
                })
            if gateway != nil {
                // The readings received before the bus went still reach the broker.
                session.onBusLost = { ending.end(.busLost) }
            }
            gateway?.onFailure = driver.stop
            gateway?.central = driver
            let fleetGateway = gateway?.isShared == true ? gateway : nil
            if fleetGateway != nil || metrics != nil {
                driver.onHeard = { address, rssi in
                    fleetGateway?.heard(address, rssi: rssi)
                    metrics?.heard(address, rssi: rssi)
                }
            }
            state?.adapters = { [unowned driver] in driver.adapterHealth() }
            state?.start(on: session.connection.loop)
            if let metrics {
                metrics.adapters = { [unowned driver] in driver.adapterHealth() }
                if let gateway { metrics.gateway = { [unowned gateway] in gateway.health } }
                if let proxy { metrics.proxy = { [unowned proxy] in proxy.health } }
            }
            if let proxy {
                proxy.central = driver
                driver.onAdvertisement = { proxy.heard($0) }
            }
            return WatchDriver(central: driver, gateway: gateway, metrics: metrics, proxy: proxy, session: session)
        }
    }

    /// `--state-dir`, else systemd's `$STATE_DIRECTORY` (its first, when it
    /// names several): what an earlier run kept; nil if nothing is kept.
    static func stateKeeper(_ arguments: Arguments) throws(UsageError) -> StateKeeper? {
        let given = arguments.value(.stateDirectory)
        let fromSystemd = getenv("STATE_DIRECTORY").map { String(cString: $0).split(separator: ":").first.map(String.init) ?? "" }
        guard let directory = given ?? fromSystemd, !directory.isEmpty else { return nil }
        if let problem = StateKeeper.problem(with: directory) {
            throw UsageError((given != nil ? "--state-dir: " : "$STATE_DIRECTORY: ") + problem)
        }
        return StateKeeper(directory: directory) { Diagnostics.say("warning: " + $0) }
    }

    /// The credentials' variables, if set.
    static func gatewayEnvironment() -> [String: String] {
        var environment: [String: String] = [:]
        for name in [GatewayOptions.usernameVariable, GatewayOptions.passwordVariable] {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        return environment
    }
}

/// The central's driver and the gateway, started together; a stop is the
/// central's, whose end ends the gateway (`WatchEnding`).
private final class WatchDriver: SessionDriver {
    let central: CentralDriver
    let gateway: MQTTGateway?
    let metrics: MetricsService?
    let proxy: ProxyService?
    let session: Session

    init(central: CentralDriver, gateway: MQTTGateway?, metrics: MetricsService?, proxy: ProxyService?, session: Session) {
        (self.central, self.gateway, self.metrics, self.proxy, self.session) = (central, gateway, metrics, proxy, session)
    }

    func start() {
        guard MetricsService.start(metrics, in: session) else { return }
        guard ProxyService.start(proxy, in: session) else { return }
        central.start()
        gateway?.start()
    }

    func stop() { central.stop() }
}

/// The one way out of a watch, whichever comes first (the driver's end or
/// the bus's loss): the broker gets what the gateway holds, then the session ends.
private final class WatchEnding: @unchecked Sendable {
    private let session: Session
    private let gateway: MQTTGateway?
    private let proxy: ProxyService?
    private var started = false

    init(session: Session, gateway: MQTTGateway?, proxy: ProxyService?) {
        (self.session, self.gateway, self.proxy) = (session, gateway, proxy)
    }

    func end(_ status: ExitStatus) {
        guard !started else { return }
        started = true
        proxy?.stop()
        guard let gateway else { return session.finish(status) }
        gateway.end { [session] outcome in session.finish(ExitStatus(status, gateway: outcome)) }
    }
}
