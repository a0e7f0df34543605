import Bird

/// Options every Bluetooth command shares.
struct CommonOptions {
    static let valued: Set<String> = ["--adapter", "--timeout", "--min-rssi"]
    static let flags: Set<String> = ["--json", "--verbose", "--power-on", "--help"]

    var adapter: String?
    var json: Bool
    var verbose: Bool
    var powerOn: Bool
    var minimumRSSI: Int?

    init(_ arguments: Arguments) throws(UsageError) {
        adapter = arguments.values["--adapter"]
        if let adapter, !(adapter.hasPrefix("hci") && adapter.dropFirst(3).allSatisfy(\.isNumber) && adapter.count > 3) {
            throw UsageError("--adapter expects a name like hci0, got '\(adapter)'")
        }
        json = arguments.has("--json")
        verbose = arguments.has("--verbose")
        powerOn = arguments.has("--power-on")
        minimumRSSI = try arguments.integer("--min-rssi", range: -127...20)
    }

    var adapterOptions: AdapterOptions {
        AdapterOptions(adapterName: adapter, powerOn: powerOn)
    }
}

/// Reports a finished command's failure on stderr and turns it into the exit status.
func exitStatus(for outcome: CommandOutcome) -> ExitStatus {
    if case .failed(let failure) = outcome { Diagnostics.error(failure.message) }
    if outcome == .interrupted { Diagnostics.say("interrupted") }
    return ExitStatus(outcome)
}
