import BlueZ
import DBus
import Testing

@testable import Bird

/// Links for a guest (Home Assistant, through the proxy), through the
/// fleet's gate and scheduler: the slots it is told, its link made, lost and
/// undone, and its deadline teaching the limit as a bird's does.
@Suite("A guest's links in the fleet")
struct GuestLinksTests {
    static let sensor: BluetoothAddress = "C0:FF:EE:00:00:01"
    static let sensorPath: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
    static let other: BluetoothAddress = "C0:FF:EE:00:00:02"
    static let otherPath: ObjectPath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_02"
    static let watchAlpha = BirdCentral.Configuration(mode: .watch(reconnect: true), fields: [.alpha], scanTimeout: nil)

    static func bird(_ n: Int) -> (sighting: Sighting, path: ObjectPath) {
        let path = ObjectPath("/org/bluez/hci0/dev_F0_0D_B1_7D_00_0\(n)")
        return (Sighting(device: path, address: BluetoothAddress(value: 0xF00D_B17D_0000 + UInt64(n))!, name: "Bird\(n)", rssi: -60,
            uuids: [BirdService.uuid]), path)
    }

    /// A fleet with `birds` birds streaming (machines 0…), and `links` given.
    static func fleet(birds: Int = 0, links: Int? = nil) -> BirdFleet {
        var fleet = BirdFleet(watchAlpha, all: true, links: LinkPolicy(links: links))
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        for n in 0..<birds {
            let b = bird(n + 1)
            _ = fleet.deviceSighted(b.sighting) + fleet.timerFired(.connectGap)
            _ = fleet.connectReplied(n, .success(()))
            _ = fleet.servicesResolved(device: b.path, characteristics: [.alpha: ObjectPath("\(b.path)/service000a/char000f")])
        }
        return fleet
    }

    static func connectID(_ actions: [BirdFleet.Action], _ device: ObjectPath) -> BirdFleet.MachineID? {
        actions.lazy.compactMap { if case .connect(let id, device) = $0 { id } else { nil } }.first
    }

    @Test func aLinkGoesThroughTheGateAndIsSaidOnceResolved() throws {
        var fleet = Self.fleet(birds: 1)
        #expect(fleet.guestSlots == (1, 2), "the limit not known: one more than the bird's link")
        let asked = fleet.guestConnect(Self.sensor, device: Self.sensorPath) + fleet.timerFired(.connectGap)
        let id = try #require(Self.connectID(asked, Self.sensorPath), "\(asked)")
        #expect(asked.contains(.armTimer(.guest(id), Self.watchAlpha.connectTimeout)))
        #expect(fleet.linksUp == 2, "counted from its attempt on")
        #expect(fleet.connectReplied(id, .success(())).allSatisfy { if case .guestLinked = $0 { false } else { true } })
        let resolved = fleet.servicesResolved(device: Self.sensorPath, characteristics: [:])
        #expect(resolved.contains(.guestLinked(Self.sensor, Self.sensorPath)) && resolved.contains(.cancelTimer(.guest(id))))
        #expect(fleet.guestSlots == (1, 3))
        let down = fleet.deviceDisconnected(Self.sensorPath)
        #expect(down.contains(.guestUnlinked(Self.sensor)))
        #expect(fleet.linksUp == 1 && fleet.guestSlots == (1, 2))
    }

    /// A held bird is never undone for a guest: with the limit given and
    /// held birds' links up, no slot; one left for a held bird still
    /// looking for its link.
    @Test func heldBirdsComeFirst() {
        #expect(Self.fleet(birds: 2, links: 2).guestSlots == (0, 2))
        #expect(Self.fleet(birds: 1, links: 3).guestSlots == (2, 3))
        var fleet = Self.fleet(birds: 1, links: 3)
        // A second bird heard: its machine waits at the gate, its link kept for it.
        _ = fleet.deviceSighted(Self.bird(2).sighting)
        #expect(fleet.guestSlots == (1, 3))
    }

    @Test func aFailedConnectIsSaidAndItsSlotFree() throws {
        var fleet = Self.fleet(links: 2)
        let id = try #require(Self.connectID(fleet.guestConnect(Self.sensor, device: Self.sensorPath) + fleet.timerFired(.connectGap), Self.sensorPath))
        let failure = BlueZError(.failed, message: "le-connection-abort-by-local")
        #expect(fleet.connectReplied(id, .failure(failure)).contains(.guestFailed(Self.sensor, failure)))
        #expect(fleet.linksUp == 0 && fleet.guestSlots == (2, 2))
    }

