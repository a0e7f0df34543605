import Bird
import BlueZ
import DBus
import Testing

@Suite("BirdCentral state machine")
struct BirdCentralTests {
    // MARK: Waiting for Bluetooth

    @Test func readyPoweredAdapterStartsScanningWithTheFindDeadline() {
        var m = Machine()
        #expect(m.central.bluetoothReady(adapter: adapter) == [.startScanning, .armTimer(.scan, .seconds(10))])
    }

    @Test func watchArmsItsDurationOnce() {
        var m = Machine(.watch(reconnect: true)) { $0.scanTimeout = nil; $0.duration = .seconds(5) }
        #expect(m.central.bluetoothReady(adapter: adapter) == [.armTimer(.duration, .seconds(5)), .startScanning])
    }

    @Test func noAdapterAtStartFails() {
        var m = Machine()
        #expect(m.central.bluetoothReady(adapter: nil) == [.finish(.failed(.noAdapter(nil)))])
        #expect(m.central.isFinished)
    }

    @Test func poweredOffAtStartFails() {
        var m = Machine(.watch(reconnect: true))
        let off = AdapterChoice(path: adapter.path, name: "hci0", powered: false)
        #expect(m.central.bluetoothReady(adapter: off) == [.finish(.failed(.adapterOff("hci0")))])
    }

    @Test func bluetoothdAbsentAtStartFails() {
        var m = Machine(.watch(reconnect: true))
        let error = BlueZError(.bluetoothdNotRunning)
        #expect(m.central.bluetoothUnavailable(error) == [.finish(.failed(.bluetoothUnavailable(error)))])
    }

    @Test func accessDeniedAtStartIsPermissionDenied() {
        var m = Machine()
        let error = BlueZError(.permissionDenied, name: "org.freedesktop.DBus.Error.AccessDenied")
        #expect(m.central.bluetoothUnavailable(error) == [.finish(.failed(.permissionDenied(error)))])
    }

    // MARK: Scanning

