import Formats
import Bird

/// What the options every Bluetooth command shares say (a command that does
/// not declare one of them sees its default).
struct CommonOptions {
    let arguments: Arguments
    var adapter: String?
    var json: Bool
    var verbose: Bool
    var powerOn: Bool
    var minimumRSSI: Int?
    /// `--forget-after S`: how long a Bird may go unheard before it is forgotten.
    var forgetAfter: Duration
    var pairs: Bool
    var confirmPairing: Bool
    /// `--pair-with`: addresses.
    var pairsWith: Set<BluetoothAddress>

    /// `pool`: the command takes several adapters as one pool (`watch --all`, `scan`).
    init(_ arguments: Arguments, pool: Bool = false) throws(UsageError) {
        self.arguments = arguments
        adapter = arguments.value(.adapter)
        if !pool, let adapter, adapter == Option.allAdapters || adapter.contains(",") {
            throw UsageError("--adapter takes one adapter here, got '\(adapter)' (several only with watch --all and scan)")
        }
        json = arguments.has(.json)
        verbose = arguments.has(.verbose)
        powerOn = arguments.has(.powerOn)
        minimumRSSI = arguments.integer(.minimumRSSI)
        forgetAfter = arguments.deadline(.forgetAfter)
        pairs = !arguments.has(.noPair)
        confirmPairing = arguments.has(.confirmPairing)
        if confirmPairing && !pairs { throw UsageError("--confirm-pairing and --no-pair contradict each other") }
        if arguments.value(.pairWith) != nil && !pairs { throw UsageError("--pair-with and --no-pair contradict each other") }
        pairsWith = arguments.addresses(.pairWith)
    }

    /// `--adapter hci0,hci1` or `--adapter all` (where the command allows several).
    var adapterPool: Bool { adapter.map { $0 == Option.allAdapters || $0.contains(",") } ?? false }

    /// Discovery hears every device, not only Birds (a proxy passes them on).
    var hearsEveryDevice = false

    var adapterOptions: AdapterOptions {
        var options: AdapterOptions
        if let adapter, adapterPool {
            let names = adapter == Option.allAdapters ? nil : adapter.split(separator: ",").map(String.init)
            options = AdapterOptions(pool: names, powerOn: powerOn)
        } else {
            options = AdapterOptions(adapterName: adapter, powerOn: powerOn)
        }
        options.hearsEveryDevice = hearsEveryDevice
        return options
    }

    /// One bird's machine as the options configure it; what no option of the
    /// command says is the Bird layer's default.
    func configuration(_ mode: BirdCentral.Configuration.Mode, fields: [BirdField], address: BluetoothAddress?) -> BirdCentral.Configuration {
        BirdCentral.Configuration(
            mode: mode, fields: fields, address: address, minimumRSSI: minimumRSSI,
            scanTimeout: arguments.seconds(.timeout), connectTimeout: arguments.deadline(.connectTimeout),
            pairs: pairs, pairTimeout: arguments.deadline(.pairTimeout), pairsWith: pairsWith,
            notifyMethod: arguments.choice(.notifyMethod))
    }

    /// Runs one bird's machine whose only output is diagnostics (set, pair,
    /// unpair): events on stderr with --verbose, and those `always` picks
    /// anyway; the outcome becomes the exit status.
    func runQuietly(
        _ configuration: BirdCentral.Configuration,
        always: @escaping @Sendable (BirdCentral.Report) -> Bool = { _ in false }
    ) throws(UsageError) -> ExitStatus {
        try Session.run(json: false, verbose: verbose) { session throws(UsageError) in
            let formatter = session.formatter
            return try centralDriver(
                session, BirdFleet(configuration),
                onReport: { [verbose] report in
                    if verbose || always(report), let text = formatter.eventText(report) { Diagnostics.say(text) }
                },
                onFinish: { outcome in session.finish(exitStatus(for: outcome)) })
        }
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
