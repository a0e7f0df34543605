import Bird
import BlueZ
import DBus
import Testing

@Suite("BirdCentral state machine: watching")
struct BirdCentralWatchTests {
    // MARK: Watching

    @Test func watchSubscribesBeforeReading() {
        // A change between the first reading and the subscription would be lost.
        var m = Machine(.watch(reconnect: true), fields: [.alpha]).resolving()
        let actions = m.central.servicesResolved(device: device, characteristics: characteristics)
        #expect(actions.last == .startNotify(.alpha, characteristics[.alpha]!))
        #expect(m.central.notifyStarted(.alpha, .success(())) == [.read(.alpha, characteristics[.alpha]!)])
    }

    @Test func notificationsBecomeReadingsAndBadOnesDoNotStopTheStream() {
        var m = Machine(.watch(reconnect: true)).streaming()
        let alpha = characteristics[.alpha]!
        #expect(m.central.valueChanged(alpha, Array("55".utf8)) == [
            .report(.reading(robin, .alpha(percent: 55), raw: Array("55".utf8), notified: true))
        ])
        #expect(m.central.valueChanged(alpha, Array("8.5".utf8)).count == 1)
        #expect(m.central.valueChanged(alpha, Array("56".utf8)).count == 1)
        #expect(m.central.valueChanged("/org/bluez/hci0/other/char", Array("1".utf8)) == [])
    }

    @Test func anUnorderedNotificationDuringTheReadIsReportedAfterItNotDropped() {
        // AcquireNotify's socket bypasses dbus-daemon: a notification may
        // arrive before the read's reply and still be newer than the value
        // read. Each comes after the read, in order: none is lost.
        var m = Machine(.watch(reconnect: true)).streaming()
        let alpha = characteristics[.alpha]!
        #expect(m.central.valueChanged(alpha, Array("55".utf8), mtu: 23).count == 1)
        let cut = Array("Troglodytes troglodytes".utf8)
        let name = characteristics[.name]!
        #expect(m.central.valueChanged(name, Array(cut.prefix(20)), mtu: 23) == [.read(.name, name)])
        #expect(m.central.valueChanged(name, Array("Robin".utf8), mtu: 23, ordered: false) == [])
        #expect(m.central.valueChanged(name, Array("Wren".utf8), mtu: 23, ordered: false) == [])
        #expect(m.central.readCompleted(.name, .success(cut)) == [
            .report(.reading(robin, .name("Troglodytes troglodytes"), raw: cut, notified: false)),
            .report(.reading(robin, .name("Robin"), raw: Array("Robin".utf8), notified: true)),
            .report(.reading(robin, .name("Wren"), raw: Array("Wren".utf8), notified: true)),
        ])
        // A held one with the bytes the read returned is the same update,
        // printed once; the one before it is older than the value read.
        #expect(m.central.valueChanged(name, Array(cut.prefix(20)), mtu: 23) == [.read(.name, name)])
        #expect(m.central.valueChanged(name, Array("Robin".utf8), mtu: 23, ordered: false) == [])
        #expect(m.central.valueChanged(name, cut, mtu: 64, ordered: false) == [])
        #expect(m.central.readCompleted(.name, .success(cut)) == [
            .report(.reading(robin, .name("Troglodytes troglodytes"), raw: cut, notified: false))
        ])
        // So is one cut at the MTU that the value read begins with.
        #expect(m.central.valueChanged(name, Array(cut.prefix(20)), mtu: 23) == [.read(.name, name)])
        #expect(m.central.valueChanged(name, Array(cut.prefix(20)), mtu: 23, ordered: false) == [])
        #expect(m.central.readCompleted(.name, .success(cut)) == [
            .report(.reading(robin, .name("Troglodytes troglodytes"), raw: cut, notified: false))
        ])
        // Ordered ones (signals, behind the reply on the same connection) are older: dropped.
        #expect(m.central.valueChanged(name, Array(cut.prefix(20)), mtu: 23) == [.read(.name, name)])
        #expect(m.central.valueChanged(name, Array("Robin".utf8), mtu: 23) == [])
        #expect(m.central.readCompleted(.name, .success(cut)).count == 1)
    }

    @Test func anUnorderedNotificationOfTheValueReadIsNotReportedTwice() {
        // The socket overtook the read's reply with the same update: printed once.
        var m = Machine(.watch(reconnect: true)).streaming()
        let name = characteristics[.name]!
        let whole = Array("Troglodytes troglodytes".utf8)
        #expect(m.central.valueChanged(name, Array(whole.prefix(20)), mtu: 23) == [.read(.name, name)])
        #expect(m.central.valueChanged(name, Array("Wren".utf8), mtu: 23, ordered: false) == [])
        #expect(m.central.readCompleted(.name, .success(Array("Wren".utf8))) == [
            .report(.reading(robin, .name("Wren"), raw: Array("Wren".utf8), notified: false))
        ])
    }

    @Test func unorderedNotificationsOlderThanTheValueReadAreNotReportedAfterIt() {
        // At 10 Hz two notifications can overtake the reply of a read made
        // after both: the value read is the second's, and the first, older,
        // must not follow it (the newest value is the last one printed).
        var m = Machine(.watch(reconnect: true), fields: [.alpha]).resolving()
        let alpha = characteristics[.alpha]!
        _ = m.central.servicesResolved(device: device, characteristics: characteristics)
        #expect(m.central.notifyStarted(.alpha, .success(())) == [.read(.alpha, alpha)])
        for raw in ["1", "2", "3"] {
            #expect(m.central.valueChanged(alpha, Array(raw.utf8), mtu: 23, ordered: false) == [])
        }
        let reports: ([BirdCentral.Action]) -> [BirdCentral.Action] = { $0.filter { if case .report = $0 { true } else { false } } }
        #expect(reports(m.central.readCompleted(.alpha, .success(Array("2".utf8)))) == [
            .report(.reading(robin, .alpha(percent: 2), raw: Array("2".utf8), notified: false)),
            .report(.reading(robin, .alpha(percent: 3), raw: Array("3".utf8), notified: true)),
        ])
        #expect(m.central.valueChanged(alpha, Array("4".utf8), mtu: 23).count == 1, "streaming")
    }

    @Test func aRepeatedValueReadDropsEverythingUpToItsLastCopy() {
        // 5, 6, 5 overtook a read of 5: which 5 the read saw cannot be told,
        // and the 6 may be older than it: nothing follows the read.
        var m = Machine(.watch(reconnect: true), fields: [.alpha]).resolving()
        let alpha = characteristics[.alpha]!
        _ = m.central.servicesResolved(device: device, characteristics: characteristics)
        _ = m.central.notifyStarted(.alpha, .success(()))
        for raw in ["5", "6", "5"] { _ = m.central.valueChanged(alpha, Array(raw.utf8), mtu: 23, ordered: false) }
        let reports = m.central.readCompleted(.alpha, .success(Array("5".utf8))).filter { if case .report = $0 { true } else { false } }
        #expect(reports == [.report(.reading(robin, .alpha(percent: 5), raw: Array("5".utf8), notified: false))])
    }

    @Test func aNotificationThatFillsTheMTUIsCompletedByARead() {
        // MTU 23: a notification carries at most 20 bytes; a longer name arrives cut.
        var m = Machine(.watch(reconnect: true)).streaming()
        let name = characteristics[.name]!
        let whole = Array("Troglodytes troglodytes".utf8)
        #expect(m.central.valueChanged(name, Array(whole.prefix(20)), mtu: 23) == [.read(.name, name)])
        #expect(m.central.valueChanged(name, Array(whole.prefix(20)), mtu: 23) == [], "superseded by the read")
        #expect(m.central.valueChanged(characteristics[.alpha]!, Array("55".utf8), mtu: 23).count == 1, "others stream on")
        #expect(m.central.readCompleted(.name, .success(whole)) == [
            .report(.reading(robin, .name("Troglodytes troglodytes"), raw: whole, notified: false))
        ])
        // Shorter than the room: whole, reported as notified.
        #expect(m.central.valueChanged(name, Array("Wren".utf8), mtu: 23) == [
            .report(.reading(robin, .name("Wren"), raw: Array("Wren".utf8), notified: true))
        ])
        // Without an MTU nothing can be told: reported as it came.
        #expect(m.central.valueChanged(name, Array(whole.prefix(20)), mtu: nil).count == 1)
    }

    @Test func aFieldsChangesCountOnceItsFirstReadHasAnswered() {
        // Before the reply, a change is BlueZ's echo of the read or older than it.
        var m = Machine(.watch(reconnect: true)).reading()
        #expect(m.central.valueChanged(characteristics[.alpha]!, Array("55".utf8)) == [])
        _ = m.central.readCompleted(.alpha, .success(Array("55".utf8)))
        #expect(m.central.valueChanged(characteristics[.alpha]!, Array("56".utf8)) == [
            .report(.reading(robin, .alpha(percent: 56), raw: Array("56".utf8), notified: true))
        ])
        #expect(m.central.valueChanged(characteristics[.name]!, Array("Wren".utf8)) == [])
    }

    @Test func changesOfFieldsNotWatchedAreIgnored() {
        // Another client reading name shows as a name change to everyone.
        var m = Machine(.watch(reconnect: true), fields: [.alpha]).streaming()
        #expect(m.central.valueChanged(characteristics[.name]!, Array("Robin".utf8)) == [])
        #expect(m.central.valueChanged(characteristics[.alpha]!, Array("5".utf8)).count == 1)
        // Nor is the removal of one: a watch of alpha does not reconnect over name.
        #expect(m.central.characteristicRemoved(characteristics[.name]!) == [])
    }

    @Test func aRefusedSubscriptionIsReportedWhileTheOthersStream() {
        var m = Machine(.watch(reconnect: true)).resolved()
        let refused = BlueZError(.notPermitted, message: "Notify not permitted")
        #expect(m.central.notifyStarted(.name, .failure(refused)) == [
            .report(.operationFailed(robin, "subscribe to name", refused)),
        ])
        _ = m.central.notifyStarted(.color, .success(()))
        #expect(m.central.notifyStarted(.alpha, .success(())).count == 3)  // every field is still read
        for field in BirdField.allCases { _ = m.central.readCompleted(field, .success(Array("80".utf8))) }
        #expect(m.central.valueChanged(characteristics[.alpha]!, Array("55".utf8)).count == 1)

        var none = Machine(.watch(reconnect: true), fields: [.alpha]).resolved()
        #expect(none.central.notifyStarted(.alpha, .failure(refused)).last
            == .finish(.failed(.operationFailed("subscribe to alpha", refused))))
    }

    @Test func aCharacteristicGoingAwayMakesAWatchReconnectAndAReadFail() {
        var watch = Machine(.watch(reconnect: true)).streaming()
        let actions = watch.central.characteristicRemoved(characteristics[.alpha]!)
        #expect(actions.contains(.disconnect(device)))
        #expect(actions.contains(.report(.disconnected(robin))))
        // Found again, it is connected once this link is down (or after the connect deadline).
        #expect(actions.suffix(2) == [.startScanning, .armTimer(.connect, .seconds(10))])
        _ = watch.central.deviceSighted(birdSighting)
        #expect(watch.central.timerFired(.listen).last == .report(.found(robin, rssi: -50)), "no Connect yet")
        #expect(watch.central.deviceDisconnected(device).last == .connect(device))
        var read = Machine().reading()
        #expect(read.central.characteristicRemoved(characteristics[.alpha]!).last
            == .finish(.failed(.operationFailed("use alpha", BlueZError(.doesNotExist, message: "the alpha characteristic went away")))))
        var other = Machine(.watch(reconnect: true)).streaming()
        #expect(other.central.characteristicRemoved("/org/bluez/hci0/dev_AA/service0001/char0002") == [])
    }

    /// A dropping link unresolves its services before its objects go: those
    /// removals are the disconnect's business, not a changed GATT database.
    @Test func removalsAfterServicesWentUnresolvedAreTheDisconnects() {
        var m = Machine(.watch(reconnect: true)).streaming()
        #expect(m.central.servicesUnresolved(device) == [])
        #expect(m.central.characteristicRemoved(characteristics[.alpha]!) == [])
        #expect(m.central.deviceDisconnected(device).contains(.report(.disconnected(robin))))
    }

    @Test func countStopsTheStreamCleanly() {
        var m = Machine(.watch(reconnect: true), fields: [.alpha]) { $0.maximumReadings = 3 }.reading()
        _ = m.central.readCompleted(.alpha, .success(Array("1".utf8)))
        _ = m.central.valueChanged(characteristics[.alpha]!, Array("2".utf8))
        let actions = m.central.valueChanged(characteristics[.alpha]!, Array("3".utf8))
        #expect(actions.suffix(3) == [.stopNotify(characteristics[.alpha]!), .disconnect(device), .finish(.success)])
    }

    @Test func aLostLinkGoesBackToScanningWithoutTheFindDeadline() {
        var m = Machine(.watch(reconnect: true)).streaming()
        let actions = m.central.deviceDisconnected(device)
        #expect(actions.contains(.report(.disconnected(robin))))
        #expect(actions.last == .startScanning)
        #expect(!actions.contains(.armTimer(.scan, .seconds(10))))
        #expect(m.central.deviceSighted(birdSighting).last == .armTimer(.listen, .seconds(1)))
        #expect(m.central.timerFired(.listen).last == .connect(device))
    }

    @Test func withoutReconnectALostLinkFails() {
        var m = Machine(.watch(reconnect: false)).streaming()
        #expect(m.central.deviceRemoved(device).last == .finish(.failed(.connectionLost)))
    }

    @Test func bluetoothdRestartIsWaitedOutAndResumed() {
        var m = Machine(.watch(reconnect: true)).streaming()
        let gone = m.central.bluetoothUnavailable(BlueZError(.bluetoothdNotRunning))
        #expect(gone.contains(.report(.disconnected(robin))))
        #expect(gone.last == .report(.waiting("bluetoothd is not running; waiting for it to return")))
        #expect(m.central.bluetoothReady(adapter: adapter) == [.startScanning])
    }

    @Test func adapterPowerCycleIsWaitedOut() {
        var m = Machine(.watch(reconnect: true)).streaming()
        let off = AdapterChoice(path: adapter.path, name: "hci0", powered: false)
        #expect(m.central.adapterPowered(false, adapter: off).last == .report(.waiting("hci0 was powered off; waiting")))
        #expect(m.central.adapterPowered(true, adapter: adapter) == [.startScanning])
    }

    @Test func aReadDoesNotWaitForBluetoothToReturn() {
        var m = Machine().reading()
        let error = BlueZError(.bluetoothdNotRunning)
        #expect(m.central.bluetoothUnavailable(error).last == .finish(.failed(.bluetoothUnavailable(error))))
    }
}
