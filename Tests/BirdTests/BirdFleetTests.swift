import Bird
import BlueZ
import DBus
import Testing

private let wrenDevice: ObjectPath = "/org/bluez/hci0/dev_F0_0D_B1_7D_00_02"
private let wrenSighting = Sighting(
    device: wrenDevice, address: "F0:0D:B1:7D:00:02", name: "Wren", rssi: -70, uuids: [BirdService.uuid])
private let wren = BirdCentral.Peripheral(path: wrenDevice, address: "F0:0D:B1:7D:00:02", name: "Wren")
private let wrenAlpha = ObjectPath("\(wrenDevice)/service000a/char000f")
private let watchAlpha = BirdCentral.Configuration(
    mode: .watch(reconnect: true), fields: [.alpha], scanTimeout: .seconds(5), duration: .seconds(60))

private func reports(_ actions: [BirdFleet.Action]) -> [BirdCentral.Report] {
    actions.compactMap { if case .report(let r) = $0 { r } else { nil } }
}

/// A fleet brought to a state through real events.
private extension BirdFleet {
    /// `--all` with Robin (machine 0) and Wren (machine 1) streaming alpha.
    static func streamingTwo(_ configuration: BirdCentral.Configuration = watchAlpha) -> BirdFleet {
        var fleet = BirdFleet(configuration, all: true)
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        for (id, sighting, path) in [(0, birdSighting, device), (1, wrenSighting, wrenDevice)] {
            _ = fleet.deviceSighted(sighting)
            _ = fleet.connectReplied(id, .success(()))
            let alpha = ObjectPath("\(path)/service000a/char000f")
            _ = fleet.servicesResolved(device: path, characteristics: [.alpha: alpha])
            _ = fleet.notifyStarted(id, .alpha, .success(()))
            _ = fleet.readCompleted(id, .alpha, .success(Array("80".utf8)))
        }
        return fleet
    }
}

@Suite("The fleet: one machine, or one per Bird with --all")
struct BirdFleetTests {
    // MARK: One bird

