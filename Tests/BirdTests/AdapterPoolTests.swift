import Bird
import BlueZ
import DBus
import Testing

// Several adapters as one pool (`watch --all --adapter hci0,hci1`), through the fleet's events.

private func hci(_ n: Int, powered: Bool = true) -> AdapterChoice {
    AdapterChoice(path: ObjectPath("/org/bluez/hci\(n)"), name: "hci\(n)", powered: powered)
}

private func address(_ bird: Int) -> BluetoothAddress { BluetoothAddress(value: 0xF00D_B17D_0000 + UInt64(bird))! }

/// Bird `bird`'s device object under adapter `adapter`.
private func path(_ bird: Int, on adapter: Int) -> ObjectPath {
    ObjectPath("/org/bluez/hci\(adapter)/dev_F0_0D_B1_7D_00_0\(bird)")
}

private func heard(_ bird: Int, on adapter: Int, rssi: Int16, bonded: Bool = false) -> Sighting {
    Sighting(device: path(bird, on: adapter), address: address(bird), name: "Bird\(bird)", rssi: rssi,
             uuids: [BirdService.uuid], bonded: bonded)
}

private let watchAlpha = BirdCentral.Configuration(mode: .watch(reconnect: true), fields: [.alpha], scanTimeout: nil)

private func connects(_ actions: [BirdFleet.Action]) -> [ObjectPath] {
    actions.compactMap { if case .connect(_, let path) = $0 { path } else { nil } }
}

private func reports(_ actions: [BirdFleet.Action]) -> [BirdCentral.Report] {
    actions.compactMap { if case .report(let r) = $0 { r } else { nil } }
}

private func moves(_ actions: [BirdFleet.Action]) -> [(adapter: String, reason: AdapterChange)] {
    reports(actions).compactMap { if case .adapter(_, let adapter, let reason) = $0 { (adapter, reason) } else { nil } }
}

private extension BirdFleet {
    /// A pool of hci0 and hci1 (`links` each, if given), discovering.
    static func pool(links: Int? = nil) -> BirdFleet {
        var fleet = BirdFleet(watchAlpha, all: true, links: LinkPolicy(links: links), pooled: true)
        _ = fleet.adaptersChanged([hci(0), hci(1)], requested: nil)
        return fleet
    }

    /// The bird is heard by each adapter at these strengths; its listening
    /// window ends and the gate opens: the Connects sent.
    mutating func hear(_ bird: Int, _ strengths: [Int: Int16], bondedOn: Int? = nil) -> [Action] {
        var actions: [Action] = []
        for (adapter, rssi) in strengths.sorted(by: { $0.key < $1.key }) {
            actions += deviceSighted(heard(bird, on: adapter, rssi: rssi, bonded: adapter == bondedOn))
        }
        return actions + timerFired(.listen(address(bird))) + timerFired(.connectGap)
    }

    /// Machine `id` connected through `device` and streaming.
    mutating func linkUp(_ id: MachineID, _ device: ObjectPath) -> [Action] {
        let alpha = ObjectPath("\(device)/service000a/char000f")
        return connectReplied(id, .success(())) + servicesResolved(device: device, characteristics: [.alpha: alpha])
            + notifyStarted(id, .alpha, .success(())) + readCompleted(id, .alpha, .success(Array("50".utf8)))
    }
}

