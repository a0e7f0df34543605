import Bird

/// What the options every Bluetooth command shares say (a command that does
/// not declare one of them sees it absent).
struct CommonOptions {
    var adapter: String?
    var json: Bool
    var verbose: Bool
    var powerOn: Bool
    var minimumRSSI: Int?

    init(_ arguments: Arguments) throws(UsageError) {
        adapter = arguments.value(.adapter)
        if let adapter, !(adapter.hasPrefix("hci") && adapter.dropFirst(3).allSatisfy(\.isNumber) && adapter.count > 3) {
            throw UsageError("--adapter expects a name like hci0, got '\(adapter)'")
        }
        json = arguments.has(.json)
        verbose = arguments.has(.verbose)
        powerOn = arguments.has(.powerOn)
        minimumRSSI = try arguments.integer(.minimumRSSI, range: -127...20)
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
