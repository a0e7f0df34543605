import Bird
import BlueZ
import DBus
import Testing

private let notPaired = BlueZError(.notPermitted, name: "org.bluez.Error.NotPermitted", message: "Not paired")
/// Pairing's own deadline: Pair's timeout (30 s by default) and a little more.
private let pairingDeadline: Action = .armTimer(.pairing, .seconds(31))

/// Robin named as a bird that may be paired with.
private func named(_ configuration: inout BirdCentral.Configuration) {
    configuration.pairsWith = [robin.address]
}

@Suite("BirdCentral: pairing when a bird asks for it")
struct BirdCentralPairingTests {
    @Test func aReadRefusedForSecurityPairsThenReadsEveryFieldAgain() {
        var m = Machine(fields: [.name, .alpha], configure: named).reading()
        #expect(m.central.readCompleted(.name, .failure(notPaired)) == [.report(.pairing(robin)), pairingDeadline, .pair(device)])
        // The other read's refusal arrives while pairing: nothing more to do.
        #expect(m.central.readCompleted(.alpha, .failure(notPaired)) == [])
        #expect(m.central.pairCompleted(.success(())) == [
            .cancelTimer(.pairing), .report(.paired(robin)), .read(.name, characteristics[.name]!),
            .read(.alpha, characteristics[.alpha]!),
        ])
        _ = m.central.readCompleted(.name, .success(Array("Robin".utf8)))
        #expect(m.central.readCompleted(.alpha, .success(Array("80".utf8))).suffix(2) == [.disconnect(device), .finish(.success)])
    }

    @Test func aWatchRefusedAtSubscribingPairsThenSubscribesAgain() {
        var m = Machine(.watch(reconnect: true), fields: [.alpha], configure: named).resolved()
        #expect(m.central.notifyStarted(.alpha, .failure(notPaired)) == [.report(.pairing(robin)), pairingDeadline, .pair(device)])
        #expect(m.central.pairCompleted(.failure(BlueZError(.alreadyExists))) == [
            .cancelTimer(.pairing), .report(.paired(robin)), .startNotify(.alpha, characteristics[.alpha]!),
        ])
    }

    @Test func theAddressGivenIsNamed() {
        var m = Machine(fields: [.alpha]) { $0 = BirdCentral.Configuration(mode: .read, fields: [.alpha], address: BluetoothAddress(robin.address.description.lowercased())) }
            .reading()
        #expect(m.central.readCompleted(.alpha, .failure(notPaired)).last == .pair(device))
    }

    @Test func aBirdNobodyNamedIsNotBondedWith() {
        var m = Machine(fields: [.alpha]).reading()
        let actions = m.central.readCompleted(.alpha, .failure(notPaired))
        #expect(!actions.contains(.pair(device)))
        #expect(actions.suffix(2) == [.disconnect(device), .finish(.failed(.pairingNotNamed(robin, notPaired)))])
    }

    @Test func aBondedBirdCountsAsNamed() {
        var m = Machine(fields: [.alpha]).scanning()
        var bonded = birdSighting
        bonded.bonded = true
        _ = m.central.deviceSighted(bonded)
        _ = m.central.timerFired(.listen)
        _ = m.central.connectReplied(.success(()))
        _ = m.central.servicesResolved(device: device, characteristics: characteristics)
        #expect(m.central.readCompleted(.alpha, .failure(notPaired)).last == .pair(device))
    }

    @Test func withoutPairingTheRefusalEndsTheCommand() {
        var m = Machine(fields: [.alpha]) { $0.pairs = false; named(&$0) }.reading()
        #expect(m.central.readCompleted(.alpha, .failure(notPaired)).last == .finish(.failed(.pairingRequired(notPaired))))
    }

    @Test func aSecondRefusalAfterPairingIsAFailedPairing() {
        var m = Machine(fields: [.alpha], configure: named).reading()
        _ = m.central.readCompleted(.alpha, .failure(notPaired))
        _ = m.central.pairCompleted(.success(()))
        #expect(m.central.readCompleted(.alpha, .failure(notPaired)).last == .finish(.failed(.pairingFailed(notPaired))))
    }

    @Test func aPairingThatTimesOutIsCancelled() {
        var m = Machine(fields: [.alpha], configure: named).reading()
        _ = m.central.readCompleted(.alpha, .failure(notPaired))
        let timeout = BlueZError(.timeout)
        let actions = m.central.pairCompleted(.failure(timeout))
        #expect(actions.contains(.cancelPairing(device)) && actions.contains(.disconnect(device)))
        #expect(actions.contains(.cancelTimer(.pairing)))
        #expect(actions.last == .finish(.failed(.pairingFailed(timeout))))
    }

    /// Pair may never be answered (bluetoothd 5.66): the machine's own deadline ends it.
    @Test func aPairingNeverAnsweredEndsAtTheMachinesOwnDeadline() {
        var m = Machine(fields: [.alpha], configure: named).reading()
        _ = m.central.readCompleted(.alpha, .failure(notPaired))
        let actions = m.central.timerFired(.pairing)
        #expect(actions.contains(.cancelPairing(device)) && actions.contains(.disconnect(device)))
        guard case .finish(.failed(.pairingFailed(let error))) = actions.last else {
            Issue.record("\(actions)")
            return
        }
        #expect(error.kind == .timeout)
        #expect(m.central.pairing(device) == nil)
    }

    /// bluetoothd 5.66 says Paired and never answers Pair: Paired is its word.
    @Test func pairedTurningTrueEndsThePairing() {
        var m = Machine(fields: [.alpha], configure: named).reading()
        _ = m.central.readCompleted(.alpha, .failure(notPaired))
        #expect(m.central.pairing(device) == robin)
        #expect(m.central.devicePaired("/org/bluez/hci0/dev_OTHER") == [])
        #expect(m.central.devicePaired(device) == [.cancelTimer(.pairing), .report(.paired(robin)), .read(.alpha, characteristics[.alpha]!)])
        // Pair's late answer changes nothing.
        #expect(m.central.pairCompleted(.failure(BlueZError(.timeout))) == [])
    }

    @Test func pairModeConnectsPairsAndDisconnects() {
        var m = Machine(.pair, fields: []) { $0.address = robin.address }.connecting()
        #expect(m.central.connectReplied(.success(())) == [
            .cancelTimer(.connect), .report(.connected(robin)), .report(.pairing(robin)), pairingDeadline, .pair(device),
        ])
        // Services resolving meanwhile change nothing.
        #expect(m.central.servicesResolved(device: device, characteristics: characteristics) == [])
        #expect(m.central.pairCompleted(.success(())) == [
            .cancelTimer(.pairing), .report(.paired(robin)), .disconnect(device), .finish(.success),
        ])
    }

    @Test func unpairModeAsksBlueZToForget() {
        var m = Machine(.unpair, fields: []) { $0.address = robin.address }
        #expect(m.central.bluetoothReady(adapter: adapter) == [.forget(robin.address)])
        #expect(m.central.forgetCompleted(.failure(BlueZError(.notFound))) == [.finish(.failed(.notFound))])
    }

    @Test func ctrlCWhilePairingCancelsIt() {
        var m = Machine(fields: [.alpha], configure: named).reading()
        _ = m.central.readCompleted(.alpha, .failure(notPaired))
        let actions = m.central.stopRequested()
        #expect(actions.contains(.cancelPairing(device)) && actions.contains(.disconnect(device)))
        #expect(actions.last == .finish(.interrupted))
    }
}
