import BlueZ

/// How a command (read, watch, set, scan, serve) ended.
public enum CommandOutcome: Hashable, Sendable {
    /// Every requested field decoded (read), or the stream ended as asked.
    case success
    /// Read: at least one field did not decode.
    case badValue
    /// Stopped by SIGINT/SIGTERM before the work was done.
    case interrupted
    /// Boxed: the fleet checks its outcome on every notification, and a
    /// failure inline made each check copy (and destroy) a large value.
    indirect case failed(CommandFailure)
}

public enum CommandFailure: Hashable, Sendable {
    case bluetoothUnavailable(BlueZError)
    case noAdapter(String?)
    case adapterOff(String)
    case permissionDenied(BlueZError)
    case notFound
    case connectTimeout
    /// The connect deadline passed while the adapter already held `links`
    /// links: perhaps all its controller can hold. Linux does not pass a
    /// controller's "Connection Limit Exceeded" on to BlueZ, so this is the
    /// most a client can say.
    case connectTimeoutWithLinksUp(adapter: String, links: Int)
    case connectFailed(BlueZError)
    case connectionLost
    case serviceMissing([BirdField])
    /// The peripheral needs pairing and the command was told not to (`--no-pair`).
    case pairingRequired(BlueZError)
    /// Pairing was refused, failed or timed out (or the link was still refused after it).
    case pairingFailed(BlueZError)
    /// The bird asks for pairing but is not one the user named (nor bonded):
    /// birdctl does not bond with strangers.
    case pairingNotNamed(BirdCentral.Peripheral, BlueZError)
    case operationFailed(String, BlueZError)

    /// `what` failed with `error`; a refusal by the bus policy is always
    /// "permission denied", whatever was being done.
    public static func failed(_ what: String, _ error: BlueZError) -> CommandFailure {
        error.kind == .permissionDenied ? .permissionDenied(error) : .operationFailed(what, error)
    }

    /// bluetoothd is not usable (or we may not talk to it).
    public static func unavailable(_ error: BlueZError) -> CommandFailure {
        error.kind == .permissionDenied ? .permissionDenied(error) : .bluetoothUnavailable(error)
    }
}