    /// A guest's deadline, twice at one count, teaches the limit as a bird's does.
    @Test func deadlinesTeachTheLimit() throws {
        var fleet = Self.fleet(birds: 1)
        let up = [Self.bird(1).path]
        let first = try #require(Self.connectID(fleet.guestConnect(Self.sensor, device: Self.sensorPath) + fleet.timerFired(.connectGap), Self.sensorPath))
        #expect(fleet.timerFired(.guest(first)) == [.countLinks(first, "/org/bluez/hci0")])
        let gaveUp = fleet.deadlinePassed(first, up: up)
        #expect(gaveUp.contains(.disconnect(Self.sensorPath)))
        #expect(gaveUp.contains { if case .guestFailed(Self.sensor, let error) = $0 { error.kind == .timeout } else { false } })
        let second = try #require(Self.connectID(fleet.guestConnect(Self.other, device: Self.otherPath) + fleet.timerFired(.connectGap), Self.otherPath))
        let learned = fleet.deadlinePassed(second, up: up)
        #expect(learned.contains(.report(.links(adapter: "hci0", used: 1, limit: 1, learned: true))), "\(learned)")
        #expect(fleet.guestSlots == (0, 1))
    }

    @Test func undoneWhileWaitingOrUpAndWhenTheCommandEnds() throws {
        var fleet = Self.fleet(links: 3)
        let id = try #require(Self.connectID(fleet.guestConnect(Self.sensor, device: Self.sensorPath) + fleet.timerFired(.connectGap), Self.sensorPath))
        // Behind the attempt out, in line: withdrawn without a Disconnect.
        #expect(Self.connectID(fleet.guestConnect(Self.other, device: Self.otherPath), Self.otherPath) == nil)
        #expect(!fleet.guestDisconnect(Self.other).contains(.disconnect(Self.otherPath)))
        #expect(fleet.linksUp == 1)
        _ = fleet.connectReplied(id, .success(()))
        _ = fleet.servicesResolved(device: Self.sensorPath, characteristics: [:])
        #expect(fleet.guestDisconnect(Self.sensor).contains(.disconnect(Self.sensorPath)))
        #expect(fleet.linksUp == 1, "counted until it is down")
        #expect(fleet.deviceDisconnected(Self.sensorPath).contains(.guestUnlinked(Self.sensor)))
        let again = try #require(Self.connectID(fleet.guestConnect(Self.other, device: Self.otherPath) + fleet.timerFired(.connectGap), Self.otherPath))
        _ = fleet.connectReplied(again, .success(()))
        #expect(fleet.stopRequested().contains(.disconnect(Self.otherPath)))
    }

    @Test func bluetoothGoneTakesTheGuestsLinks() throws {
        var fleet = Self.fleet(links: 3)
        let id = try #require(Self.connectID(fleet.guestConnect(Self.sensor, device: Self.sensorPath) + fleet.timerFired(.connectGap), Self.sensorPath))
        _ = fleet.connectReplied(id, .success(()))
        _ = fleet.servicesResolved(device: Self.sensorPath, characteristics: [:])
        #expect(fleet.bluetoothUnavailable(BlueZError(.bluetoothdNotRunning)).contains(.guestUnlinked(Self.sensor)))
        #expect(fleet.linksUp == 0 && fleet.guestSlots == (0, 0))
    }

    /// A link being undone when Bluetooth goes is said down too: its guest waits to hear it.
    @Test func bluetoothGoneEndsALinkBeingUndone() throws {
        var fleet = Self.fleet(links: 3)
        let id = try #require(Self.connectID(fleet.guestConnect(Self.sensor, device: Self.sensorPath) + fleet.timerFired(.connectGap), Self.sensorPath))
        _ = fleet.connectReplied(id, .success(()))
        _ = fleet.servicesResolved(device: Self.sensorPath, characteristics: [:])
        _ = fleet.guestDisconnect(Self.sensor)
        #expect(fleet.bluetoothUnavailable(BlueZError(.bluetoothdNotRunning)).contains(.guestUnlinked(Self.sensor)))
    }

    /// A bird's address is never a guest's, and one guest link per device.
    @Test func oneLinkPerDevice() {
        var fleet = Self.fleet(birds: 1, links: 3)
        #expect(fleet.guestConnect(Self.bird(1).sighting.address, device: Self.bird(1).path).contains {
            if case .guestFailed = $0 { true } else { false }
        })
        _ = fleet.guestConnect(Self.sensor, device: Self.sensorPath)
        #expect(fleet.guestConnect(Self.sensor, device: Self.sensorPath).contains { if case .guestFailed = $0 { true } else { false } })
    }
}
