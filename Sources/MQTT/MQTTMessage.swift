/// One PUBLISH: the topic, the payload's bytes, and whether the broker keeps
/// it as the topic's current value for later subscribers.
public struct MQTTMessage: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    /// The topic's whole current state (a bird's JSON): while one waits to be
    /// sent, a newer one replaces it instead of queuing behind it. Readings
    /// are not snapshots: every one is sent.
    public var isSnapshot: Bool

    public init(_ topic: String, _ payload: String, retain: Bool, snapshot: Bool = false) {
        self.init(topic, bytes: Array(payload.utf8), retain: retain, snapshot: snapshot)
    }

    public init(_ topic: String, bytes payload: [UInt8], retain: Bool, snapshot: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
        isSnapshot = snapshot
    }
}

/// Where and how to connect. Credentials come from the caller (a file or the
/// environment, never argv); TLS is on when `tls` is given.
public struct MQTTSettings: Sendable {
    public struct TLS: Sendable {
        /// The CA certificate(s) the broker's certificate must chain to.
        public var caFile: String
        /// A client certificate and its key, for brokers that ask for one.
        public var certificateFile: String?
        public var keyFile: String?

        public init(caFile: String, certificateFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    public var host: String
    public var port: Int
    /// Unique per gateway: a broker disconnects the older of two clients
    /// with the same id.
    public var clientID: String
    public var username: String?
    public var password: String?
    public var tls: TLS?
    /// Published by the broker when the connection dies without a DISCONNECT.
    public var will: MQTTMessage?
    public var keepaliveSeconds = 30
    /// Messages held while the broker is unreachable; beyond it the oldest go.
    public var bufferCapacity = defaultBufferCapacity
    public static let defaultBufferCapacity = 50_000
    /// The same bound in bytes (each message counted as its topic, its
    /// payload and 64 bytes of keeping): whichever is reached first.
    public var bufferByteCapacity = defaultBufferByteCapacity
    public static let defaultBufferByteCapacity = 16 << 20
    /// Unacknowledged QoS 1 messages handed to libmosquitto at a time.
    public var window = 64
    /// Topic filters subscribed to (QoS 1) at every connect, before anything
    /// queued goes out; what arrives is `MQTTEvent.received`. The session is
    /// clean, so each reconnect subscribes again and gets the retained
    /// messages again.
    public var subscriptions: [String] = []
    /// A received message with a longer topic or payload is ignored: anyone
    /// allowed to publish on the broker may send it.
    public var maximumIncomingSize = 4096

    public init(host: String, port: Int, clientID: String) {
        self.host = host
        self.port = port
        self.clientID = clientID
    }
}
