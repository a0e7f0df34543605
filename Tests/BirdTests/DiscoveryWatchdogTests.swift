import Bird
import BlueZ
import DBus
import Testing

private func bird(_ n: Int) -> (sighting: Sighting, path: ObjectPath, alpha: ObjectPath) {
    let path = ObjectPath("/org/bluez/hci0/dev_F0_0D_B1_7D_00_0\(n)")
    return (Sighting(device: path, address: BluetoothAddress(value: 0xF00D_B17D_0000 + UInt64(n))!, name: "Bird\(n)", rssi: -60, uuids: [BirdService.uuid]), path,
            ObjectPath("\(path)/service000a/char000f"))
}

private let watchAlpha = BirdCentral.Configuration(mode: .watch(reconnect: true), fields: [.alpha], scanTimeout: nil)
private let window = Duration.seconds(60)

/// What the watchdog did at the end of a window.
private enum Step: Equatable {
    case nothing
    /// Discovery restarted, said with `stalled`.
    case restart(stalled: Bool)
    /// The adapter's connected devices are to be counted (a stall).
    case check
}

private func step(_ actions: [BirdFleet.Action]) -> Step {
    #expect(actions.contains(.armTimer(.discoveryWatch, window)), "the next window: \(actions)")
    if actions.contains(where: { if case .checkDeafAdapter(adapter.path, _) = $0 { true } else { false } }) { return .check }
    guard actions.contains(.restartDiscovery(adapter.path)) else { return .nothing }
    let said = actions.compactMap { action -> Bool? in
        if case .report(.discoveryDeaf("hci0", _, let stalled, false)) = action { stalled } else { nil }
    }
    #expect(said.count == 1, "said once: \(actions)")
    return .restart(stalled: said.first ?? false)
}

private extension BirdFleet {
    mutating func stream(_ n: Int, id: MachineID) {
        let b = bird(n)
        _ = deviceSighted(b.sighting) + timerFired(.connectGap)
        _ = connectReplied(id, .success(()))
        _ = servicesResolved(device: b.path, characteristics: [.alpha: b.alpha])
        _ = notifyStarted(id, .alpha, .success(())) + readCompleted(id, .alpha, .success(Array("50".utf8)))
    }

    static func watched(streaming birds: Int) -> BirdFleet {
        var fleet = BirdFleet(watchAlpha, all: true, discoveryWatchdog: window)
        #expect(fleet.bluetoothReady(adapter: adapter, requested: nil).contains(.armTimer(.discoveryWatch, window)))
        for n in 1...birds { fleet.stream(n, id: n - 1) }
        return fleet
    }

    mutating func windowEnds() -> Step { step(timerFired(.discoveryWatch)) }
}