    @Test func theBirdAskedForIsConnectedToAtOnceWithADeadline() {
        var m = Machine { $0.address = robin.address }.scanning()
        #expect(m.central.deviceSighted(birdSighting) == [
            .cancelTimer(.scan), .stopScanning, .report(.found(robin, rssi: -50)),
            .armTimer(.connect, .seconds(10)), .connect(device),
        ])
    }

    // MARK: Without an address: the nearest Bird heard in the listening window

    static func heard(_ n: Int, rssi: Int16?, name: String? = nil) -> Sighting {
        Sighting(device: ObjectPath("/org/bluez/hci0/dev_F0_0D_B1_7D_00_0\(n)"), address: BluetoothAddress(value: 0xF00D_B17D_0000 + UInt64(n))!,
                 name: name, rssi: rssi, uuids: [BirdService.uuid])
    }

    static func peripheral(_ n: Int, name: String? = nil) -> BirdCentral.Peripheral {
        BirdCentral.Peripheral(path: ObjectPath("/org/bluez/hci0/dev_F0_0D_B1_7D_00_0\(n)"),
                               address: BluetoothAddress(value: 0xF00D_B17D_0000 + UInt64(n))!, name: name)
    }

    @Test func theFirstBirdHeardOpensTheListeningWindowAndTheStrongestOnAverageIsTaken() {
        var m = Machine().scanning()
        #expect(m.central.deviceSighted(Self.heard(1, rssi: -80, name: "Far")) == [
            .cancelTimer(.scan), .armTimer(.listen, .seconds(1)),
        ])
        #expect(m.central.deviceSighted(Self.heard(2, rssi: -40, name: "Near")) == [])
        #expect(m.central.deviceSighted(Self.heard(2, rssi: -60)) == [])  // mean -50
        #expect(m.central.deviceSighted(Self.heard(1, rssi: -52)) == [])  // mean -66
        #expect(m.central.timerFired(.listen) == [
            .cancelTimer(.scan), .stopScanning, .report(.found(Self.peripheral(2, name: "Near"), rssi: -50)),
            .armTimer(.connect, .seconds(10)), .connect(ObjectPath("/org/bluez/hci0/dev_F0_0D_B1_7D_00_02")),
        ])
        #expect(m.central.deviceSighted(Self.heard(3, rssi: -20)) == [], "the window is closed")
    }

    @Test func aBirdHeardWithoutRSSIIsTakenOnlyWhenNoneHadItAndEqualsGoToTheFirstHeard() {
        var m = Machine().scanning()
        _ = m.central.deviceSighted(Self.heard(1, rssi: nil))
        _ = m.central.deviceSighted(Self.heard(2, rssi: -90))
        #expect(m.central.timerFired(.listen).contains(.connect(ObjectPath("/org/bluez/hci0/dev_F0_0D_B1_7D_00_02"))))
        var blind = Machine().scanning()
        _ = blind.central.deviceSighted(Self.heard(1, rssi: nil))
        _ = blind.central.deviceSighted(Self.heard(2, rssi: nil))
        #expect(blind.central.timerFired(.listen).contains(.report(.found(Self.peripheral(1), rssi: nil))))
        var equal = Machine().scanning()
        _ = equal.central.deviceSighted(Self.heard(2, rssi: -50))
        _ = equal.central.deviceSighted(Self.heard(1, rssi: -50))
        #expect(equal.central.timerFired(.listen).contains(.connect(ObjectPath("/org/bluez/hci0/dev_F0_0D_B1_7D_00_02"))))
    }

    @Test func birdsBelowTheMinimumRSSIAreNotCandidates() {
        var m = Machine { $0.minimumRSSI = -60 }.scanning()
        #expect(m.central.deviceSighted(Self.heard(1, rssi: -80)) == [])
        #expect(m.central.deviceSighted(Self.heard(2, rssi: -55)) == [.cancelTimer(.scan), .armTimer(.listen, .seconds(1))])
        _ = m.central.deviceSighted(Self.heard(1, rssi: -30))  // came nearer: now a candidate
        #expect(m.central.timerFired(.listen).contains(.report(.found(Self.peripheral(1), rssi: -30))))
    }

    @Test func ctrlCWhileListeningStopsDiscoveryAndTheWindow() {
        var m = Machine().scanning()
        _ = m.central.deviceSighted(Self.heard(1, rssi: -50))
        let stop = m.central.stopRequested()
        #expect(stop.contains(.cancelTimer(.listen)) && stop.suffix(2) == [.stopScanning, .finish(.interrupted)])
        #expect(m.central.timerFired(.listen) == [])
    }

    @Test func withoutAWindowTheFirstBirdHeardIsTaken() {
        var m = Machine { $0.listeningWindow = nil }.scanning()
        #expect(m.central.deviceSighted(Self.heard(1, rssi: -90)).contains(.connect(ObjectPath("/org/bluez/hci0/dev_F0_0D_B1_7D_00_01"))))
    }

    @Test func nonBirdsOtherAddressesAndWeakSignalsAreIgnored() {
        var m = Machine { $0.address = "F0:0D:B1:7D:00:01"; $0.minimumRSSI = -60 }.scanning()
        var other = birdSighting
        other.uuids = ["0000180f-0000-1000-8000-00805f9b34fb"]
        #expect(m.central.deviceSighted(other) == [])
        var elsewhere = birdSighting
        elsewhere.address = "AA:AA:AA:AA:AA:AA"
        #expect(m.central.deviceSighted(elsewhere) == [])
        var weak = birdSighting
        weak.rssi = -80
        #expect(m.central.deviceSighted(weak) == [])
        var lower = birdSighting
        lower.address = "f0:0d:b1:7d:00:01"
        #expect(m.central.deviceSighted(lower).contains(.connect(device)))
    }

    @Test func sightingsBeforeScanningDoNotCount() {
        var m = Machine()
        #expect(m.central.deviceSighted(birdSighting) == [])
    }

    @Test func findDeadlineFails() {
        var m = Machine().scanning()
        #expect(m.central.timerFired(.scan) == [.stopScanning, .finish(.failed(.notFound))])
    }

    @Test func discoveryRefusedFails() {
        var m = Machine().scanning()
        let error = BlueZError(.failed, message: "boom")
        #expect(m.central.scanFailed(error).last == .finish(.failed(.operationFailed("start discovery", error))))
        var off = Machine().scanning()
        #expect(off.central.scanFailed(BlueZError(.notReady)) == [])
    }

    // MARK: A bird known from BlueZ's cache

    @Test func aKnownBirdAskedForByAddressIsConnectedWithoutDiscovery() {
        var m = Machine { $0.address = "F0:0D:B1:7D:00:01" }.scanning()
        var known = birdSighting
        known.rssi = nil
        #expect(m.central.deviceKnown(known) == [
            .cancelTimer(.scan), .report(.found(robin, rssi: nil)),
            .armTimer(.connect, BirdCentral.unheardConnectTimeout), .connect(device),
        ])
        #expect(m.central.connectReplied(.success(())) == [.report(.connected(robin))])
    }

    @Test func aKnownBirdIsOnlyTakenForAnAddressedCommand() {
        var any = Machine().scanning()
        #expect(any.central.deviceKnown(birdSighting) == [])
        var other = Machine { $0.address = "AA:AA:AA:AA:AA:AA" }.scanning()
        #expect(other.central.deviceKnown(birdSighting) == [])
    }

    @Test func aKnownBirdThatDoesNotConnectIsLookedForInstead() {
        var failed = Machine { $0.address = "F0:0D:B1:7D:00:01" }.scanning()
        _ = failed.central.deviceKnown(birdSighting)
        let actions = failed.central.connectReplied(.failure(transient))
        #expect(actions.contains(.disconnect(device)))
        #expect(Array(actions.suffix(2)) == [.startScanning, .armTimer(.scan, .seconds(10))])
        // Heard now: an ordinary connection, with retries and the full deadline.
        #expect(failed.central.deviceSighted(birdSighting).contains(.armTimer(.connect, .seconds(10))))
        #expect(failed.central.connectReplied(.failure(transient)).last == .armTimer(.retry, .milliseconds(250)))

        var slow = Machine { $0.address = "F0:0D:B1:7D:00:01" }.scanning()
        _ = slow.central.deviceKnown(birdSighting)
        let timedOut = slow.central.timerFired(.connect)
        #expect(timedOut.contains(.disconnect(device)))
        #expect(timedOut.contains(.startScanning))
        #expect(slow.central.timerFired(.scan) == [.stopScanning, .finish(.failed(.notFound))])
    }

    // MARK: Connecting

    @Test func transientFailuresRetryWithDoublingBackoffThenGiveUp() {
        var m = Machine().connecting()
        #expect(m.central.connectReplied(.failure(transient)) == [
            .report(.retrying(robin, attempt: 2, transient)), .armTimer(.retry, .milliseconds(250)),
        ])
        #expect(m.central.timerFired(.retry) == [.connect(device)])
        #expect(m.central.connectReplied(.failure(transient)).last == .armTimer(.retry, .milliseconds(500)))
        _ = m.central.timerFired(.retry)
        let inProgress = BlueZError(.inProgress)
        #expect(m.central.connectReplied(.failure(inProgress)).last == .armTimer(.retry, .milliseconds(1000)))
        _ = m.central.timerFired(.retry)
        #expect(m.central.connectReplied(.failure(transient)).last == .finish(.failed(.connectFailed(transient))))
    }

    @Test func aHardConnectFailureFails() {
        var m = Machine().connecting()
        let error = BlueZError(.failed, message: "Software caused connection abort")
        #expect(m.central.connectReplied(.failure(error)).last == .finish(.failed(.connectFailed(error))))
    }

    @Test func theConnectDeadlineCancelsThePendingConnection() {
        var m = Machine().connecting()
        let actions = m.central.timerFired(.connect)
        #expect(actions.contains(.disconnect(device)))
        #expect(actions.last == .finish(.failed(.connectTimeout)))
    }

    /// bluetoothd 5.82 on a bird gone before the ATT channel was up: Connected
    /// went true and false, Connect failed (transient), the retries found no
    /// link. The deadline says the connection was lost, not that none came.
    @Test func aLinkThatCameAndWentWhileConnectingIsALostConnectionAtTheDeadline() {
        var m = Machine().connecting()
        #expect(m.central.deviceDisconnected(device) == [])
        _ = m.central.connectReplied(.failure(transient))
        #expect(m.central.timerFired(.connect).last == .finish(.failed(.connectionLost)))
    }

    /// bluetoothd 5.82 on a bird gone before the ATT channel was up, the
    /// other order: the link's end answers the pending Connect ("br-connection-
    /// canceled") before Connected turns false. Tried again like any
    /// transient failure; when the attempts run out, the connection was lost
    /// (the VM tier's bumble_read_link_loss saw "connection failed" instead).
    @Test func aConnectCanceledAsItsLinkWentIsTriedAgainThenALostConnection() {
        var m = Machine().connecting()
        let canceled = BlueZError(.failed, name: "org.bluez.Error.Failed", message: "br-connection-canceled")
        #expect(m.central.connectReplied(.failure(canceled)) == [
            .report(.retrying(robin, attempt: 2, canceled)), .armTimer(.retry, .milliseconds(250)),
        ])
        for backoff in [500, 1000] {
            #expect(m.central.timerFired(.retry) == [.connect(device)])
            #expect(m.central.connectReplied(.failure(canceled)).last == .armTimer(.retry, .milliseconds(backoff)))
        }
        #expect(m.central.timerFired(.retry) == [.connect(device)])
        #expect(m.central.connectReplied(.failure(canceled)).last == .finish(.failed(.connectionLost)))
    }

    @Test func theDeadlineCoversServiceResolution() {
        var m = Machine().resolving()
        let actions = m.central.timerFired(.connect)
        #expect(actions.contains(.disconnect(device)))
        #expect(actions.contains(.report(.disconnected(robin))))
        #expect(actions.last == .finish(.failed(.connectTimeout)))
    }

    /// The deadline is told which devices are connected: links up besides
    /// this one say the controller may be at its limit; its own does not count.
    @Test func aConnectDeadlineWithOtherLinksUpSaysSo() {
        var m = Machine().connecting()
        let other: ObjectPath = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"
        #expect(m.central.connectDeadlinePassed(connectedDevices: [other], adapter: "hci0").last
            == .finish(.failed(.connectTimeoutWithLinksUp(adapter: "hci0", links: 1))))
        var alone = Machine().resolving()
        #expect(alone.central.connectDeadlinePassed(connectedDevices: [device], adapter: "hci0").last
            == .finish(.failed(.connectTimeout)))
    }

    @Test func connectedReportsAndWaitsForServices() {
        var m = Machine().connecting()
        #expect(m.central.connectReplied(.success(())) == [.report(.connected(robin))])
    }

    @Test func resolvedServicesAreRead() {
        var m = Machine().resolving()
        #expect(m.central.servicesResolved(device: device, characteristics: characteristics) == [
            .cancelTimer(.connect), .cancelTimer(.services), .read(.name, characteristics[.name]!),
            .read(.color, characteristics[.color]!), .read(.alpha, characteristics[.alpha]!),
        ])
    }

    @Test func servicesResolvedBeforeTheConnectReplyAlsoCounts() {
        var m = Machine(fields: [.name]).connecting()
        #expect(m.central.servicesResolved(device: device, characteristics: characteristics) == [
            .report(.connected(robin)), .cancelTimer(.connect), .cancelTimer(.services),
            .read(.name, characteristics[.name]!),
        ])
        #expect(m.central.connectReplied(.success(())) == [])
    }

    @Test func characteristicsAppearingAfterServicesResolvedAreWaitedFor() {
        var m = Machine().resolving()
        let partial: [BirdField: ObjectPath] = [.name: characteristics[.name]!]
        #expect(m.central.servicesResolved(device: device, characteristics: partial) == [
            .cancelTimer(.connect), .armTimer(.services, .seconds(2)),
        ])
        #expect(m.central.servicesResolved(device: device, characteristics: characteristics).last
            == .read(.alpha, characteristics[.alpha]!))
    }

    @Test func missingCharacteristicsFailAfterTheGrace() {
        var m = Machine().resolving()
        _ = m.central.servicesResolved(device: device, characteristics: [.name: characteristics[.name]!])
        let actions = m.central.timerFired(.services)
        #expect(actions.contains(.disconnect(device)))
        #expect(actions.last == .finish(.failed(.serviceMissing([.name, .color, .alpha]))))
    }

    @Test func losingTheLinkWhileResolvingFailsARead() {
        var m = Machine().resolving()
        let actions = m.central.deviceDisconnected(device)
        #expect(actions.contains(.report(.disconnected(robin))))
        #expect(actions.last == .finish(.failed(.connectionLost)))
    }

    @Test func theDeviceVanishingWhileConnectingFails() {
        var m = Machine().connecting()
        #expect(m.central.deviceDisconnected(device) == [])  // Connect's reply decides
        #expect(m.central.deviceRemoved(device).last == .finish(.failed(.connectionLost)))
    }

    @Test func eventsForOtherDevicesAreIgnored() {
        var m = Machine().resolving()
        #expect(m.central.deviceDisconnected("/org/bluez/hci0/dev_OTHER") == [])
        #expect(m.central.servicesResolved(device: "/org/bluez/hci0/dev_OTHER", characteristics: characteristics) == [])
    }

    // MARK: Reading

    @Test func aReadDisconnectsAndSucceedsWhenEveryFieldDecodes() {
        var m = Machine().reading()
        #expect(m.central.readCompleted(.name, .success(Array("Robin".utf8))) == [
            .report(.reading(robin, .name("Robin"), raw: Array("Robin".utf8), notified: false))
        ])
        _ = m.central.readCompleted(.color, .success(Array("#FF8800".utf8)))
        let last = m.central.readCompleted(.alpha, .success(Array("80".utf8)))
        #expect(last.suffix(2) == [.disconnect(device), .finish(.success)])
    }

    @Test func aBadValueIsReportedAndTheReadEndsWithBadValue() {
        var m = Machine().reading()
        _ = m.central.readCompleted(.name, .success(Array("Robin".utf8)))
        let bad = m.central.readCompleted(.alpha, .success(Array("101".utf8)))
        #expect(bad == [.report(.badValue(robin, BirdValueError(field: .alpha, raw: Array("101".utf8), reason: "101 is above 100")))])
        let last = m.central.readCompleted(.color, .success(Array("#FF8800".utf8)))
        #expect(last.last == .finish(.badValue))
    }

    @Test func aFailedReadFailsTheReadCommand() {
        var m = Machine().reading()
        let error = BlueZError(.notPermitted, message: "Read not permitted")
        #expect(m.central.readCompleted(.name, .failure(error)) == [
            .disconnect(device), .finish(.failed(.operationFailed("read name", error))),
        ])
    }

    @Test func aRefusalByTheBusPolicyIsPermissionDeniedWhateverTheStep() {
        let denied = BlueZError(.permissionDenied, name: "org.freedesktop.DBus.Error.AccessDenied")
        var reading = Machine().reading()
        #expect(reading.central.readCompleted(.name, .failure(denied)).last == .finish(.failed(.permissionDenied(denied))))
        var scanning = Machine().scanning()
        #expect(scanning.central.scanFailed(denied).last == .finish(.failed(.permissionDenied(denied))))
    }

    // MARK: Stopping

    @Test func interruptingAStreamStopsNotifyAndDisconnects() {
        var m = Machine(.watch(reconnect: true), fields: [.name, .alpha]).streaming()
        let actions = m.central.stopRequested()
        #expect(actions.contains(.stopNotify(characteristics[.name]!)))
        #expect(actions.contains(.stopNotify(characteristics[.alpha]!)))
        #expect(actions.suffix(2) == [.disconnect(device), .finish(.success)])
        #expect(m.central.stopRequested() == [])
    }

    @Test func interruptingAConnectionCancelsItAndReportsInterrupted() {
        var m = Machine().connecting()
        #expect(m.central.stopRequested().suffix(2) == [.disconnect(device), .finish(.interrupted)])
    }

    @Test func interruptingAScanStopsDiscovery() {
        var m = Machine().scanning()
        #expect(m.central.stopRequested().suffix(2) == [.stopScanning, .finish(.interrupted)])
    }

    @Test func ctrlCIsHowAWatchEnds() {
        var m = Machine(.watch(reconnect: true)).reading()
        #expect(m.central.stopRequested().suffix(2) == [.disconnect(device), .finish(.success)])
    }

    @Test func theDurationEndsTheStream() {
        var m = Machine(.watch(reconnect: true)) { $0.duration = .seconds(1) }.streaming()
        #expect(m.central.timerFired(.duration).last == .finish(.success))
    }

    @Test func staleTimersAreIgnored() {
        var m = Machine().reading()
        #expect(m.central.timerFired(.scan) == [])
        #expect(m.central.timerFired(.connect) == [])
        #expect(m.central.timerFired(.retry) == [])
    }
}
