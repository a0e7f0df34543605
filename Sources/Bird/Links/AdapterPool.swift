import BlueZ
import DBus

/// Why a bird's adapter changed (the `adapter` event's `reason`).
public enum AdapterChange: String, Hashable, Sendable, CaseIterable {
    /// Another adapter of the pool hears it louder (or its last one had no free link).
    case louder
    /// It is bonded under this adapter.
    case bonded
    /// Its adapter was powered off or removed.
    case adapterGone = "adapter-gone"
    /// Its adapter is wedged (see `AdapterPool`).
    case adapterWedged = "adapter-wedged"
}

/// Several adapters as one pool (`--adapter hci0,hci1`, `--adapter all`;
/// `watch --all`): through which adapter each bird is connected. BlueZ makes
/// one device object per adapter that hears a bird (`/org/bluez/hciN/dev_…`),
/// so a bird is heard under several paths; its address is its key here.
///
/// The rule (docs/scheduling.md, "Several adapters"):
/// - a bird bonded under an adapter (`Paired` on its device object there) is
///   connected through that adapter while it is usable: bonds are per adapter;
/// - otherwise through the adapter that hears it loudest (the RSSI of its
///   device object under each adapter) among those with a free link, else the
///   loudest (it waits there for a link); a wedged adapter, and the one whose
///   connect just failed this bird, only when no other adapter hears it;
/// - an adapter powered off, removed or wedged hands its birds over: each is
///   given to its best other adapter as soon as its machine looks for it again.
///
/// *Wedged*: a connect deadline passed on the adapter while it held no link
/// (so no link limit explains it), twice in a row — no connect succeeding on it
/// in between. One such deadline may be the bird's fault (gone out of range);
/// with a link up it is how the adapter's limit is learned instead
/// (`LinkScheduler`). A wedged adapter is used again once a connect succeeds
/// on it (tried as the last resort) or it is powered on or added again.
///
/// A value, no I/O: part of `BirdFleet`. Bounded: what it keeps per bird is
/// dropped with the bird's machine (see `forget`).
public struct AdapterPool: Sendable {
    typealias Reason = AdapterChange

    struct Member: Hashable, Sendable {
        var adapter: AdapterChoice
        var wedged = false
        /// Connect deadlines passed in a row while it held no link.
        var strikes = 0
    }

    /// The pool's adapters as BlueZ has them now, in the order BlueZ lists them.
    private(set) var members: [Member] = []
    /// Each bird's last sighting under each adapter of the pool (keyed by the adapter's path).
    private(set) var heard: [BluetoothAddress: [ObjectPath: Sighting]] = [:]
    /// The adapter of each bird's last link.
    private(set) var lastAdapter: [BluetoothAddress: ObjectPath] = [:]
    /// Birds whose adapter went or wedged, and why (said when they connect elsewhere).
    private(set) var handOver: [BluetoothAddress: Reason] = [:]
    /// Of those, the birds to give another adapter's sighting as soon as
    /// their machine looks for them again (not waiting to hear them anew).
    private(set) var toFeed: Set<BluetoothAddress> = []
    /// The adapter whose connect deadline just passed for a bird: its next choice avoids it.
    private var failedOn: [BluetoothAddress: ObjectPath] = [:]
    /// Birds being listened to by every adapter before one is chosen for
    /// them (see `BirdFleet.Timer.listen`); the fleet bounds them.
    private(set) var listening: Set<BluetoothAddress> = []

    /// How many birds' sightings are kept at most (birds followed, listened to
    /// and waiting are far fewer: see `BirdFleet.waitingLimit`).
    static let birdsLimit = 1024

    /// The adapter (path) a device object of BlueZ's lies under.
    static func adapter(of device: ObjectPath) -> ObjectPath { device.parent ?? "/" }

    /// The name (`hci1`) of the adapter a device object lies under.
    static func adapterName(of device: ObjectPath) -> String { name(ofAdapter: adapter(of: device)) }

