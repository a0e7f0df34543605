@testable import Bird
import BlueZ
import DBus
import Testing

private let robinAddress: BluetoothAddress = "F0:0D:B1:7D:00:01"

private func sighting(_ n: UInt64, connected: Bool = false) -> Sighting {
    let address = BluetoothAddress(value: 0xF00D_B17D_0000 + n)!
    return Sighting(
        device: ObjectPath("/org/bluez/hci0/dev_F0_0D_B1_7D_00_0\(n)"), address: address, name: "Bird\(n)", rssi: -60,
        uuids: [BirdService.uuid], connected: connected)
}

@Suite struct ForgettingTests {
    @Test func aBirdUnheardForEveryTickOfForgetAfterIsForgottenAtTheLast() {
        var forgetting = Forgetting(after: .seconds(80))
        #expect(forgetting.interval == .seconds(10))
        forgetting.heard(0)
        forgetting.heard(1)
        var forgotten: [[BirdFleet.MachineID]] = []
        for tick in 1...BirdFleet.ticksToForget {
            // Machine 1's bird is heard until tick 3.
            if tick <= 3 { forgetting.heard(1) }
            forgotten.append(forgetting.tickOn([(0, false), (1, false)]))
        }
        #expect(forgotten.last == [0] && forgotten.dropLast().allSatisfy(\.isEmpty))
        forgetting.forget(0)
        #expect(forgetting.tickOn([(0, false), (1, false)]).isEmpty)
        #expect(forgetting.tickOn([(0, false), (1, false)]) == [1])
    }

    @Test func aConnectedBirdCountsAsHeardAndAMachineNeverHeardIsKept() {
        var forgetting = Forgetting(after: .seconds(80))
        forgetting.heard(0)
        for _ in 0..<(2 * BirdFleet.ticksToForget) {
            #expect(forgetting.tickOn([(0, true), (1, false)]).isEmpty)
        }
        forgetting.forget(0)
        #expect(forgetting.lastHeard.isEmpty)
    }

    @Test func aReplacementKeepsWhenItsBirdWasHeard() {
        var forgetting = Forgetting(after: .seconds(80))
        forgetting.heard(0)
        for _ in 0..<3 { _ = forgetting.tickOn([(0, false)]) }
        forgetting.heard(1, at: forgetting.lastHeard[0])
        forgetting.forget(0)
        #expect(forgetting.lastHeard == [1: 0])
        for _ in 4..<BirdFleet.ticksToForget { #expect(forgetting.tickOn([(1, false)]).isEmpty) }
        #expect(forgetting.tickOn([(1, false)]) == [1])
    }

    @Test func aDeclinedBirdGetsAnotherChanceAfterForgetAfter() {
        var forgetting = Forgetting(after: .seconds(80))
        _ = forgetting.tickOn([])
        forgetting.decline(robinAddress)
        for _ in 1..<BirdFleet.ticksToForget {
            _ = forgetting.tickOn([])
            #expect(forgetting.isDeclined(robinAddress))
        }
        _ = forgetting.tickOn([])
        #expect(!forgetting.isDeclined(robinAddress) && forgetting.declined.isEmpty)
    }
}

@Suite struct WaitingLineTests {
    @Test func birdsWaitInTheOrderHeardTheirPlaceKept() {
        var line = WaitingLine()
        for n in [1, 2, 3] { line.heard(sighting(UInt64(n))) }
        line.heard(sighting(1))
        #expect(line.sightings.map(\.name) == ["Bird1", "Bird2", "Bird3"])
        #expect(line.next()?.name == "Bird1" && line.count == 2)
    }

    @Test func aConnectedBirdGoesFirstAndPushesTheLastOutOfAFullLine() {
        var line = WaitingLine()
        for n in 1...UInt64(WaitingLine.limit) { line.heard(sighting(n)) }
        line.heard(sighting(99))
        #expect(line.count == WaitingLine.limit && !line.sightings.contains { $0.name == "Bird99" })
        line.heard(sighting(99, connected: true))
        #expect(line.count == WaitingLine.limit && line.sightings.first?.name == "Bird99")
        #expect(line.sightings.last?.name == "Bird\(WaitingLine.limit - 1)")
        // One waiting already, heard connected: to the front.
        line.heard(sighting(5, connected: true))
        #expect(line.sightings.prefix(2).map(\.name) == ["Bird5", "Bird99"] && line.count == WaitingLine.limit)
    }

    @Test func aBirdTriedAgainGoesLastIfThereIsRoom() {
        var line = WaitingLine()
        line.heard(sighting(1))
        line.again(sighting(2))
        #expect(line.sightings.map(\.name) == ["Bird1", "Bird2"])
        for n in 3...UInt64(WaitingLine.limit + 5) { line.again(sighting(n)) }
        #expect(line.count == WaitingLine.limit)
    }

    @Test func anUpdateReplacesTheSightingInPlaceOnlyOfABirdWaiting() {
        var line = WaitingLine()
        line.heard(sighting(1))
        line.heard(sighting(2))
        let updated = line.update(sighting(2, connected: true))
        let absent = line.update(sighting(3))
        #expect(updated && !absent)
        #expect(line.sightings.map(\.name) == ["Bird1", "Bird2"] && line.sightings[1].connected)
        line.remove(BluetoothAddress(value: 0xF00D_B17D_0001)!)
        #expect(line.sightings.map(\.name) == ["Bird2"])
        line.removeAll()
        #expect(line.isEmpty && line.next() == nil)
    }
}
