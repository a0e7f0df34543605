import Formats
import Bird
import Health
import Loop

/// The health page of a long-running command (watch, scan, serve): what
/// its driver, the gateway and the process say, served at /metrics on the
/// loop. A section a command has not is left off. Loop-confined.
final class MetricsService: @unchecked Sendable {
    /// The command whose page it is: what sections the page has.
    enum Command { case watch, scan, serve }

    private let endpoint: ListenEndpoint
    private let command: Command
    /// The birds a watch follows.
    private var birds = BirdHealth()
    /// What serve's centrals did.
    private var peripheral = PeripheralHealth()
    private var server: HTTPTextServer?
    /// What the page shows of the adapters (watch, scan) and of the gateway, asked at each scrape.
    var adapters: () -> [AdapterHealth] = { [] }
    var gateway: (() -> GatewayHealth)?
    /// The proxy's section, once it runs (`watch --all --proxy`).
    var proxy: () -> ProxyHealth? = { nil }

    init(_ endpoint: ListenEndpoint, for command: Command) { (self.endpoint, self.command) = (endpoint, command) }

    /// The service `--metrics` asks for, if given (a bad endpoint is a usage error).
    static func requested(in arguments: Arguments, for command: Command) throws(UsageError) -> MetricsService? {
        guard let text = arguments.value(.metrics) else { return nil }
        return MetricsService(try ListenEndpoint(text, option: "--metrics"), for: command)
    }

    /// Listens (on the loop); a failure says why and is the command's end.
    func start(on loop: EventLoop) -> Bool {
        do {
            let server = try HTTPTextServer(
                loop: loop, host: endpoint.host, port: endpoint.port, path: "/metrics", contentType: HealthPage.contentType
            ) { [unowned self] in page() }
            self.server = server
            var shown = endpoint
            shown.port = server.port
            Diagnostics.say("serving metrics at \(shown)/metrics")
            return true
        } catch {
            Diagnostics.error("cannot serve metrics at \(endpoint): \(error)")
            return false
        }
    }

    func record(_ report: BirdCentral.Report) { birds.record(report, at: .now) }

    func heard(_ address: BluetoothAddress, rssi: Int16) { birds.heard(address, rssi: rssi) }

    func record(_ event: BirdPeripheral.Event) { peripheral.record(event) }

    /// Listens unless `metrics` is nil; false (said) if it cannot: the session ends with a usage error.
    static func start(_ metrics: MetricsService?, in session: Session) -> Bool {
        guard let metrics else { return true }
        guard metrics.start(on: session.connection.loop) else {
            session.finish(.usage)
            return false
        }
        return true
    }

    private func page() -> String {
        HealthPage.render(
            adapters: command == .serve ? nil : adapters(), birds: command == .watch ? birds : nil, gateway: gateway?(),
            proxy: proxy(), peripheral: command == .serve ? peripheral : nil, process: .current(), now: .now)
    }
}