    @Test func oneBirdsActionsAreTaggedAndItsEndIsTheCommands() {
        var fleet = BirdFleet(BirdCentral.Configuration(mode: .read, fields: [.alpha]))
        #expect(fleet.bluetoothReady(adapter: adapter, requested: nil).contains(.startScanning(0, lookUpKnown: nil)))
        #expect(fleet.deviceSighted(birdSighting).contains(.armTimer(.machine(0, .listen), .seconds(1))))
        let found = fleet.timerFired(.machine(0, .listen))
        #expect(found.contains(.stopScanning))
        #expect(found.contains(.connect(0, device)))
        #expect(found.contains(.armTimer(.machine(0, .connect), .seconds(10))))
        _ = fleet.connectReplied(0, .success(()))
        #expect(fleet.servicesResolved(device: device, characteristics: characteristics) == [
            .cancelTimer(.machine(0, .connect)), .cancelTimer(.machine(0, .services)), .read(0, .alpha, characteristics[.alpha]!),
        ])
        let done = fleet.readCompleted(0, .alpha, .success(Array("80".utf8)))
        #expect(done.suffix(2) == [.disconnect(device), .finish(.success)])
        #expect(fleet.isFinished)
        #expect(fleet.deviceSighted(birdSighting).isEmpty)
    }

    @Test func onlyTheFirstScanOfABirdAskedForByAddressLooksInBlueZsCache() {
        var fleet = BirdFleet(BirdCentral.Configuration(mode: .watch(reconnect: true), fields: [.alpha], address: robin.address))
        #expect(fleet.bluetoothReady(adapter: adapter, requested: nil).contains(.startScanning(0, lookUpKnown: robin.address)))
        _ = fleet.deviceKnown(0, birdSighting)
        _ = fleet.connectReplied(0, .success(()))
        _ = fleet.servicesResolved(device: device, characteristics: characteristics)
        // The link drops: the rescan listens (the cache would offer the same
        // bird, which the machine no longer takes from it).
        let lost = fleet.deviceDisconnected(device)
        #expect(lost.contains(.startScanning(0, lookUpKnown: nil)), "\(lost)")
    }

    @Test func ctrlCEndsAReadAsInterrupted() {
        var fleet = BirdFleet(BirdCentral.Configuration(mode: .read))
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        #expect(fleet.stopRequested().suffix(2) == [.stopScanning, .finish(.interrupted)])
    }

    // MARK: --all

    @Test func allKeepsDiscoveryOnAndArmsItsOwnDeadlines() {
        var fleet = BirdFleet(watchAlpha, all: true)
        #expect(fleet.bluetoothReady(adapter: adapter, requested: nil) == [
            .startScanning(nil, lookUpKnown: nil), .armTimer(.fleet(.scan), .seconds(5)),
            .armTimer(.fleet(.duration), .seconds(60)),
        ])
        // Ready again (the adapter was powered on again): no second set of deadlines.
        _ = fleet.adapterPoweredOff(AdapterChoice(path: adapter.path, name: "hci0", powered: false))
        // (And the first connection attempt waits a random gap: no storm after an outage.)
        let again = fleet.bluetoothReady(adapter: adapter, requested: nil)
        #expect(again.first == .startScanning(nil, lookUpKnown: nil) && again.count == 2)
        guard case .armTimer(.connectGap, let gap) = again.last else {
            Issue.record("\(again)")
            return
        }
        #expect(gap >= .milliseconds(100) && gap <= .milliseconds(200))
    }

    @Test func eachBirdHeardGetsAMachineThatLeavesDiscoveryOn() {
        var fleet = BirdFleet(watchAlpha, all: true)
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        let robinFound = fleet.deviceSighted(birdSighting)
        #expect(robinFound.first == .cancelTimer(.fleet(.scan)))
        #expect(robinFound.contains(.connect(0, device)))
        #expect(robinFound.contains(.report(.found(robin, rssi: -50))))
        #expect(!robinFound.contains(.stopScanning))
        // Heard again: the machine following it is not doubled.
        #expect(!fleet.deviceSighted(birdSighting).contains { if case .connect = $0 { true } else { false } })
        // One bird connected to at a time: Wren waits for Robin's link.
        #expect(fleet.deviceSighted(wrenSighting).isEmpty)
        #expect(fleet.birdsRemembered == 2)
        let wrenFound = fleet.connectReplied(0, .success(())) + fleet.timerFired(.connectGap)
        #expect(wrenFound.contains(.connect(1, wrenDevice)))
        #expect(fleet.currentDevices == [device, wrenDevice])
    }

    /// A crowd of birds heard while one is being connected to costs a short
    /// line, not a machine each; the line moves as each link comes up or fails.
    @Test func birdsHeardWhileOneIsConnectingWaitInAShortLine() {
        var fleet = BirdFleet(watchAlpha, all: true)
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        _ = fleet.deviceSighted(birdSighting)
        for i in 0..<1000 {
            let hex = String(0x1_0000 + i, radix: 16, uppercase: true).suffix(4)
            let address = BluetoothAddress("C0:00:00:00:\(hex.prefix(2)):\(hex.suffix(2))")!
            let path = ObjectPath("/org/bluez/hci0/dev_C0_00_00_00_\(hex.prefix(2))_\(hex.suffix(2))")
            #expect(fleet.deviceSighted(Sighting(device: path, address: address, name: nil, rssi: -60, uuids: [BirdService.uuid])).isEmpty)
        }
        #expect(fleet.birdsRemembered == 1 + BirdFleet.waitingLimit)
        // Robin gives up: the first in line is connected to, one at a time.
        let next = fleet.connectReplied(0, .failure(BlueZError(.failed, message: "le-connection-abort-by-remote")))
            + fleet.timerFired(.connectGap)
        #expect(next.filter { if case .connect = $0 { true } else { false } } == [.connect(1, "/org/bluez/hci0/dev_C0_00_00_00_00_00")])
        #expect(fleet.birdsRemembered == BirdFleet.waitingLimit)
    }

    @Test func aNotificationIsTheReadingOfTheBirdItCameFrom() {
        var fleet = BirdFleet.streamingTwo()
        #expect(reports(fleet.valueChanged(wrenAlpha, Array("55".utf8))) == [
            .reading(wren, .alpha(percent: 55), raw: Array("55".utf8), notified: true)
        ])
    }

    @Test func theCountIsForTheWholeFleetAndStopsEveryBird() {
        var configuration = watchAlpha
        configuration.maximumReadings = 3  // two first reads, then one notification
        var fleet = BirdFleet.streamingTwo(configuration)
        let actions = fleet.valueChanged(wrenAlpha, Array("55".utf8))
        #expect(reports(actions).count == 1)
        #expect(actions.first.map { if case .report(.reading) = $0 { true } else { false } } == true)
        for path in [characteristics[.alpha]!, wrenAlpha] { #expect(actions.contains(.stopNotify(path))) }
        #expect(actions.contains(.disconnect(device)) && actions.contains(.disconnect(wrenDevice)))
        #expect(actions.suffix(2) == [.stopScanning, .finish(.success)])
        #expect(fleet.isFinished)
    }

    @Test func oneBirdGivingUpIsReportedAndItCanBeFoundAgain() {
        var fleet = BirdFleet(watchAlpha, all: true)
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        _ = fleet.deviceSighted(birdSighting)
        let failed = fleet.connectReplied(0, .failure(BlueZError(.failed, message: "le-connection-abort-by-remote")))
        #expect(reports(failed) == [.gaveUp(.connectFailed(BlueZError(.failed, message: "le-connection-abort-by-remote")), bird: robin)])
        #expect(!fleet.isFinished && !fleet.runs(0))
        #expect((fleet.deviceSighted(birdSighting) + fleet.timerFired(.connectGap)).contains(.connect(1, device)))
    }

    @Test func theFindDeadlineEndsOnlyAnEmptyFleet() {
        var empty = BirdFleet(watchAlpha, all: true)
        _ = empty.bluetoothReady(adapter: adapter, requested: nil)
        #expect(empty.timerFired(.fleet(.scan)) == [.stopScanning, .finish(.failed(.notFound))])
        var busy = BirdFleet(watchAlpha, all: true)
        _ = busy.bluetoothReady(adapter: adapter, requested: nil)
        _ = busy.deviceSighted(birdSighting)
        #expect(busy.timerFired(.fleet(.scan)).isEmpty)
        #expect(busy.timerFired(.fleet(.duration)).last == .finish(.success))
    }

    @Test func allFailsAtOnceWithoutAUsableAdapterOrBluetoothd() {
        var off = BirdFleet(watchAlpha, all: true)
        let offline = AdapterChoice(path: adapter.path, name: "hci0", powered: false)
        #expect(off.bluetoothReady(adapter: offline, requested: nil).last == .finish(.failed(.adapterOff("hci0"))))
        var missing = BirdFleet(watchAlpha, all: true)
        #expect(missing.bluetoothReady(adapter: nil, requested: "hci7").last == .finish(.failed(.noAdapter("hci7"))))
        var gone = BirdFleet(watchAlpha, all: true)
        let error = BlueZError(.bluetoothdNotRunning)
        #expect(gone.bluetoothUnavailable(error).last == .finish(.failed(.bluetoothUnavailable(error))))
        var refused = BirdFleet(watchAlpha, all: true)
        _ = refused.bluetoothReady(adapter: adapter, requested: nil)
        let notReady = BlueZError(.notReady)
        #expect(refused.scanFailed(nil, notReady).last == .finish(.failed(.operationFailed("start discovery", notReady))))
    }

    @Test func laterOutagesAreWaitedOut() {
        var fleet = BirdFleet.streamingTwo()
        let gone = fleet.bluetoothUnavailable(BlueZError(.bluetoothdNotRunning))
        #expect(reports(gone).contains(.disconnected(robin)) && reports(gone).contains(.disconnected(wren)))
        #expect(!fleet.isFinished)
        let back = fleet.bluetoothReady(adapter: adapter, requested: nil)
        #expect(back.first == .startScanning(nil, lookUpKnown: nil))
        #expect(!back.contains { if case .armTimer(.fleet, _) = $0 { true } else { false } })
    }

    @Test func ctrlCStopsEveryBirdAndEndsWell() {
        var fleet = BirdFleet.streamingTwo()
        let actions = fleet.stopRequested()
        #expect(actions.contains(.disconnect(device)) && actions.contains(.disconnect(wrenDevice)))
        #expect(actions.filter { $0 == .stopScanning }.count == 1)
        #expect(actions.last == .finish(.success))
        #expect(fleet.stopRequested().isEmpty)
    }

    // MARK: --all: pairing, per bird

    private static let notPaired = BlueZError(.notPermitted, name: "org.bluez.Error.NotPermitted", message: "Not paired")

    /// Robin and Wren both named, both asking for pairing at once: each
    /// machine pairs on its own, and each answer reaches its own.
    @Test func birdsAskingForPairingAtOncePairEachOnItsOwn() {
        var configuration = watchAlpha
        configuration.pairsWith = [robin.address, wren.address]
        var fleet = BirdFleet.streamingTwo(configuration)
        _ = fleet.deviceDisconnected(device)
        _ = fleet.deviceDisconnected(wrenDevice)
        for (id, sighting, path) in [(0, birdSighting, device), (1, wrenSighting, wrenDevice)] {
            _ = fleet.deviceSighted(sighting)
            _ = fleet.connectReplied(id, .success(()))
            _ = fleet.servicesResolved(device: path, characteristics: [.alpha: ObjectPath("\(path)/service000a/char000f")])
            #expect(fleet.notifyStarted(id, .alpha, .failure(Self.notPaired)).contains(.pair(id, path)))
        }
        #expect(fleet.pairing(device) == robin && fleet.pairing(wrenDevice) == wren)
        // Wren's pairing ends first (Paired), then Robin's (Pair's answer): both stream.
        #expect(fleet.devicePaired(wrenDevice).contains(.startNotify(1, .alpha, wrenAlpha)))
        #expect(fleet.pairCompleted(0, .success(())).contains(.startNotify(0, .alpha, characteristics[.alpha]!)))
        #expect(fleet.pairing(device) == nil && fleet.pairing(wrenDevice) == nil)
    }

    /// A bird nobody named that asks for pairing is let go with a report
    /// saying what to do, and not connected to again until forgotten.
    @Test func aStrangerAskingForPairingIsDeclinedAndLeftAlone() {
        var fleet = BirdFleet(watchAlpha, all: true, forgetAfter: .seconds(80))
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        _ = fleet.deviceSighted(birdSighting)
        _ = fleet.connectReplied(0, .success(()))
        _ = fleet.servicesResolved(device: device, characteristics: characteristics)
        let refused = fleet.notifyStarted(0, .alpha, .failure(Self.notPaired))
        #expect(!refused.contains { if case .pair = $0 { true } else { false } })
        #expect(refused.contains(.disconnect(device)))
        // Given up, and forgotten at once: a stranger is not ours (a gateway clears what it published).
        #expect(reports(refused).suffix(2) == [.gaveUp(.pairingNotNamed(robin, Self.notPaired), bird: robin), .forgotten(address: robin.address)])
        #expect(fleet.deviceSighted(birdSighting).isEmpty, "heard again: left alone")
        for _ in 1..<BirdFleet.ticksToForget { _ = fleet.timerFired(.forgetTick) }
        #expect(fleet.deviceSighted(birdSighting).isEmpty)
        _ = fleet.timerFired(.forgetTick)
        #expect(fleet.birdsRemembered == 0)
        #expect((fleet.deviceSighted(birdSighting) + fleet.timerFired(.connectGap)).contains(.connect(1, device)), "a chance again once forgotten")
    }

    // MARK: --all: forgetting birds no longer heard

    @Test func aBirdNeitherHeardNorConnectedIsForgotten() {
        var fleet = BirdFleet(watchAlpha, all: true, forgetAfter: .seconds(80))
        #expect(fleet.bluetoothReady(adapter: adapter, requested: nil).contains(.armTimer(.forgetTick, .seconds(10))))
        for (id, sighting, path) in [(0, birdSighting, device), (1, wrenSighting, wrenDevice)] {
            _ = fleet.deviceSighted(sighting)
            _ = fleet.connectReplied(id, .success(()))
            _ = fleet.servicesResolved(device: path, characteristics: [.alpha: ObjectPath("\(path)/service000a/char000f")])
            _ = fleet.notifyStarted(id, .alpha, .success(()))
        }
        // Wren's link is lost; Robin's stays up though Robin no longer advertises.
        _ = fleet.deviceDisconnected(wrenDevice)
        for _ in 1..<BirdFleet.ticksToForget { #expect(reports(fleet.timerFired(.forgetTick)).isEmpty) }
        let tick = fleet.timerFired(.forgetTick)
        #expect(reports(tick) == [.forgotten(address: wren.address)])
        #expect(tick.last == .armTimer(.forgetTick, .seconds(10)))
        #expect(fleet.birdsRemembered == 1 && fleet.currentDevices == [device])
        // Heard again later: followed again, by a new machine.
        #expect((fleet.deviceSighted(wrenSighting) + fleet.timerFired(.connectGap)).contains(.connect(2, wrenDevice)))
    }

    @Test func aBirdHeardWithinTheTimeIsKept() {
        var fleet = BirdFleet(watchAlpha, all: true, forgetAfter: .seconds(80))
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        _ = fleet.deviceSighted(birdSighting)
        _ = fleet.connectReplied(0, .failure(BlueZError(.failed, message: "le-connection-abort-by-remote")))
        _ = fleet.deviceSighted(birdSighting)  // machine 1, connecting
        _ = fleet.deadlinePassed(1, up: [])  // not connected: scanning for it
        for _ in 0..<(3 * BirdFleet.ticksToForget) {
            _ = fleet.deviceSighted(birdSighting)
            #expect(reports(fleet.timerFired(.forgetTick)).isEmpty)
        }
        #expect(fleet.birdsRemembered == 1, "the bird heard all along is still followed")
    }
}
