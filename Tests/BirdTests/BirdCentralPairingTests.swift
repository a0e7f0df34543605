import Bird
import BlueZ
import DBus
import Testing

private let notPaired = BlueZError(.notPermitted, name: "org.bluez.Error.NotPermitted", message: "Not paired")

@Suite("BirdCentral: pairing when a bird asks for it")
struct BirdCentralPairingTests {
    @Test func aReadRefusedForSecurityPairsThenReadsEveryFieldAgain() {
        var m = Machine(fields: [.name, .alpha]).reading()
        #expect(m.central.readCompleted(.name, .failure(notPaired)) == [.report(.pairing(robin)), .pair(device)])
        // The other read's refusal arrives while pairing: nothing more to do.
        #expect(m.central.readCompleted(.alpha, .failure(notPaired)) == [])
        #expect(m.central.pairCompleted(.success(())) == [
            .report(.paired(robin)), .read(.name, characteristics[.name]!), .read(.alpha, characteristics[.alpha]!),
        ])
        _ = m.central.readCompleted(.name, .success(Array("Robin".utf8)))
        #expect(m.central.readCompleted(.alpha, .success(Array("80".utf8))).suffix(2) == [.disconnect(device), .finish(.success)])
    }

    @Test func aWatchRefusedAtSubscribingPairsThenSubscribesAgain() {
        var m = Machine(.watch(reconnect: true), fields: [.alpha]).resolved()
        #expect(m.central.notifyStarted(.alpha, .failure(notPaired)) == [.report(.pairing(robin)), .pair(device)])
        #expect(m.central.pairCompleted(.failure(BlueZError(.alreadyExists))) == [
            .report(.paired(robin)), .startNotify(.alpha, characteristics[.alpha]!),
        ])
    }

    @Test func withoutPairingTheRefusalEndsTheCommand() {
        var m = Machine(fields: [.alpha]) { $0.pairs = false }.reading()
        #expect(m.central.readCompleted(.alpha, .failure(notPaired)).last == .finish(.failed(.pairingRequired(notPaired))))
    }

    @Test func aSecondRefusalAfterPairingIsAFailedPairing() {
        var m = Machine(fields: [.alpha]).reading()
        _ = m.central.readCompleted(.alpha, .failure(notPaired))
        _ = m.central.pairCompleted(.success(()))
        #expect(m.central.readCompleted(.alpha, .failure(notPaired)).last == .finish(.failed(.pairingFailed(notPaired))))
    }

    @Test func aPairingThatTimesOutIsCancelled() {
        var m = Machine(fields: [.alpha]).reading()
        _ = m.central.readCompleted(.alpha, .failure(notPaired))
        let timeout = BlueZError(.timeout)
        let actions = m.central.pairCompleted(.failure(timeout))
        #expect(actions.contains(.cancelPairing(device)) && actions.contains(.disconnect(device)))
        #expect(actions.last == .finish(.failed(.pairingFailed(timeout))))
    }

    @Test func pairModeConnectsPairsAndDisconnects() {
        var m = Machine(.pair, fields: []) { $0.address = robin.address }.connecting()
        #expect(m.central.connectReplied(.success(())) == [
            .cancelTimer(.connect), .report(.connected(robin)), .report(.pairing(robin)), .pair(device),
        ])
        // Services resolving meanwhile change nothing.
        #expect(m.central.servicesResolved(device: device, characteristics: characteristics) == [])
        #expect(m.central.pairCompleted(.success(())) == [.report(.paired(robin)), .disconnect(device), .finish(.success)])
    }

    @Test func unpairModeAsksBlueZToForget() {
        var m = Machine(.unpair, fields: []) { $0.address = robin.address }
        #expect(m.central.bluetoothReady(adapter: adapter) == [.forget(robin.address)])
        #expect(m.central.forgetCompleted(.failure(BlueZError(.notFound))) == [.finish(.failed(.notFound))])
    }

    @Test func ctrlCWhilePairingCancelsIt() {
        var m = Machine(fields: [.alpha]).reading()
        _ = m.central.readCompleted(.alpha, .failure(notPaired))
        let actions = m.central.stopRequested()
        #expect(actions.contains(.cancelPairing(device)) && actions.contains(.disconnect(device)))
        #expect(actions.last == .finish(.interrupted))
    }
}
