import Formats
import Bird

/// `birdctl scan`: list Bird peripherals as they are heard.
enum ScanCommand {
    static let command = Command(
        name: "scan", summary: "list Bird peripherals in range", operands: "",
        details: """
            Lists Bird peripherals as they are found: address, smoothed RSSI, name.
            At the end (--timeout) a terminal also gets the list sorted by signal
            strength, and --json a "done" line with it. A Bird unheard for
            --forget-after seconds is forgotten: it leaves the list, and if it is
            heard again it is printed again as found. With several adapters
            (--adapter hci0,hci1 or all) each listens, and a Bird heard by several
            is one entry (its RSSI samples from all of them smoothed together).
            Exits 0 if a Bird was found, 6 if none was.
            """,
        options: [
            .scanTimeout, .minimumRSSI, .forgetAfter, .adapters,
            .powerOn, .metrics, .json, .verbose, .help,
        ],
        run: run)

    static func run(_ arguments: Arguments) throws(UsageError) -> ExitStatus {
        let common = try CommonOptions(arguments, pool: true)
        guard arguments.positionals.isEmpty else { throw UsageError("scan takes no arguments") }
        let metrics = try MetricsService.requested(in: arguments, for: .scan)

        return try Session.run(json: common.json, verbose: common.verbose) { session in
            let formatter = session.formatter
            let toTerminal = formatter.color
            return ScanDriver(
                connection: session.connection, options: common.adapterOptions, minimumRSSI: common.minimumRSSI,
                timeout: arguments.seconds(.timeout), forgetAfter: common.forgetAfter,
                onFound: { result in session.stdout.line(line(for: result, formatter)) },
                onFinish: { outcome, results in
                    if formatter.json {
                        var done = formatter.event("done", nil)
                        done.add("birds", .array(results.map(object(for:))))
                        session.stdout.line(done.rendered)
                    } else if toTerminal, results.count > 1 {
                        session.stdout.line(formatter.dim("\(results.count) birds, strongest first:"))
                        for result in results { session.stdout.line(line(for: result, formatter)) }
                    }
                    session.finish(exitStatus(for: outcome))
                })
        } start: { session, driver in
            metrics?.adapters = { [unowned driver] in driver.adapterHealth() }
            guard MetricsService.start(metrics, in: session) else { return }
            driver.start()
        }
    }

    static func line(for result: ScanResult, _ formatter: ReportFormatter) -> String {
        if formatter.json {
            var found = formatter.event("found", nil)
            found.add("address", result.address)
            found.add("name", ifPresent: result.name)
            if let rssi = result.rssi { found.add("rssi", .integer(rssi)) }
            return found.rendered
        }
        let rssi = result.rssi.map { "\($0) dBm" } ?? "? dBm"
        return "\(result.address)  \(formatter.pad(rssi, 8))  \(formatter.bold(SafeText.escaped(result.name ?? "")))"
    }

    static func object(for result: ScanResult) -> JSONObject {
        var object = JSONObject()
        object.add("address", result.address)
        object.add("name", ifPresent: result.name)
        if let rssi = result.rssi { object.add("rssi", .integer(rssi)) }
        return object
    }
}
