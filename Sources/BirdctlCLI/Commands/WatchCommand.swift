import Bird

/// `birdctl watch`: stream one line per reading until stopped.
enum WatchCommand {
    static let command = Command(
        name: "watch", summary: "stream a Bird's readings (or every Bird's, with --all)",
        operands: "[ADDRESS] [name|color|alpha ...]",
        details: """
            Subscribes, reads the current values, and prints one line per reading,
            each tagged with the peripheral's address, until Ctrl-C, --count N
            readings, or --duration S. After a lost link it scans and reconnects
            (unless --no-reconnect); if bluetoothd restarts or the adapter is powered
            off, it waits and resumes. --json prints JSON Lines: readings and events
            (found, connected, ...).
            """,
        options: [
            .all, .count, .duration, .noReconnect,
            .timeout.explained("seconds to look for a Bird at first (default: no limit)"), .connectTimeout,
            .minimumRSSI, .noPair, .confirmPairing, .pairTimeout, .adapter, .powerOn, .json, .verbose, .help,
        ],
        run: run)

    static func run(_ arguments: Arguments) throws(UsageError) -> ExitStatus {
        let common = try CommonOptions(arguments)
        let (address, requested) = try arguments.addressAndFields()
        let all = arguments.has(.all)
        if all && address != nil { throw UsageError("--all follows every Bird; it takes no ADDRESS") }
        let configuration = BirdCentral.Configuration(
            mode: .watch(reconnect: !arguments.has(.noReconnect)),
            fields: requested.isEmpty ? BirdField.allCases : requested, address: address,
            minimumRSSI: common.minimumRSSI,
            scanTimeout: try arguments.seconds(.timeout, default: nil),
            connectTimeout: try arguments.connectTimeout(),
            maximumReadings: try arguments.integer(.count, range: 1...Int.max),
            duration: try arguments.seconds(.duration, default: nil), pairs: common.pairs,
            pairTimeout: try arguments.pairTimeout())

        let session: Session
        do { session = try Session(json: common.json, verbose: common.verbose) } catch { return error }
        let formatter = session.formatter
        let stdout = session.stdout
        let driver = try common.centralDriver(
            session, BirdFleet(configuration, all: all),
            onReport: { report in
                switch report {
                case .reading(let peripheral, let value, let raw, let notified):
                    stdout.line(formatter.reading(peripheral, value, raw: raw, notified: notified))
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
            onFinish: { outcome in session.finish(exitStatus(for: outcome)) })
        return session.run(onInterrupt: driver.stop, onStdoutClosed: driver.stop) { driver.start() }
    }
}
