import BlueZ
import DBus

/// What an operator sees of one adapter (`--metrics`): its links, its
/// limit, and what was tried through it since birdctl started.
public struct AdapterHealth: Hashable, Sendable {
    /// Its name (hciN).
    public var name: String
    /// Its Bluetooth address, if BlueZ has the adapter now.
    public var address: BluetoothAddress?
    /// Links up (or going down) and being made.
    public var links = 0
    /// Its link limit, if known: given (`--links`) or learned.
    public var limit: Int?
    public var limitLearned = false
    public var connectAttempts = 0
    /// Connect attempts that failed, by BlueZ's error kind (`timeout` for a
    /// deadline that passed): a few kinds, never a peer's text.
    public var connectFailures: [String: Int] = [:]
    /// Bird Service advertisements heard (sightings of Birds).
    public var advertisements = 0
    /// Times discovery was started on it (the first, and each after an outage).
    public var discoveryStarts = 0
    /// Times its discovery was restarted because it heard no Bird while one
    /// was looked for (see `DiscoveryWatchdog`), and times it was still deaf
    /// after a restart (each then either restarted again or powered off and on).
    public var discoveryRestarts = 0
    public var discoveryStalls = 0
    /// Times it was powered off and on because nothing came through it.
    public var resets = 0

    public init(name: String) { self.name = name }
}

/// The counters a driver (`CentralDriver`, `ScanDriver`) keeps per adapter (by path), on the loop.
struct AdapterCounters {
    private(set) var byAdapter: [ObjectPath: AdapterHealth] = [:]

    mutating func count(_ adapter: ObjectPath, _ change: (inout AdapterHealth) -> Void) {
        change(&byAdapter[adapter, default: AdapterHealth(name: AdapterPool.name(ofAdapter: adapter))])
    }

    mutating func connectFailed(_ adapter: ObjectPath, _ kind: String) {
        count(adapter) { $0.connectFailures[kind, default: 0] += 1 }
    }

    /// What was counted on each adapter, and on `members` (those in use,
    /// counted or not), in path order.
    func health(with members: [ObjectPath]) -> [(path: ObjectPath, health: AdapterHealth)] {
        Set(byAdapter.keys).union(members).sorted { $0.rawValue < $1.rawValue }.map { path in
            (path, byAdapter[path] ?? AdapterHealth(name: AdapterPool.name(ofAdapter: path)))
        }
    }
}

extension BlueZError.Kind {
    /// The kind as a metric label: snake case of its name.
    public var label: String {
        var label = ""
        for character in "\(self)" {
            if character.isUppercase {
                label += "_" + character.lowercased()
            } else {
                label.append(character)
            }
        }
        return label
    }
}
