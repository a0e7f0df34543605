import BlueZ
import DBus

extension BirdCentral {
    public struct Configuration: Hashable, Sendable {
        public enum Mode: Hashable, Sendable {
            /// Connect, read the fields once, disconnect.
            case read
            /// Read, subscribe, stream; after a lost link go back to scanning if `reconnect`.
            case watch(reconnect: Bool)
            /// Connect, write one value (with response), disconnect.
            case write(BirdValue)
            /// Connect, pair (and bond), disconnect (`birdctl pair`).
            case pair
            /// Have BlueZ forget the device at `address`, bond included (`birdctl unpair`).
            case unpair
        }

        public var mode: Mode
        /// The characteristics to read (and, watching, to subscribe to).
        public var fields: [BirdField]
        /// Only this peripheral (any Bird when nil).
        public var address: BluetoothAddress?
        public var minimumRSSI: Int?
        /// How long to look for a bird before giving up; nil: forever.
        public var scanTimeout: Duration?
        /// Deadline from the first Connect to ServicesResolved, retries included.
        public var connectTimeout: Duration
        /// Connect attempts for transient failures (InProgress, le-connection-abort-by-local).
        public var connectAttempts: Int
        /// The first retry's delay; each later one doubles it.
        public var retryBackoff: Duration
        /// Watching: stop after this many decoded readings.
        public var maximumReadings: Int?
        /// Watching: stop after this long.
        public var duration: Duration?
        /// Pair when the peripheral asks for security (a read, subscription or
        /// write refused as not paired); false: that ends the command.
        public var pairs: Bool
        /// How long a pairing may take (the person confirming it included).
        public var pairTimeout: Duration
        /// The birds the user named: the only ones
        /// bonded with when they ask for pairing, besides those BlueZ already
        /// holds a bond with. A command's ADDRESS is named; `--pair-with` names more.
        public var pairsWith: Set<BluetoothAddress>
        /// Without an address: how long to go on listening after the first
        /// Bird is heard before connecting to the strongest heard (nil: the
        /// first heard).
        public var listeningWindow: Duration?
        /// How the driver subscribes (the machine only asks it to).
        public var notifyMethod: NotifyMethod
        /// Watching: poll the bird instead of holding a link — connect, read
        /// the fields, disconnect, and again this long after. Nil: hold the
        /// link and stream its notifications.
        public var pollInterval: Duration?
        /// A held watch's watchdog: a bird heard nothing from for this many of
        /// its usual gaps between notifications gets a probe read, and a link
        /// whose probe is not answered is ended (see `QuietWatch`). Nil or 0: never.
        public var quietAfter: Int? = BirdCentral.defaultQuietAfter
        /// A watch that ended a link itself (the watchdog, a characteristic
        /// gone) and finds its bird again sends Connect only once that link's
        /// `Connected` turned false, or after `connectTimeout`: bluetoothd
        /// holds a Disconnect ~2 s and answers a Connect meanwhile at once, on
        /// a link about to go. False with `watch --all`, whose scheduler
        /// counts a link going down as up (`BirdFleet.linked`).
        public var awaitsOwnDisconnect = true

        public init(
            mode: Mode, fields: [BirdField] = BirdField.allCases, address: BluetoothAddress? = nil, minimumRSSI: Int? = nil,
            scanTimeout: Duration? = .seconds(10), connectTimeout: Duration = .seconds(10), connectAttempts: Int = 4,
            retryBackoff: Duration = .milliseconds(250), maximumReadings: Int? = nil, duration: Duration? = nil,
            pairs: Bool = true, pairTimeout: Duration = .seconds(30), pairsWith: Set<BluetoothAddress> = [],
            listeningWindow: Duration? = BirdCentral.defaultListeningWindow, notifyMethod: NotifyMethod = .auto
        ) {
            self.mode = mode
            self.fields = fields
            self.address = address
            self.minimumRSSI = minimumRSSI
            self.scanTimeout = scanTimeout
            self.connectTimeout = connectTimeout
            self.connectAttempts = connectAttempts
            self.retryBackoff = retryBackoff
            self.maximumReadings = maximumReadings
            self.duration = duration
            self.pairs = pairs
            self.pairTimeout = pairTimeout
            self.pairsWith = pairsWith.union(address.map { [$0] } ?? [])
            self.listeningWindow = listeningWindow
            self.notifyMethod = notifyMethod
        }

        var isWatch: Bool { if case .watch = mode { true } else { false } }
        /// A watch that polls its bird (see `pollInterval`).
        var polls: Bool { isWatch && pollInterval != nil }
        var reconnects: Bool { mode == .watch(reconnect: true) }
    }

    public enum Timer: Hashable, Sendable {
        case scan, connect, retry, duration
        /// Without an address: the listening window after the first Bird heard.
        case listen
        /// After ServicesResolved, waiting for the Bird characteristics to appear.
        case services
        /// A pairing's own deadline (Pair may never be answered).
        case pairing
        /// A polled bird rests between polls.
        case poll
        /// A held link's watchdog looks at it (see `QuietWatch`).
        case quiet
        /// A probe read's own deadline.
        case probe
    }

