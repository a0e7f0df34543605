import Bird
import BlueZ
import DBus
import Testing

private let alpha = characteristics[.alpha]!

/// A held watch of Robin's alpha, probed after `quietAfter` usual gaps of silence.
private func held(quietAfter: Int? = 2, reconnect: Bool = true, awaitsOwnDisconnect: Bool = true) -> Machine {
    Machine(.watch(reconnect: reconnect), fields: [.alpha]) {
        $0.address = robin.address
        $0.quietAfter = quietAfter
        $0.awaitsOwnDisconnect = awaitsOwnDisconnect
    }
}

/// Streaming, with the actions of the step into streaming.
private func streaming(_ machine: Machine) -> (Machine, [Action]) {
    var m = machine.reading()
    let actions = m.central.readCompleted(.alpha, .success(Array("80".utf8)))
    return (m, actions)
}

/// Streaming, gone quiet, its probe unanswered: the link ended (our Disconnect out), the bird looked for again.
private func probedUnanswered(_ machine: Machine = held()) -> Machine {
    var (m, _) = streaming(machine)
    _ = m.window(notifications: 2)
    _ = m.window(notifications: 0)
    let ended = m.central.timerFired(.probe)
    #expect(ended.contains(.disconnect(device)) && ended.contains(.startScanning))
    let waits = ended.contains(.armTimer(.connect, .seconds(10)))
    #expect(waits == m.central.configuration.awaitsOwnDisconnect, "the wait for the link to go down has a deadline")
    return m
}

private extension Machine {
    /// `count` notifications, then the end of the watchdog's window.
    mutating func window(notifications count: Int) -> [Action] {
        for n in 0..<count { _ = central.valueChanged(alpha, Array("\(n)".utf8)) }
        return central.timerFired(.quiet)
    }
}

