import Bird
import BlueZ
import DBus
import Testing

private let watchAll = BirdCentral.Configuration(mode: .watch(reconnect: true), fields: [.alpha], scanTimeout: nil)

private func connects(_ actions: [BirdFleet.Action]) -> [ObjectPath] {
    actions.compactMap { if case .connect(_, let path) = $0 { path } else { nil } }
}

@Suite("watch --all among gateways: only granted birds are connected")
struct BirdFleetSharingTests {
    private func sharedFleet() -> BirdFleet {
        var fleet = BirdFleet(watchAll, all: true, shared: true)
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        return fleet
    }

    @Test func aBirdHeardIsNotConnectedUntilGrantedThenAtOnce() {
        var fleet = sharedFleet()
        #expect(fleet.deviceSighted(birdSighting) + fleet.timerFired(.connectGap) == [])
        #expect(connects(fleet.grant(robin.address) + fleet.timerFired(.connectGap)) == [device])
        // Unshared, the same sighting connects at once.
        var alone = BirdFleet(watchAll, all: true)
        _ = alone.bluetoothReady(adapter: adapter, requested: nil)
        #expect(connects(alone.deviceSighted(birdSighting) + alone.timerFired(.connectGap)) == [device])
    }

    @Test func aGrantBeforeTheBirdIsHeardConnectsWhenItIs() {
        var fleet = sharedFleet()
        #expect(fleet.grant(robin.address) == [])
        #expect(connects(fleet.deviceSighted(birdSighting) + fleet.timerFired(.connectGap)) == [device])
    }

    @Test func aReleaseUndoesTheLinkSaysSoAndTheBirdIsNotConnectedAgain() {
        var fleet = sharedFleet()
        let id = 0
        _ = fleet.grant(robin.address)
        _ = fleet.deviceSighted(birdSighting) + fleet.timerFired(.connectGap)
        _ = fleet.connectReplied(id, .success(()))
        _ = fleet.servicesResolved(device: device, characteristics: [.alpha: characteristics[.alpha]!])
        _ = fleet.notifyStarted(id, .alpha, .success(())) + fleet.readCompleted(id, .alpha, .success(Array("50".utf8)))
        let released = fleet.release(robin.address)
        #expect(released.contains(.disconnect(device)), "\(released)")
        #expect(released.contains(.report(.disconnected(robin))), "\(released)")
        #expect(fleet.deviceDisconnected(device) == [])
        #expect(fleet.deviceSighted(birdSighting) + fleet.timerFired(.connectGap) == [])
        #expect(!fleet.runs(id))
    }

    @Test func birdsHeardButNotGrantedAreBounded() {
        var fleet = sharedFleet()
        for n in 0..<1000 {
            let address = BluetoothAddress(value: 0xF00D_B17D_1000 + UInt64(n))!
            let path = ObjectPath("/org/bluez/hci0/dev_" + String(address.description.map { $0 == ":" ? "_" : $0 }))
            _ = fleet.deviceSighted(Sighting(device: path, address: address, name: nil, rssi: -60, uuids: [BirdService.uuid]))
        }
        #expect(fleet.birdsRemembered <= 256)
    }
}