@Suite("Several adapters as one pool")
struct AdapterPoolTests {
    @Test func discoveryRunsOnThePoolAndEachAdapterSaysItsGivenLimit() {
        var fleet = BirdFleet(watchAlpha, all: true, links: LinkPolicy(links: 2), pooled: true)
        let started = fleet.adaptersChanged([hci(0), hci(1)], requested: nil)
        #expect(started.contains(.startScanning(nil, lookUpKnown: nil)))
        #expect(reports(started).filter { if case .links = $0 { true } else { false } } == [
            .links(adapter: "hci0", used: 0, limit: 2, learned: false), .links(adapter: "hci1", used: 0, limit: 2, learned: false),
        ])
    }

    /// A bird new to the fleet is listened to until every adapter has heard
    /// it (or the listening window ends); then it is connected through the loudest.
    @Test func aBirdIsConnectedThroughTheAdapterThatHearsItLoudest() {
        var fleet = BirdFleet.pool()
        let first = fleet.deviceSighted(heard(1, on: 0, rssi: -70))
        #expect(connects(first) == [] && first.contains(.armTimer(.listen(address(1)), .seconds(1))))
        #expect(connects(fleet.deviceSighted(heard(1, on: 1, rssi: -45))) == [path(1, on: 1)])
        #expect(connects(fleet.timerFired(.listen(address(1)))) == [])
        // Its first link is not a change of adapter.
        #expect(moves(fleet.linkUp(0, path(1, on: 1))).isEmpty)
        // A bird only hci0 hears: through hci0 once the window ends.
        #expect(connects(fleet.deviceSighted(heard(2, on: 0, rssi: -70)) + fleet.timerFired(.connectGap)) == [])
        #expect(connects(fleet.timerFired(.listen(address(2)))) == [path(2, on: 0)])
    }

    @Test func aBondedBirdStaysOnItsAdapterWhileHeardLouderOnAnother() {
        var fleet = BirdFleet.pool()
        #expect(connects(fleet.hear(1, [0: -85, 1: -40], bondedOn: 0)) == [path(1, on: 0)])
    }

    /// One link each: the second bird, loudest on hci1 too, goes through hci0
    /// (free); a third waits for a link rather than exceed either limit.
    @Test func theLoudestAmongAdaptersWithAFreeLinkAndNoLimitExceeded() {
        var fleet = BirdFleet.pool(links: 1)
        #expect(connects(fleet.hear(1, [0: -70, 1: -50])) == [path(1, on: 1)])
        _ = fleet.linkUp(0, path(1, on: 1))
        #expect(connects(fleet.hear(2, [0: -75, 1: -55])) == [path(2, on: 0)])
        _ = fleet.linkUp(1, path(2, on: 0))
        #expect(fleet.linksUp(on: hci(0).path).up == 1 && fleet.linksUp(on: hci(1).path).up == 1)
        #expect(connects(fleet.hear(3, [0: -60, 1: -60]) + fleet.timerFired(.connectGap)) == [])
        // Bird 1's link goes: bird 3 takes hci1's free link, no more.
        let freed = fleet.deviceDisconnected(path(1, on: 1)) + fleet.timerFired(.connectGap)
        #expect(connects(freed) == [path(3, on: 1)])
        #expect(fleet.linksUp(on: hci(1).path).up == 1)
    }

    /// hci1 is powered off: its bird is given hci0's sighting at once (not
    /// waiting to be heard anew) and said to have moved.
    @Test func anAdapterPoweredOffHandsItsBirdsOver() {
        var fleet = BirdFleet.pool()
        #expect(connects(fleet.hear(1, [0: -70, 1: -50])) == [path(1, on: 1)])
        _ = fleet.linkUp(0, path(1, on: 1))
        let off = fleet.adaptersChanged([hci(0), hci(1, powered: false)], requested: nil) + fleet.timerFired(.connectGap)
        #expect(reports(off).contains(.disconnected(BirdCentral.Peripheral(path: path(1, on: 1), address: address(1), name: "Bird1"))))
        #expect(connects(off) == [path(1, on: 0)])
        #expect(!reports(off).contains { if case .waiting = $0 { true } else { false } })
        let moved = moves(fleet.linkUp(0, path(1, on: 0)))
        #expect(moved.map(\.adapter) == ["hci0"] && moved.map(\.reason) == [.adapterGone])
    }

    @Test func anAdapterRemovedHandsItsBirdsOver() {
        var fleet = BirdFleet.pool()
        _ = fleet.hear(1, [0: -70, 1: -50])
        _ = fleet.linkUp(0, path(1, on: 1))
        // The links' own events come first, as bluetoothd sends them.
        _ = fleet.deviceDisconnected(path(1, on: 1)) + fleet.deviceRemoved(path(1, on: 1))
        let gone = fleet.adaptersChanged([hci(0)], requested: nil) + fleet.timerFired(.connectGap)
        #expect(connects(gone) == [path(1, on: 0)])
        #expect(moves(fleet.linkUp(0, path(1, on: 0))).map(\.reason) == [.adapterGone])
    }

    /// The last adapter of the pool goes: the fleet waits, as with one adapter.
    @Test func withNoAdapterLeftTheFleetWaits() {
        var fleet = BirdFleet.pool()
        _ = fleet.adaptersChanged([hci(0), hci(1, powered: false)], requested: nil)
        let none = fleet.adaptersChanged([hci(0, powered: false), hci(1, powered: false)], requested: nil)
        #expect(!fleet.isFinished)
        let back = fleet.adaptersChanged([hci(0, powered: false), hci(1)], requested: nil)
        #expect(back.contains(.startScanning(nil, lookUpKnown: nil)))
        #expect(connects(none).isEmpty)
    }

    /// bluetoothd restarts: the pool starts over, discovery on again, the
    /// first attempt after a random gap (as with one adapter).
    @Test func bluetoothdRestartingStartsThePoolOver() {
        var fleet = BirdFleet.pool()
        _ = fleet.hear(1, [0: -70, 1: -50])
        _ = fleet.linkUp(0, path(1, on: 1))
        _ = fleet.bluetoothUnavailable(BlueZError(.bluetoothdNotRunning, name: "org.freedesktop.DBus.Error.ServiceUnknown", message: ""))
        let back = fleet.adaptersChanged([hci(0), hci(1)], requested: nil)
        #expect(back.contains(.startScanning(nil, lookUpKnown: nil)))
        #expect(back.contains { if case .armTimer(.connectGap, _) = $0 { true } else { false } })
        // Heard again: through the loudest, once the gap has passed.
        _ = fleet.deviceSighted(heard(1, on: 0, rssi: -70))
        #expect(connects(fleet.deviceSighted(heard(1, on: 1, rssi: -50)) + fleet.timerFired(.connectGap)) == [path(1, on: 1)])
    }

    /// hci1 powered off and on again: discovery on it again, and its birds may use it.
    @Test func anAdapterPowerCycledComesBackIntoThePool() {
        var fleet = BirdFleet.pool()
        _ = fleet.adaptersChanged([hci(0), hci(1, powered: false)], requested: nil)
        let on = fleet.adaptersChanged([hci(0), hci(1)], requested: nil)
        #expect(on.contains(.startScanning(nil, lookUpKnown: nil)))
        #expect(connects(fleet.hear(1, [0: -70, 1: -50])) == [path(1, on: 1)])
    }

    /// A connect that never completes while its adapter holds no link: the
    /// bird tries the other adapter at once. Twice in a row there, and the
    /// adapter is wedged: a bird heard louder on it goes elsewhere.
    @Test func anAdapterWhoseConnectsNeverCompleteIsWedged() {
        var fleet = BirdFleet.pool()
        #expect(connects(fleet.hear(1, [0: -70, 1: -50])) == [path(1, on: 1)])
        let once = fleet.deadlinePassed(0, up: [], adapter: "hci1") + fleet.timerFired(.connectGap)
        #expect(connects(once) == [path(1, on: 0)])
        _ = fleet.linkUp(1, path(1, on: 0))
        #expect(connects(fleet.hear(2, [0: -70, 1: -50])) == [path(2, on: 1)])
        let twice = fleet.deadlinePassed(2, up: [], adapter: "hci1")
            + fleet.timerFired(.connectGap)
        #expect(connects(twice) == [path(2, on: 0)])
        _ = fleet.linkUp(3, path(2, on: 0))
        #expect(connects(fleet.hear(3, [0: -80, 1: -40])) == [path(3, on: 0)])
    }

    /// Two deadlines in a row with one link up on an adapter are its limit,
    /// learned for that adapter alone, and no wedge.
    @Test func aLimitIsLearnedPerAdapter() {
        var fleet = BirdFleet.pool()
        _ = fleet.hear(1, [0: -70, 1: -50])
        _ = fleet.linkUp(0, path(1, on: 1))
        #expect(connects(fleet.hear(2, [0: -90, 1: -50])) == [path(2, on: 1)])
        let first = fleet.deadlinePassed(1, up: [path(1, on: 1)], adapter: "hci1")
        #expect(!reports(first).contains { if case .links = $0 { true } else { false } }, "one deadline is no proof")
        // Bird 2 tries hci0; bird 3, louder on hci1, still goes there, and is refused too.
        #expect(connects(first + fleet.timerFired(.connectGap)) == [path(2, on: 0)])
        _ = fleet.linkUp(2, path(2, on: 0))
        #expect(connects(fleet.hear(3, [0: -90, 1: -40])) == [path(3, on: 1)])
        let second = fleet.deadlinePassed(3, up: [path(1, on: 1)], adapter: "hci1")
        #expect(reports(second).contains(.links(adapter: "hci1", used: 1, limit: 1, learned: true)))
        // hci1 is full now: bird 3 goes through hci0, and so does bird 4.
        #expect(connects(second + fleet.timerFired(.connectGap)) == [path(3, on: 0)])
        _ = fleet.linkUp(5, path(3, on: 0))  // bird 3's second machine
        #expect(connects(fleet.hear(4, [0: -90, 1: -40])) == [path(4, on: 0)])
    }

    /// A polled bird whose last adapter is full (a held bird took its link)
    /// polls through another adapter with a free link.
    @Test func aPolledBirdPollsThroughAnotherAdapterWhenItsOwnIsFull() {
        var fleet = BirdFleet(watchAlpha, all: true, links: LinkPolicy(poll: [address(1)], pollInterval: .seconds(1), links: 1), pooled: true)
        _ = fleet.adaptersChanged([hci(0), hci(1)], requested: nil)
        #expect(connects(fleet.hear(1, [0: -41, 1: -51])) == [path(1, on: 0)])
        let read = fleet.linkUp(0, path(1, on: 0))
        #expect(read.contains(.disconnect(path(1, on: 0))))
        _ = fleet.deviceDisconnected(path(1, on: 0))
        #expect(connects(fleet.hear(2, [0: -42, 1: -52])) == [path(2, on: 0)])
        _ = fleet.linkUp(1, path(2, on: 0))
        let poll = fleet.timerFired(.machine(0, .poll)) + fleet.timerFired(.connectGap)
        #expect(connects(poll) == [path(1, on: 1)])
    }

    /// A bird whose link was lost comes back through the adapter that hears it loudest now.
    @Test func aBirdFoundAgainMovesToALouderAdapter() {
        var fleet = BirdFleet.pool()
        _ = fleet.hear(1, [0: -50, 1: -70])
        _ = fleet.linkUp(0, path(1, on: 0))
        _ = fleet.deviceSighted(heard(1, on: 1, rssi: -40))
        let lost = fleet.deviceDisconnected(path(1, on: 0)) + fleet.timerFired(.connectGap)
        #expect(connects(lost) == [])  // it is found again when heard again
        let again = fleet.deviceSighted(heard(1, on: 0, rssi: -52)) + fleet.timerFired(.connectGap)
        #expect(connects(again) == [path(1, on: 1)])
        #expect(moves(fleet.linkUp(0, path(1, on: 1))).map(\.reason) == [.louder])
    }
}
