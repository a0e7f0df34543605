import Bird
import BlueZ
import Gateway

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

    /// A watch's status once its gateway ended: a gateway that could not go
    /// on, or readings the broker never got, are a failure of the run (11),
    /// unless Bluetooth failed first (its code says more).
    init(_ status: ExitStatus, gateway: MQTTGateway.Outcome) {
        switch gateway {
        case .delivered: self = status
        case .failed: self = .mqttFailed
        case .undelivered: self = status == .success || status == .interrupted ? .mqttFailed : status
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
}
