import Bird
import BlueZ

/// birdctl's exit codes, one per failure class; `meaning` says each (for
/// `--help` and the man page; docs/guide.md's table is checked against it).
enum ExitStatus: Int32, Error, CaseIterable {
    case success = 0
    case internalError = 1
    case usage = 2
    case bluetoothUnavailable = 3
    case adapterOff = 4
    case permissionDenied = 5
    case notFound = 6
    case connectionFailed = 7
    case badValue = 8
    case operationFailed = 9
    case pairingFailed = 10
    case mqttFailed = 11
    case busLost = 12
    case interrupted = 130

    /// What the code means, for `--help` and the man page.
    var meaning: String {
        switch self {
        case .success: "success"
        case .internalError: "internal error (a bug)"
        case .usage: "usage error"
        case .bluetoothUnavailable: "Bluetooth unavailable: no system bus, bluetoothd not running, no (such) adapter"
        case .adapterOff: "adapter powered off (--power-on powers it)"
        case .permissionDenied: "permission denied by the D-Bus policy"
        case .notFound: "no Bird found before --timeout"
        case .connectionFailed: "connection failed, timed out, or lost"
        case .badValue: "bad value (read)"
        case .operationFailed: "another BlueZ operation failed (read, subscribe, discovery, registration)"
        case .pairingFailed: "pairing refused, failed or timed out, or needed under --no-pair"
        case .mqttFailed:
            "MQTT broker unreachable at start, connection or credentials refused, TLS verification failed, or readings left undelivered at exit"
        case .busLost:
            "the system bus went away (dbus-daemon stopped or restarted): any command ends at once, without the cleanups that need the bus"
        case .interrupted: "interrupted (SIGINT/SIGTERM) before a read or scan finished"
        }
    }

    init(_ outcome: CommandOutcome) {
        switch outcome {
        case .success: self = .success
        case .badValue: self = .badValue
        case .interrupted: self = .interrupted
        case .failed(let failure): self.init(failure)
        }
    }

    init(_ failure: CommandFailure) {
        if failure.isBusLoss {
            self = .busLost
            return
        }
        switch failure {
        case .bluetoothUnavailable, .noAdapter: self = .bluetoothUnavailable
        case .adapterOff: self = .adapterOff
        case .permissionDenied: self = .permissionDenied
        case .notFound: self = .notFound
        case .connectTimeout, .connectTimeoutWithLinksUp, .connectFailed, .connectionLost: self = .connectionFailed
        case .serviceMissing: self = .operationFailed
        case .pairingRequired, .pairingFailed, .pairingNotNamed: self = .pairingFailed
        case .operationFailed(_, let error):
            switch error.kind {
            case .bluetoothdNotRunning, .busDisconnected: self = .bluetoothUnavailable
            case .notConnected: self = .connectionFailed
            default: self = .operationFailed
            }
        }
    }
}

extension CommandFailure {
    /// A call failed only because the system bus went away: the session has
    /// said so (the connection reports its loss before failing its calls),
    /// and the exit status is 12.
    var isBusLoss: Bool {
        switch self {
        case .bluetoothUnavailable(let error), .permissionDenied(let error), .connectFailed(let error),
            .pairingRequired(let error), .pairingFailed(let error), .pairingNotNamed(_, let error),
            .operationFailed(_, let error):
            error.kind == .busDisconnected
        case .noAdapter, .adapterOff, .notFound, .connectTimeout, .connectTimeoutWithLinksUp, .connectionLost,
            .serviceMissing:
            false
        }
    }

    /// What went wrong, for a person, with a hint where one helps.
    var message: String {
        switch self {
        case .bluetoothUnavailable(let error):
            switch error.kind {
            case .busDisconnected: "cannot reach the system bus: \(error.message)"
            case .timeout: "bluetoothd did not answer in time (\(error.message))"
            default: "bluetoothd is not running (no \(BlueZClient.busName) on the system bus); start it with 'systemctl start bluetooth'"
            }
        case .noAdapter(let name):
            if let name { "no Bluetooth adapter named \(name)" } else { "no Bluetooth adapter found" }
        case .adapterOff(let name): "adapter \(name) is powered off; power it on or pass --power-on"
        case .permissionDenied(let error):
            "permission denied by the system bus policy (\(error.message)); run as root or join the 'bluetooth' group"
        case .notFound: "no Bird found before the timeout"
        case .connectTimeout: "could not connect before the connect deadline"
        case .connectTimeoutWithLinksUp(let adapter, let links):
            "could not connect before the connect deadline while \(adapter) holds \(links) other link\(links == 1 ? "" : "s"): its controller may take no more"
        case .connectFailed(let error): "connection failed: \(error)"
        case .connectionLost: "the connection was lost"
        case .serviceMissing(let fields):
            "the peripheral does not offer \(fields.map(\.rawValue).joined(separator: ", "))"
        case .operationFailed(let what, let error) where error.kind == .timeout:
            // Seen on bluetoothd 5.66: a bird that wants an encrypted link refuses the
            // read, the kernel pairs by itself and bluetoothd asks the system's default
            // agent; with none (a headless machine) the read is never answered.
            "could not \(what): \(explained(error)); a bird that needs pairing can cause this where no "
                + "pairing agent runs: pair it first with 'birdctl pair ADDRESS'"
        case .operationFailed(let what, let error): "could not \(what): \(explained(error))"
        case .pairingRequired(let error):
            "the bird requires pairing (\(error)); run 'birdctl pair ADDRESS', or leave out --no-pair"
        case .pairingNotNamed(let peripheral, let error):
            "\(peripheral.address) asks for pairing (\(error)), and birdctl bonds only with birds it is told to: "
                + "pair it once with 'birdctl pair \(peripheral.address)', name it on the command line, or add it to --pair-with"
        case .pairingFailed(let error):
            switch error.kind {
            case .timeout: "pairing did not finish in time (\(error))"
            default: "pairing failed: \(error)"
            }
        }
    }
}

/// A BlueZ error, with what a person can do about it where birdctl knows.
func explained(_ error: BlueZError) -> String {
    if error.isNotifyAcquiredByAnother {
        return "another client holds these notifications through AcquireNotify, and bluetoothd gives them "
            + "to it alone; to share them, watch with --notify-method start in every client"
    }
    return "\(error)"
}
