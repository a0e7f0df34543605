/// Why the gateway cannot go on. Each is final: retrying would not help
/// (or, for `unreachable`, the broker was never there to begin with).
public enum MQTTError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The first connection failed: no route, connection refused, no such host.
    case unreachable(String)
    /// The broker answered CONNACK with a refusal (bad credentials, not authorised, ...).
    case refused(String)
    /// The TLS handshake failed: an untrusted certificate, a wrong host name, ...
    case tls(String)
    /// The settings were rejected before connecting (an unreadable CA file, ...).
    case invalidSettings(String)

    public var description: String {
        switch self {
        case .unreachable(let why): "cannot reach the MQTT broker: \(why)"
        case .refused(let why): "the MQTT broker refused the connection: \(why)"
        case .tls(let why): "TLS with the MQTT broker failed: \(why)"
        case .invalidSettings(let why): why
        }
    }
}

/// What the publisher tells its owner, on the publisher's own thread.
public enum MQTTEvent: Sendable, Equatable {
    /// Connected (again); `backlog` messages wait to be sent.
    case connected(backlog: Int)
    /// The connection went; messages queue until it is back.
    case lost(reason: String, queued: Int)
    /// The buffer was full while the broker was away: this many of the oldest went.
    case dropped(Int)
    /// Nothing more will be published.
    case failed(MQTTError)
    /// A message on one of `MQTTSettings.subscriptions`; `retain` is set for
    /// one the broker held when the subscription was made (not for one
    /// published since, even if published retained).
    case received(MQTTMessage)
}