    /// `hciN` (ASCII digits): what BlueZ names an adapter, all the command
    /// line takes and all the gateway puts into a topic or a template.
    public static func isAdapterName(_ name: String) -> Bool {
        name.hasPrefix("hci") && name.count > 3 && name.count <= 8
            && name.dropFirst(3).allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// The name (`hci1`) of an adapter's object.
    static func name(ofAdapter adapter: ObjectPath) -> String {
        String(adapter.rawValue.split(separator: "/").last ?? "")
    }

    var usable: [AdapterChoice] { members.map(\.adapter).filter(\.powered) }

    // MARK: Events

    /// The pool's adapters now (present ones, powered or not). Returns those
    /// that were usable and are no longer (powered off or removed), and hands
    /// their birds over.
    mutating func update(_ adapters: [AdapterChoice]) -> [AdapterChoice] {
        let before = members
        members = adapters.map { adapter in
            var member = before.first { $0.adapter.path == adapter.path } ?? Member(adapter: adapter)
            // Powered (again) or added: a clean slate.
            if adapter.powered && !member.adapter.powered { member = Member(adapter: adapter) }
            member.adapter = adapter
            return member
        }
        let lost = before.map(\.adapter).filter { old in
            old.powered && !adapters.contains { $0.path == old.path && $0.powered }
        }
        for adapter in lost {
            for (address, path) in lastAdapter where path == adapter.path {
                handOver[address] = .adapterGone
                toFeed.insert(address)
            }
            for address in heard.keys { heard[address]?[adapter.path] = nil }
        }
        return lost
    }

    /// bluetoothd went: no adapter is left (they are told again when it is
    /// back), and no bird is listened to.
    mutating func bluetoothGone() {
        _ = update([])
        listening.removeAll()
    }

    /// The bird at `address` is listened to from now; false if it was already.
    mutating func listen(_ address: BluetoothAddress) -> Bool { listening.insert(address).inserted }

    /// The bird at `address` is no longer listened to; false if it was not.
    @discardableResult
    mutating func stopListening(_ address: BluetoothAddress) -> Bool { listening.remove(address) != nil }

    /// A bird was heard under one of the pool's adapters.
    mutating func heard(_ sighting: Sighting) {
        let address = sighting.address
        if heard[address] == nil && heard.count >= Self.birdsLimit { return }
        heard[address, default: [:]][Self.adapter(of: sighting.device)] = sighting
    }

    /// A connect through `device` succeeded: the adapter is alive, and the
    /// bird's adapter is that one now. The reason it moved, if it did.
    mutating func connected(_ address: BluetoothAddress, device: ObjectPath) -> Reason? {
        let adapter = Self.adapter(of: device)
        if let index = members.firstIndex(where: { $0.adapter.path == adapter }) {
            members[index].strikes = 0
            members[index].wedged = false
        }
        failedOn[address] = nil
        let previous = lastAdapter.updateValue(adapter, forKey: address)
        let handedOver = handOver.removeValue(forKey: address)
        toFeed.remove(address)
        guard let previous, previous != adapter else { return nil }
        if let handedOver { return handedOver }
        return heard[address]?[adapter]?.bonded == true ? .bonded : .louder
    }

    /// A connect deadline passed for the bird at `device` while `links` other
    /// links were up on its adapter. True when the adapter is found wedged
    /// now; then its birds are handed over.
    mutating func connectDeadlinePassed(_ address: BluetoothAddress, device: ObjectPath, links: Int) -> Bool {
        let adapter = Self.adapter(of: device)
        failedOn[address] = adapter
        guard let index = members.firstIndex(where: { $0.adapter.path == adapter }) else { return false }
        // With links up, the controller may be at its limit: that is learned, not a wedge.
        guard links == 0 else {
            members[index].strikes = 0
            return false
        }
        members[index].strikes += 1
        guard members[index].strikes >= 2, !members[index].wedged else { return false }
        members[index].wedged = true
        for (bird, path) in lastAdapter where path == adapter {
            handOver[bird] = .adapterWedged
            toFeed.insert(bird)
        }
        handOver[address] = .adapterWedged
        toFeed.insert(address)
        return true
    }

    /// Its machine was given a sighting: no feed is due.
    mutating func fed(_ address: BluetoothAddress) { toFeed.remove(address) }

    /// A connection to the bird failed (not a deadline) at `device`: its next choice avoids that adapter.
    mutating func failed(_ address: BluetoothAddress, device: ObjectPath) { failedOn[address] = Self.adapter(of: device) }

    /// Whether a usable adapter other than the one that just failed the bird hears it.
    func hasAlternative(_ address: BluetoothAddress) -> Bool {
        guard let failed = failedOn[address], let sightings = heard[address] else { return false }
        return members.contains { $0.adapter.powered && $0.adapter.path != failed && sightings[$0.adapter.path] != nil }
    }

    /// The bird's machine was dropped: nothing of it is kept (its sightings
    /// too, unless `keepHeard`: it waits to be followed again).
    mutating func forget(_ address: BluetoothAddress, keepHeard: Bool = false) {
        if !keepHeard { heard[address] = nil }
        lastAdapter[address] = nil
        handOver[address] = nil
        toFeed.remove(address)
        if !keepHeard { failedOn[address] = nil }
    }

    /// Whether every usable adapter of the pool has heard the bird (nothing is left to compare).
    func heardByAll(_ address: BluetoothAddress) -> Bool {
        guard let sightings = heard[address] else { return false }
        return members.allSatisfy { !$0.adapter.powered || sightings[$0.adapter.path] != nil }
    }

    // MARK: The choice

    /// The sighting (so, the device object and adapter) through which to
    /// connect the bird now; nil if no usable adapter of the pool hears it.
    /// `free`: whether an adapter has a free link.
    func choice(_ address: BluetoothAddress, free: (ObjectPath) -> Bool) -> Sighting? {
        guard let sightings = heard[address] else { return nil }
        let hearing = members.filter { $0.adapter.powered && sightings[$0.adapter.path] != nil }
        if let bonded = hearing.first(where: { sightings[$0.adapter.path]!.bonded }) { return sightings[bonded.adapter.path] }
        let healthy = hearing.filter { !$0.wedged && $0.adapter.path != failedOn[address] }
        let pick = loudest(healthy.filter { free($0.adapter.path) }, sightings) ?? loudest(healthy, sightings)
            ?? loudest(hearing, sightings)
        return pick.flatMap { sightings[$0.adapter.path] }
    }

    /// The loudest of these (one heard without RSSI counts as the faintest;
    /// the first listed of equals).
    private func loudest(_ candidates: [Member], _ sightings: [ObjectPath: Sighting]) -> Member? {
        var best: (member: Member, rssi: Int)?
        for member in candidates {
            let rssi = sightings[member.adapter.path]?.rssi.map(Int.init) ?? Int(Int16.min) - 1
            if best == nil || rssi > best!.rssi { best = (member, rssi) }
        }
        return best?.member
    }
}