@Suite("Links that die quietly: the watchdog of a held link")
struct QuietLinkTests {
    /// Notifications stop, the probe read is never answered: the link is
    /// ended (StopNotify, Disconnect), said so, and the bird looked for again.
    @Test func aSilentBirdWhoseProbeGoesUnansweredIsFoundAgain() {
        var (m, started) = streaming(held())
        // The first window is 2 × the shortest gap (1 s) long.
        #expect(started.last == .armTimer(.quiet, .seconds(2)))
        // 4 notifications in 2 s: a gap of 0.5 s, counted as the shortest, 1 s.
        #expect(m.window(notifications: 4) == [.armTimer(.quiet, .seconds(2))])
        let probe = m.window(notifications: 0)
        #expect(probe == [
            .report(.quiet(robin, .probing(silentFor: .seconds(2), usualGap: .seconds(1)))),
            .armTimer(.probe, .seconds(10)), .read(.alpha, alpha),
        ])
        let ended = m.central.timerFired(.probe)
        let said = ended.compactMap { if case .report(let r) = $0 { r } else { nil } }
        #expect(said == [
            .quiet(robin, .unanswered(BlueZError(.timeout, message: "no answer within 10.0 seconds"))), .disconnected(robin),
        ])
        #expect(ended.contains(.stopNotify(alpha)) && ended.contains(.disconnect(device)))
        #expect(ended.contains(.startScanning), "the bird is looked for again")
        #expect(m.central.currentDevice == nil)
        // Its late answer is nobody's.
        #expect(m.central.readCompleted(.alpha, .success(Array("1".utf8))) == [])
    }

    /// The link the watchdog ended is still going down when the bird is found
    /// again (bluetoothd holds a Disconnect ~2 s, and answers a Connect
    /// meanwhile at once, on the dying link: the VM tier's bluetoothd 5.82,
    /// where StartNotify then failed with NotConnected and the watch exited 7).
    /// Connect waits until `Connected` turns false.
    @Test func theBirdFoundAgainIsConnectedOnlyOnceTheEndedLinkIsDown() {
        var m = probedUnanswered()
        let heard = m.central.deviceSighted(birdSighting)
        #expect(heard.contains(.report(.found(robin, rssi: -50))))
        #expect(!heard.contains(.connect(device)), "not while our Disconnect is out")
        #expect(m.central.deviceDisconnected(device) == [.armTimer(.connect, .seconds(10)), .connect(device)])
        #expect(m.central.connectReplied(.success(())) == [.report(.connected(robin))])
    }

    /// `Connected` never turns false (a Disconnect lost): after the connect
    /// deadline the bird is connected to anyway.
    @Test func theWaitForTheEndedLinkHasADeadline() {
        var m = probedUnanswered()
        _ = m.central.deviceSighted(birdSighting)
        #expect(m.central.timerFired(.connect) == [.armTimer(.connect, .seconds(10)), .connect(device)])
        // A late word of the old link is now the attempt's business, not a second Connect.
        #expect(m.central.deviceDisconnected(device) == [])
    }

    /// The link is down before the bird is heard again: connected to at once.
    @Test func aLinkAlreadyDownDoesNotHoldTheBirdFoundAgain() {
        var m = probedUnanswered()
        #expect(m.central.deviceDisconnected(device) == [.cancelTimer(.connect)])
        #expect(m.central.deviceSighted(birdSighting).suffix(2) == [.armTimer(.connect, .seconds(10)), .connect(device)])
    }

    /// Without the wait (`watch --all`'s machines: its scheduler counts a link going down), as before.
    @Test func withoutTheWaitTheBirdIsConnectedAtOnce() {
        var m = probedUnanswered(held(awaitsOwnDisconnect: false))
        #expect(m.central.deviceSighted(birdSighting).contains(.connect(device)))
    }

    /// The bird is merely quiet: the probe is answered, the link kept, its
    /// value reported, and the next look comes after a window twice as long.
    @Test func aQuietBirdThatAnswersKeepsItsLink() {
        var (m, _) = streaming(held())
        _ = m.window(notifications: 2)  // 1 s apart
        #expect(m.window(notifications: 0).contains(.read(.alpha, alpha)))
        #expect(m.central.readCompleted(.alpha, .success(Array("42".utf8))) == [
            .cancelTimer(.probe), .report(.quiet(robin, .answered)), .armTimer(.quiet, .seconds(4)),
            .report(.reading(robin, .alpha(percent: 42), raw: Array("42".utf8), notified: false)),
        ])
        #expect(m.central.currentDevice == device)
        // Quiet again: probed again, after 4 s, then 8 s.
        #expect(m.window(notifications: 0).first == .report(.quiet(robin, .probing(silentFor: .seconds(4), usualGap: .seconds(1)))))
        #expect(m.central.readCompleted(.alpha, .success(Array("42".utf8))).contains(.armTimer(.quiet, .seconds(8))))
        // A notification brings the window back to 2 usual gaps.
        #expect(m.window(notifications: 8) == [.armTimer(.quiet, .seconds(2))])
    }

    /// A notification while the probe is out answers it.
    @Test func aNotificationAnswersTheProbe() {
        var (m, _) = streaming(held())
        _ = m.window(notifications: 2)
        _ = m.window(notifications: 0)
        #expect(m.central.valueChanged(alpha, Array("7".utf8)) == [
            .cancelTimer(.probe), .report(.quiet(robin, .answered)), .armTimer(.quiet, .seconds(4)),
            .report(.reading(robin, .alpha(percent: 7), raw: Array("7".utf8), notified: true)),
        ])
        #expect(m.central.timerFired(.probe) == [], "its deadline no longer counts")
        // The answer (BlueZ echoes a value read as a change) is not the bird's pace: still quiet.
        #expect(m.window(notifications: 0).first == .report(.quiet(robin, .probing(silentFor: .seconds(4), usualGap: .seconds(1)))))
    }

    /// A probe that fails ends the link; without reconnecting, the watch ends as a lost link.
    @Test func aFailedProbeEndsTheLink() {
        var (m, _) = streaming(held(reconnect: false))
        _ = m.window(notifications: 2)
        _ = m.window(notifications: 0)
        let failed = m.central.readCompleted(.alpha, .failure(BlueZError(.failed, message: "Not connected")))
        #expect(failed.contains(.report(.quiet(robin, .unanswered(BlueZError(.failed, message: "Not connected"))))))
        #expect(failed.contains(.disconnect(device)))
        #expect(failed.last == .finish(.failed(.connectionLost)))
    }

    /// A read refused with an ATT error came from the bird: the link is alive.
    @Test func anATTErrorAnswersTheProbe() {
        var (m, _) = streaming(held())
        _ = m.window(notifications: 2)
        _ = m.window(notifications: 0)
        let refused = m.central.readCompleted(.alpha, .failure(BlueZError(.failed, message: "Operation failed with ATT error: 0x0e")))
        #expect(refused == [.cancelTimer(.probe), .report(.quiet(robin, .answered)), .armTimer(.quiet, .seconds(4))])
        #expect(m.central.currentDevice == device)
    }

    /// A bird that has said nothing since it was subscribed may be slow: the
    /// window doubles up to 2 × the longest gap (10 min) before it is probed.
    @Test func aBirdNeverHeardIsProbedOnlyAfterTheLongestWindow() {
        var (m, _) = streaming(held())
        var windows: [Duration] = []
        var fired = m.window(notifications: 0)
        while case .armTimer(.quiet, let next)? = fired.first, fired.count == 1 {
            windows.append(next)
            fired = m.window(notifications: 0)
        }
        #expect(windows == [4, 8, 16, 32, 64, 128, 256, 512, 1024, 1200].map { .seconds($0) })
        #expect(fired.first == .report(.quiet(robin, .probing(silentFor: .seconds(1200), usualGap: nil))))
    }

    /// Gaps are learned from what the windows hold, averaged, within 1 s and 10 min.
    @Test func theUsualGapFollowsTheBird() {
        var (m, _) = streaming(held(quietAfter: 4))
        #expect(m.window(notifications: 1) == [.armTimer(.quiet, .seconds(16))], "4 s for one: a gap of 4 s")
        // 16 s for one: a sample of 16 s, a quarter of the way from 4 s.
        #expect(m.window(notifications: 1) == [.armTimer(.quiet, .seconds(28))])
    }

    @Test func noWatchdogWhenTurnedOff() {
        for off in [0, nil] as [Int?] {
            let (_, started) = streaming(held(quietAfter: off))
            #expect(!started.contains { if case .armTimer(.quiet, _) = $0 { true } else { false } })
        }
    }

    /// A polled bird is read and let go: nothing to watch.
    @Test func aPolledBirdHasNoWatchdog() {
        let m = Machine(.watch(reconnect: true), fields: [.alpha]) {
            $0.address = robin.address
            $0.pollInterval = .seconds(30)
        }
        let (_, read) = streaming(m)
        #expect(!read.contains { if case .armTimer(.quiet, _) = $0 { true } else { false } })
    }
}

