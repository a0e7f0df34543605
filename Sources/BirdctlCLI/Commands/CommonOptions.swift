import Bird

/// What the options every Bluetooth command shares say (a command that does
/// not declare one of them sees it absent).
struct CommonOptions {
    var adapter: String?
    var json: Bool
    var verbose: Bool
    var powerOn: Bool
    var minimumRSSI: Int?
    /// `--forget-after S`: how long a Bird may go unheard before it is forgotten.
    var forgetAfter: Duration
    var pairs: Bool
    var confirmPairing: Bool
    /// `--pair-with`: addresses, upper case.
    var pairsWith: Set<String>

    init(_ arguments: Arguments) throws(UsageError) {
        adapter = arguments.value(.adapter)
        if let adapter, !(adapter.hasPrefix("hci") && adapter.dropFirst(3).allSatisfy(\.isNumber) && adapter.count > 3) {
            throw UsageError("--adapter expects a name like hci0, got '\(adapter)'")
        }
        json = arguments.has(.json)
        verbose = arguments.has(.verbose)
        powerOn = arguments.has(.powerOn)
        minimumRSSI = try arguments.integer(.minimumRSSI, range: -127...20)
        forgetAfter = try arguments.seconds(.forgetAfter, default: ScanDriver.defaultForgetAfter, zeroMeansNone: false)
            ?? ScanDriver.defaultForgetAfter
        // Forgetting what was just heard would report a Bird again at every advertisement.
        if forgetAfter < .seconds(0.1) { throw UsageError("--forget-after expects at least 0.1 seconds") }
        pairs = !arguments.has(.noPair)
        confirmPairing = arguments.has(.confirmPairing)
        if confirmPairing && !pairs { throw UsageError("--confirm-pairing and --no-pair contradict each other") }
        pairsWith = []
        if let list = arguments.value(.pairWith) {
            if !pairs { throw UsageError("--pair-with and --no-pair contradict each other") }
            for address in list.split(separator: ",", omittingEmptySubsequences: false).map({ String($0).trimmingSpaces }) {
                guard Arguments.isAddress(address) else {
                    throw UsageError("--pair-with expects addresses like AA:BB:CC:DD:EE:FF, separated by commas; got '\(address)'")
                }
                pairsWith.insert(address.uppercased())
            }
        }
    }

    var adapterOptions: AdapterOptions {
        AdapterOptions(adapterName: adapter, powerOn: powerOn)
    }

    /// Runs one bird's machine whose only output is diagnostics (set, pair,
    /// unpair): events on stderr with --verbose, and those `always` picks
    /// anyway; the outcome becomes the exit status.
    func runQuietly(
        _ configuration: BirdCentral.Configuration,
        always: @escaping @Sendable (BirdCentral.Report) -> Bool = { _ in false }
    ) throws(UsageError) -> ExitStatus {
        let session: Session
        do { session = try Session(json: false, verbose: verbose) } catch { return error }
        let formatter = session.formatter
        let driver = try centralDriver(
            session, BirdFleet(configuration),
            onReport: { [verbose] report in
                if verbose || always(report), let text = formatter.eventText(report) { Diagnostics.say(text) }
            },
            onFinish: { outcome in session.finish(exitStatus(for: outcome)) })
        return session.run(onInterrupt: driver.stop, onStdoutClosed: driver.stop) { driver.start() }
    }

    /// The central's driver for a fleet, with the pairing prompt if asked for.
    func centralDriver(
        _ session: Session, _ fleet: BirdFleet, onReport: @escaping CentralDriver.ReportHandler,
        onFinish: @escaping CentralDriver.FinishHandler
    ) throws(UsageError) -> CentralDriver {
        let formatter = session.formatter
        let prompt = confirmPairing ? PairingPrompt(loop: session.connection.loop, label: formatter.label) : nil
        if confirmPairing && prompt == nil { throw UsageError("--confirm-pairing needs a terminal to ask on") }
        return CentralDriver(
            connection: session.connection, fleet: fleet, options: adapterOptions, person: prompt?.questions,
            onReport: onReport, onFinish: onFinish)
    }
}

/// Reports a finished command's failure on stderr and turns it into the exit status.
func exitStatus(for outcome: CommandOutcome) -> ExitStatus {
    if case .failed(let failure) = outcome, !failure.isBusLoss { Diagnostics.error(failure.message) }
    if outcome == .interrupted { Diagnostics.say("interrupted") }
    return ExitStatus(outcome)
}