@Suite("Discovery: an adapter that hears nothing while a bird is looked for")
struct DiscoveryWatchdogTests {
    /// A bird's link is lost and it is looked for; the adapter hears nothing.
    /// A window counts once the bird was looked for at its start: then its
    /// discovery is restarted; the next, it is stalled and what is connected
    /// on it is counted; nothing connected, it is powered off and on (no
    /// attempt goes out meanwhile). Devices BlueZ had heard before, given as
    /// discovery starts, are no sign that it hears now.
    @Test func aDeafAdapterIsRestartedThenPoweredOffAndOn() throws {
        var fleet = BirdFleet.watched(streaming: 1)
        #expect(fleet.windowEnds() == .nothing, "the bird is held: silence is no sign")
        _ = fleet.deviceDisconnected(bird(1).path)
        #expect(fleet.windowEnds() == .nothing, "not looked for at the window's start")
        #expect(fleet.windowEnds() == .restart(stalled: false))
        // The bird as BlueZ had it before, given as discovery starts again: it
        // is connected to (Linux makes the link once it hears the bird), and
        // that attempt is no hearing, and still a bird looked for.
        let cached = fleet.deviceSighted(bird(1).sighting, live: false) + fleet.timerFired(.connectGap)
        let attempt = try #require(cached.lazy.compactMap { if case .connect(let id, bird(1).path) = $0 { id } else { nil } }.first, "\(cached)")
        #expect(fleet.windowEnds() == .check)
        let checked = fleet.deafAdapterChecked(adapter.path, silentFor: .seconds(120), connected: 0)
        #expect(checked == [
            .report(.discoveryDeaf(adapter: "hci0", silentFor: .seconds(120), stalled: true, powerCycle: true)), .resetAdapter(adapter.path),
        ])
        // Being powered off and on: the watchdog leaves it alone, and no
        // attempt goes out until it is back (the one out is answered first:
        // the gate is open, the adapter's reset keeps the next back).
        _ = fleet.connectReplied(attempt, .failure(BlueZError(.failed, message: "le-connection-abort-by-local")))
        #expect(fleet.windowEnds() == .nothing)
        let heard = fleet.deviceSighted(bird(1).sighting) + fleet.timerFired(.connectGap)
        #expect(!heard.contains { if case .connect = $0 { true } else { false } }, "\(heard)")
        _ = fleet.adapterPoweredOff(AdapterChoice(path: adapter.path, name: "hci0", powered: false))
        let back = fleet.bluetoothReady(adapter: adapter, requested: nil) + fleet.deviceSighted(bird(1).sighting)
            + fleet.timerFired(.connectGap)
        #expect(back.contains { if case .connect(_, bird(1).path) = $0 { true } else { false } }, "\(back)")
        #expect(fleet.windowEnds() == .nothing, "it hears again")
    }

    /// Something connected on a stalled adapter (the fleet's link, or another
    /// program's): its discovery is restarted again, not powered off. Stalls
    /// come after 2, 4 and 8 deaf windows. A device BlueZ had heard before,
    /// given as discovery starts, is no sign that it hears now, nor an RSSI
    /// invalidated; any Bird heard ends the count.
    @Test func anAdapterWithSomethingConnectedIsRestartedOnlyAndStallsLessOften() {
        var fleet = BirdFleet.watched(streaming: 2)
        _ = fleet.deviceDisconnected(bird(2).path)
        #expect(fleet.windowEnds() == .nothing, "heard in this window")
        let steps = (1...8).map { _ in fleet.windowEnds() }
        #expect(steps == [.restart(stalled: false), .check, .restart(stalled: false), .check,
                          .restart(stalled: false), .restart(stalled: false), .restart(stalled: false), .check])
        let checked = fleet.deafAdapterChecked(adapter.path, silentFor: .seconds(480), connected: 1)
        #expect(checked == [
            .report(.discoveryDeaf(adapter: "hci0", silentFor: .seconds(480), stalled: true, powerCycle: false)),
            .restartDiscovery(adapter.path),
        ])
        _ = fleet.deviceSighted(bird(1).sighting, live: false)
        var invalidated = bird(2).sighting
        invalidated.rssi = nil
        _ = fleet.deviceSighted(invalidated)
        #expect(fleet.windowEnds() == .restart(stalled: false), "the 9th deaf window")
        _ = fleet.deviceSighted(bird(1).sighting)
        #expect(fleet.windowEnds() == .nothing)
        #expect(fleet.windowEnds() == .restart(stalled: false), "a first deaf window again")
    }

    /// An adapter that never heard a Bird is not watched (no bird may be in
    /// its range), though a bird BlueZ knew of is being connected to;
    /// without the watchdog nothing is armed.
    @Test func anAdapterThatNeverHeardABirdIsNotWatched() {
        var fleet = BirdFleet(watchAlpha, all: true, discoveryWatchdog: window)
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        let cached = fleet.deviceSighted(bird(1).sighting, live: false) + fleet.timerFired(.connectGap)
        #expect(cached.contains { if case .connect(_, bird(1).path) = $0 { true } else { false } }, "\(cached)")
        #expect((1...3).map { _ in fleet.windowEnds() } == [.nothing, .nothing, .nothing])
        var unwatched = BirdFleet(watchAlpha, all: true)
        #expect(!unwatched.bluetoothReady(adapter: adapter, requested: nil).contains { if case .armTimer(.discoveryWatch, _) = $0 { true } else { false } })
    }

    /// A restart refused is said; bluetoothd gone forgets what was heard.
    @Test func aRefusedRestartIsSaidAndBluetoothdGoneForgetsWhatWasHeard() {
        var fleet = BirdFleet.watched(streaming: 1)
        let refused = BlueZError(.failed, name: "org.bluez.Error.Failed", message: "No discovery started")
        #expect(fleet.discoveryRestartFailed(adapter.path, refused) == [.report(.waiting("could not restart discovery on hci0: \(refused)"))])
        _ = fleet.bluetoothUnavailable(BlueZError(.bluetoothdNotRunning, name: "org.freedesktop.DBus.Error.ServiceUnknown", message: ""))
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        _ = fleet.deviceSighted(bird(1).sighting, live: false)
        #expect((1...3).map { _ in fleet.windowEnds() } == [.nothing, .nothing, .nothing], "no Bird heard since bluetoothd came back")
    }
}