@Suite("Links that die quietly, in a fleet")
struct QuietFleetTests {
    /// `watch --all`: a held bird whose probe goes unanswered keeps its link
    /// counted until Connected turns false, and is connected to again when heard.
    @Test func aQuietBirdOfTheFleetIsConnectedToAgain() {
        var configuration = BirdCentral.Configuration(mode: .watch(reconnect: true), fields: [.alpha], scanTimeout: nil)
        configuration.quietAfter = 2
        var fleet = BirdFleet(configuration, all: true)
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        _ = fleet.deviceSighted(birdSighting)
        _ = fleet.connectReplied(0, .success(()))
        _ = fleet.servicesResolved(device: device, characteristics: [.alpha: alpha])
        _ = fleet.notifyStarted(0, .alpha, .success(()))
        #expect(fleet.readCompleted(0, .alpha, .success(Array("80".utf8))).contains(.armTimer(.machine(0, .quiet), .seconds(2))))
        _ = fleet.valueChanged(alpha, Array("81".utf8))
        _ = fleet.timerFired(.machine(0, .quiet))
        #expect(fleet.timerFired(.machine(0, .quiet)).contains(.read(0, .alpha, alpha)))
        let ended = fleet.timerFired(.machine(0, .probe))
        #expect(ended.contains(.disconnect(device)) && ended.contains(.report(.disconnected(robin))))
        #expect(fleet.linksUp == 1, "the link counts until it is down")
        _ = fleet.deviceDisconnected(device)
        #expect(fleet.linksUp == 0)
        let again = fleet.deviceSighted(birdSighting) + fleet.timerFired(.connectGap)
        #expect(again.contains(.connect(0, device)))
    }
}
