import Formats
import Bird
import DBus
import Glibc

/// What every command shares: the system-bus connection and its loop,
/// buffered stdout, SIGINT/SIGTERM, `--verbose` tracing, the loss of the
/// bus, and the exit status.
final class Session: @unchecked Sendable {
    let connection: Connection
    let stdout = LineWriter(fd: 1)
    let formatter: ReportFormatter
    private var status = ExitStatus.internalError
    private var finished = false
    private var stdoutClosed = false
    /// The system bus went away: whatever ends the command, it ends with 12.
    private(set) var busLost = false
    /// Run on the loop when the system bus goes away, instead of ending the
    /// command at once: what needs no bus is done, then `finish` (whose
    /// status becomes 12). The MQTT gateway hands the broker what it holds.
    var onBusLost: (@Sendable () -> Void)?

    /// Opens the system bus; a failure is reported and becomes exit code 3.
    init(json: Bool, verbose: Bool) throws(ExitStatus) {
        do {
            connection = try Connection.system(startingLoop: false)
        } catch {
            let address = Connection.systemBusAddress ?? "the default socket"
            Diagnostics.error("cannot connect to the system bus at \(address): \(error.message)")
            throw .bluetoothUnavailable
        }
        formatter = ReportFormatter(json: json, color: !json && isatty(1) == 1 && getenv("NO_COLOR") == nil)
        if verbose { connection.tracer = Session.trace }
    }

    /// Sets up signal handling and output flushing on the loop, then runs
    /// `body` there; the loop runs on this thread until `finish`.
    func run(onInterrupt: @escaping @Sendable () -> Void, onStdoutClosed: @escaping @Sendable () -> Void,
             _ body: @escaping @Sendable () -> Void) -> ExitStatus {
        connection.loop.execute { [self] in
            connection.loop.addBeforePollHook { [stdout] in stdout.flush() }
            connection.loop.watchSignals([SIGINT, SIGTERM]) { _ in onInterrupt() }
            stdout.onClosed = { [self] in
                // `watch | head -1`: the reader has what it wanted; clean up quietly.
                stdoutClosed = true
                onStdoutClosed()
            }
            connection.onLoss { [self] _ in busWentAway() }
            FreedMemory.returnPeriodically(on: connection.loop)
            body()
        }
        connection.loop.runOnCurrentThread()
        return status
    }

    /// Ends the command (on the loop): flushes what is buffered and ends the loop, so `run` returns.
    func finish(_ status: ExitStatus) {
        guard !finished else { return }
        finished = true
        stdout.flush()
        self.status = stdoutClosed ? .success : busLost ? .busLost : status
        connection.loop.stop()
    }

    /// Nothing more can be asked of bluetoothd, and nothing undone (StopNotify,
    /// Disconnect, StopDiscovery, unregistering all need the bus): no driver is
    /// waited for. libdbus has stopped watching the socket, so without this the
    /// loop would sleep for ever and a service would never be restarted.
    private func busWentAway() {
        guard !finished else { return }
        busLost = true
        Diagnostics.error("the system bus went away (dbus-daemon stopped or restarted); birdctl cannot go on without it")
        guard let onBusLost else { return finish(.busLost) }
        onBusLost()
    }

    private static let trace: @Sendable (Bool, Message) -> Void = { outgoing, message in
        var text = (outgoing ? "→ " : "← ") + message.description
        if let arguments = try? message.arguments(), !arguments.isEmpty {
            arguments.forEach { $0.closeDescriptors() }  // the trace's own copies (AcquireNotify's socket)
            let rendered = arguments.map { "\($0)" }.joined(separator: ", ")
            text += " " + (rendered.count > 400 ? String(rendered.prefix(400)) + "…" : rendered)
        }
        Diagnostics.say(text)
    }
}

/// What a command's session runs: started on the loop, stopped by SIGINT,
/// SIGTERM or a closed stdout; it ends the command with `Session.finish`.
protocol SessionDriver: AnyObject, Sendable {
    func start()
    func stop()
}

extension CentralDriver: SessionDriver {}
extension ScanDriver: SessionDriver {}
extension BirdPeripheral: SessionDriver {}

extension Session {
    /// The one way a Bluetooth command runs: opens the system bus (a failure
    /// is the exit status), builds the driver on the session, then runs the
    /// loop on this thread, `start` first (the driver's own by default),
    /// until the command finishes.
    static func run<Driver: SessionDriver>(
        json: Bool, verbose: Bool, _ makeDriver: (Session) throws(UsageError) -> Driver,
        start: @escaping @Sendable (Session, Driver) -> Void = { $1.start() }
    ) throws(UsageError) -> ExitStatus {
        let session: Session
        do { session = try Session(json: json, verbose: verbose) } catch { return error }
        let driver = try makeDriver(session)
        return session.run(onInterrupt: driver.stop, onStdoutClosed: driver.stop) { start(session, driver) }
    }
}