    /// How many usual gaps between notifications of silence make a held bird quiet.
    public static let defaultQuietAfter = 4

    /// What the driver must do, in order.
    public enum Action: Hashable, Sendable {
        case startScanning
        case stopScanning
        case connect(ObjectPath)
        /// Disconnect, or cancel a connection still being made.
        case disconnect(ObjectPath)
        case read(BirdField, ObjectPath)
        case write(BirdField, ObjectPath, [UInt8])
        case startNotify(BirdField, ObjectPath)
        case stopNotify(ObjectPath)
        /// Device1.Pair (through our agent), answered by `pairCompleted`.
        case pair(ObjectPath)
        case cancelPairing(ObjectPath)
        /// Remove the device at this address from BlueZ (bond included), answered by `forgetCompleted`.
        case forget(BluetoothAddress)
        case armTimer(Timer, Duration)
        case cancelTimer(Timer)
        case report(Report)
        /// The command is done; the driver lets the cleanup actions before this
        /// one complete (briefly) and then exits with this outcome.
        case finish(CommandOutcome)
    }

    /// Something to tell the user.
    /// Indirect: a report travels through the machine's and the fleet's action
    /// arrays by value on every notification; boxed, each copy is one retain.
    public indirect enum Report: Hashable, Sendable {
        case found(Peripheral, rssi: Int16?)
        case connected(Peripheral)
        case disconnected(Peripheral)
        case reading(Peripheral, BirdValue, raw: [UInt8], notified: Bool)
        case badValue(Peripheral, BirdValueError)
        case operationFailed(Peripheral, String, BlueZError)
        /// Not a failure yet: e.g. bluetoothd restarting, adapter powered off.
        case waiting(String)
        case retrying(Peripheral, attempt: Int, BlueZError)
        /// The peripheral asks for security: pairing (Just Works unless a person confirms).
        case pairing(Peripheral)
        case paired(Peripheral)
        /// One bird's session ended (`bird`: which, in `watch --all`); it
        /// will be picked up again if heard.
        case gaveUp(CommandFailure, bird: Peripheral? = nil)
        /// `watch --all`: the bird at this address was neither heard nor
        /// connected for the fleet's `forgetAfter`: nothing of it is kept.
        case forgotten(address: BluetoothAddress)
        /// `watch --all`: how many links the adapter holds and how many it can
        /// (given, or learned from connections that never came while the others
        /// were up); nil: not known (a learned one forgotten).
        case links(adapter: String, used: Int, limit: Int?, learned: Bool)
        /// `watch --all`: the bird is polled from now on (connect, read, disconnect
        /// every interval), to share the adapter's last link with others.
        case polled(Peripheral)
        /// `watch --all`: a bird `auto` polled is held again (the link limit
        /// that made it share the last link is forgotten, or held birds left).
        case held(Peripheral)
        /// `watch --all` with several adapters: the bird is connected through
        /// another adapter (by name) than its last link was, and why.
        case adapter(Peripheral, adapter: String, AdapterChange)
        /// A write asked of a watch while it streams (`writeRequested`, the
        /// MQTT gateway's): done, or why not.
        case written(Peripheral, BirdValue, failure: BlueZError?)
        /// `watch --all`: connect deadlines passed one after another on the
        /// adapter (by name) with fewer links up than it held before: its
        /// connect path is stuck, and it is powered off and on; `failure`:
        /// that could not be done.
        case adapterReset(adapter: String, failure: BlueZError?)
        /// `watch --all`: the adapter (by name) heard no Bird for `silentFor`
        /// while a bird was looked for (see `DiscoveryWatchdog`): its discovery
        /// is restarted; `stalled`: it heard nothing after a restart either,
        /// and `powerCycle` says whether it is powered off and on (it holds no link).
        case discoveryDeaf(adapter: String, silentFor: Duration, stalled: Bool, powerCycle: Bool)
        /// A held bird went quiet (nothing heard for several of its usual gaps
        /// between notifications), and what its probe read found.
        case quiet(Peripheral, QuietProbe)
    }

    /// A quiet bird's probe read (see `QuietWatch`).
    public enum QuietProbe: Hashable, Sendable {
        /// Nothing heard for at least `silentFor`, where the bird's usual
        /// gap is `usualGap` (nil: not learned yet): a read is sent.
        case probing(silentFor: Duration, usualGap: Duration?)
        /// The bird answered: the link is kept.
        case answered
        /// It did not (an error, or nothing by the deadline): the link is ended.
        case unanswered(BlueZError)
    }

    public struct Peripheral: Hashable, Sendable {
        public var path: ObjectPath
        public var address: BluetoothAddress
        public var name: String?

        public init(path: ObjectPath, address: BluetoothAddress, name: String?) {
            self.path = path
            self.address = address
            self.name = name
        }

        /// The adapter (`hci1`) whose device object this is: BlueZ makes one per adapter that hears a bird.
        public var adapterName: String? {
            let name = AdapterPool.adapterName(of: path)
            return name.isEmpty ? nil : name
        }
    }
}
