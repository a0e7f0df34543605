import Bird
import BlueZ

extension CommandFailure {
    /// What went wrong, for a person, with a hint where one helps.
    public var message: String {
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
public func explained(_ error: BlueZError) -> String {
    if error.isNotifyAcquiredByAnother {
        return "another client holds these notifications through AcquireNotify, and bluetoothd gives them "
            + "to it alone; to share them, watch with --notify-method start in every client"
    }
    return "\(error)"
}
