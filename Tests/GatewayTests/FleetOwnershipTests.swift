import Bird
import Gateway
import Testing

private let robin: BluetoothAddress = "F0:0D:B1:7D:00:01"

/// A gateway of the fleet, connected to the broker since `t = 0`, with the
/// other rooms online; `now` moves on with each step.
private struct Room {
    var machine: FleetOwnership
    var now: Duration = .zero

    init(_ name: String, others: [String] = ["garden", "hall"], margin: Int = 8) {
        machine = FleetOwnership(.init(room: name, margin: margin, dwell: .seconds(20), settle: .seconds(5)))
        _ = machine.brokerConnected(now: now)
        for other in others { _ = machine.gatewayStatus(other, online: true, now: now) }
    }

    /// A room that heard the bird best, claimed it, saw its claim back and connected it.
    static func holding(_ name: String) -> Room {
        var room = Room(name)
        _ = room.hears(-50)
        _ = room.after(5)
        _ = room.holder(name)
        _ = room.machine.linked(robin, true, now: room.now)
        return room
    }

    mutating func after(_ seconds: Int) -> [FleetOwnership.Action] {
        now += .seconds(seconds)
        return machine.tick(now: now)
    }

    mutating func hears(_ rssi: Int) -> [FleetOwnership.Action] { machine.heard(robin, rssi: rssi, now: now) }
    mutating func reported(_ other: String, _ rssi: Int?) -> [FleetOwnership.Action] {
        machine.reportedHeard(robin, by: other, rssi: rssi, now: now)
    }
    mutating func holder(_ name: String?) -> [FleetOwnership.Action] { machine.reportedHolder(robin, name, now: now) }
}

@Suite("One owner per bird among gateways, through events")
struct FleetOwnershipTests {
    @Test func nobodyHoldsItSoTheRoomThatHearsItBestClaimsItAfterSettlingAndConnectsOnceTheClaimComesBack() {
        var kitchen = Room("kitchen")
        #expect(kitchen.hears(-50) == [.publishHeard(address: robin, rssi: -50)])
        #expect(kitchen.reported("garden", -70) == [])  // still settling: what the broker retains is coming in
        #expect(kitchen.after(5) == [.claim(address: robin)])
        #expect(kitchen.after(1) == [])  // claimed once
        // Now one of the fleet's birds: how loud this room hears it becomes a sensor.
        #expect(kitchen.holder("kitchen") == [.grant(address: robin), .hearingSensor(address: robin, true)])
        #expect(kitchen.holder("kitchen") == [])

        var garden = Room("garden", others: ["kitchen"])
        _ = garden.hears(-70)
        _ = garden.reported("kitchen", -50)
        #expect(garden.after(10) == [])  // kitchen hears it better
    }

    @Test func withoutDiscoveryNoHearingSensorIsDescribed() {
        var kitchen = FleetOwnership(.init(room: "kitchen", settle: .seconds(5), discovery: false))
        _ = kitchen.brokerConnected(now: .zero)
        _ = kitchen.heard(robin, rssi: -50, now: .zero)
        #expect(kitchen.tick(now: .seconds(5)) == [.claim(address: robin)])
        #expect(kitchen.reportedHolder(robin, "kitchen", now: .seconds(5)) == [.grant(address: robin)])
    }

    @Test func equalReportsGoToTheFirstRoomByName() {
        var garden = Room("garden", others: ["kitchen"])
        _ = garden.hears(-60)
        _ = garden.reported("kitchen", -60)
        #expect(garden.after(5) == [.claim(address: robin)])
        var kitchen = Room("kitchen", others: ["garden"])
        _ = kitchen.hears(-60)
        _ = kitchen.reported("garden", -60)
        #expect(kitchen.after(5) == [])
    }

    @Test func aClaimThatLosesTheRaceIsDroppedAndALaterClaimByAnotherRoomReleasesTheBird() {
        var kitchen = Room("kitchen")
        _ = kitchen.hears(-50)
        #expect(kitchen.after(5) == [.claim(address: robin)])
        // The broker took the garden's claim after the kitchen's: the last wins.
        #expect(kitchen.holder("kitchen") == [.grant(address: robin), .hearingSensor(address: robin, true)])
        #expect(kitchen.holder("garden") == [.release(address: robin)])
        #expect(kitchen.machine.holder(of: robin) == "garden")
        // The garden is alive and holds it: the kitchen waits for the margin and the dwell.
        #expect(kitchen.after(1) == [])
    }

    @Test func noiseNeverMovesAHeldBirdAndARealMoveMovesItOnce() {
        var garden = Room("garden", others: ["kitchen"])
        _ = garden.holder("kitchen")
        _ = garden.reported("kitchen", -60)
        // ±6 dB around the kitchen's level: never the margin for the dwell.
        let noise = [6, -6, 5, -5, 6, 6, -6, 4, 6, 6, 6, -3, 6, 6, 6, 6, -6]
        var actions: [FleetOwnership.Action] = []
        for (index, offset) in noise.enumerated() {
            _ = garden.hears(-60 + offset)
            actions += garden.after(index % 2 == 0 ? 3 : 4)
        }
        #expect(!actions.contains(.claim(address: robin)), "\(actions)")
        // The bird walks into the garden: heard 20 dB louder there, for good.
        actions = []
        for _ in 0..<30 {
            actions += garden.hears(-40)
            actions += garden.after(1)
        }
        #expect(actions.filter { $0 == .claim(address: robin) }.count == 1)
    }

    @Test func theLouderRoomWaitsTheDwellTimeFromTheFirstLouderReport() {
        var garden = Room("garden", others: ["kitchen"])
        _ = garden.holder("kitchen")
        _ = garden.reported("kitchen", -70)
        _ = garden.hears(-50)
        #expect(garden.after(19) == [])
        #expect(garden.after(1) == [.claim(address: robin)])
    }

    @Test func whenTheHolderDiesTheBestRoomLeftTakesTheBirdAtOnce() {
        var garden = Room("garden", others: ["kitchen", "hall"])
        _ = garden.holder("kitchen")
        _ = garden.reported("kitchen", -40)
        _ = garden.reported("hall", -80)
        _ = garden.hears(-70)
        #expect(garden.after(30) == [])
        // The kitchen's will: its birds are nobody's, once it has stood for the takeover delay.
        #expect(garden.machine.gatewayStatus("kitchen", online: false, now: garden.now) == [])
        #expect(garden.after(1) == [])
        #expect(garden.after(1) == [.claim(address: robin)])
        var hall = Room("hall", others: ["kitchen", "garden"])
        _ = hall.holder("kitchen")
        _ = hall.reported("kitchen", -40)
        _ = hall.reported("garden", -70)
        _ = hall.hears(-80)
        _ = hall.after(30)
        #expect(hall.machine.gatewayStatus("kitchen", online: false, now: hall.now) == [])
        #expect(hall.after(3) == [])  // past the takeover delay: the garden hears it better
    }

    /// A broker shutting down publishes every gateway's will, then closes the
    /// connections: no death, no takeover.
    @Test func willsFromABrokerShuttingDownAreNoTakeover() {
        var garden = Room("garden", others: ["kitchen"])
        _ = garden.holder("kitchen")
        _ = garden.reported("kitchen", -55)
        _ = garden.hears(-60)
        #expect(garden.after(30) == [])
        #expect(garden.machine.gatewayStatus("kitchen", online: false, now: garden.now) == [])
        #expect(garden.machine.brokerLost(now: garden.now) == [])
        #expect(garden.after(3) == [])
        // Back, with the kitchen: it keeps its bird.
        _ = garden.machine.brokerConnected(now: garden.now)
        _ = garden.machine.gatewayStatus("kitchen", online: false, now: garden.now)
        #expect(garden.after(4) == [])  // within the settling time (here 5 s; 12 s by default, past any reconnect)
        _ = garden.machine.gatewayStatus("kitchen", online: true, now: garden.now)
        #expect(garden.after(10) == [])
    }

    @Test func aGatewayThatLostTheBrokerLetsItsBirdsGoAfterTheGraceAndClaimsNothingWhileAway() {
        var kitchen = Room.holding("kitchen")
        #expect(kitchen.machine.brokerLost(now: kitchen.now) == [])
        #expect(kitchen.after(29) == [])
        #expect(kitchen.after(1) == [.release(address: robin)])
        // Back: what the broker retains decides; nothing is claimed while settling.
        _ = kitchen.machine.brokerConnected(now: kitchen.now)
        _ = kitchen.machine.gatewayStatus("garden", online: true, now: kitchen.now)
        #expect(kitchen.holder("garden") == [.heldElsewhere(address: robin)])  // its claim was let go at the grace
        #expect(kitchen.after(5) == [])
    }

    @Test func aShortBrokerOutageKeepsTheBird() {
        var kitchen = Room.holding("kitchen")
        _ = kitchen.machine.brokerLost(now: kitchen.now)
        #expect(kitchen.after(10) == [])
        _ = kitchen.machine.brokerConnected(now: kitchen.now)
        #expect(kitchen.after(30) == [])
        #expect(kitchen.machine.holder(of: robin) == "kitchen")
    }

    @Test func aHeldBirdThatFallsSilentKeepsItsHolderWhileTheLinkLasts() {
        var kitchen = Room.holding("kitchen")
        // No advertisement for minutes: the link is up, the report stands.
        for _ in 0..<10 { #expect(kitchen.after(60) == []) }
        // The link goes and the bird is not heard again for the dwell time: the claim and the report go.
        _ = kitchen.machine.linked(robin, false, now: kitchen.now)
        #expect(kitchen.after(19) == [])
        #expect(
            kitchen.after(1) == [
                .release(address: robin), .withdrawClaim(address: robin), .publishHeard(address: robin, rssi: nil),
                .hearingSensor(address: robin, false), .forgotten(address: robin),
            ])
        #expect(kitchen.machine.birdCount == 0)
    }

    @Test func aRoomThatNoLongerHearsTheHeldBirdLosesItToOneThatDoes() {
        var garden = Room("garden", others: ["kitchen"])
        _ = garden.holder("kitchen")
        _ = garden.reported("kitchen", -60)
        _ = garden.reported("kitchen", nil)  // the kitchen withdrew its report
        _ = garden.hears(-85)
        #expect(garden.after(19) == [])
        #expect(garden.after(1) == [.claim(address: robin)])
    }

    /// Writes that waited for a bird are the new holder's to answer, unless
    /// this room had claimed it (then its release answers them).
    @Test func aHolderElsewhereIsSaidOnlyForABirdThisRoomNeverClaimed() {
        var garden = Room("garden")
        _ = garden.hears(-70)
        #expect(garden.holder("kitchen") == [.heldElsewhere(address: robin), .hearingSensor(address: robin, true)])
        var kitchen = Room.holding("kitchen")
        #expect(kitchen.holder("garden") == [.release(address: robin)])
    }

    @Test func aClaimRetainedFromBeforeARestartIsAdoptedAndGoesIfTheBirdIsNotThere() {
        var kitchen = Room("kitchen")
        #expect(kitchen.holder("kitchen") == [.grant(address: robin)])
        // Never heard nor connected here: it is let go after the dwell time.
        #expect(kitchen.after(19) == [])
        #expect(kitchen.after(1) == [.release(address: robin), .withdrawClaim(address: robin), .forgotten(address: robin)])
    }

    /// After a reconnect, a claim is not sent again blindly: the retained
    /// holder decides; one the broker lost (no persistence) is made again.
    @Test func afterAReconnectTheRetainedHolderDecidesAndALostClaimIsMadeAgain() {
        var kitchen = Room.holding("kitchen")
        _ = kitchen.machine.brokerLost(now: kitchen.now)
        _ = kitchen.after(3)
        _ = kitchen.machine.brokerConnected(now: kitchen.now)
        // The broker kept it: nothing to send.
        _ = kitchen.holder("kitchen")
        #expect(kitchen.machine.retainedSeen(now: kitchen.now) == [])
        // The broker lost it (restarted without persistence): claimed again.
        _ = kitchen.machine.brokerLost(now: kitchen.now)
        _ = kitchen.machine.brokerConnected(now: kitchen.now)
        #expect(kitchen.machine.retainedSeen(now: kitchen.now) == [.claim(address: robin)])
        // The garden took it meanwhile: the kitchen yields, and claims nothing on the probe.
        var yielding = Room.holding("kitchen")
        _ = yielding.machine.brokerLost(now: yielding.now)
        _ = yielding.machine.brokerConnected(now: yielding.now)
        #expect(yielding.holder("garden") == [.release(address: robin)])
        #expect(yielding.machine.retainedSeen(now: yielding.now) == [])
    }

    @Test func aBirdOnlyADeadRoomReportsIsForgotten() {
        var kitchen = Room("kitchen")
        _ = kitchen.reported("garden", -60)
        #expect(kitchen.machine.birdCount == 1)
        #expect(kitchen.machine.gatewayStatus("garden", online: false, now: kitchen.now) == [.forgotten(address: robin)])
        // A dead room's retained report, at a reconnect: nothing is kept for it.
        _ = kitchen.reported("garden", -60)
        #expect(kitchen.machine.birdCount == 0)
    }

    @Test func roomsKnownAreBounded() {
        var kitchen = FleetOwnership(.init(room: "kitchen", maximumRooms: 3))
        _ = kitchen.brokerConnected(now: .zero)
        for index in 0..<10 { _ = kitchen.gatewayStatus("room\(index)", online: index % 2 == 0, now: .zero) }
        for index in 0..<10 { _ = kitchen.reportedHeard(robin, by: "other\(index)", rssi: -60, now: .zero) }
        #expect(kitchen.roomsKnown <= 3)
        #expect(kitchen.reportsKept(robin) <= 3)
    }

    @Test func aStrangerNobodyHoldsGetsNoHearingSensor() {
        var kitchen = Room("kitchen")
        let heard = kitchen.hears(-95) + kitchen.reported("garden", -60)
        #expect(!heard.contains(.hearingSensor(address: robin, true)))
        #expect(kitchen.holder("garden").contains(.hearingSensor(address: robin, true)))
    }

    @Test func reportsOnlyMovesOfThreeDecibelsOrMore() {
        var kitchen = Room("kitchen")
        #expect(kitchen.hears(-60) == [.publishHeard(address: robin, rssi: -60)])
        #expect(kitchen.hears(-56) == [])  // smoothed: -59
        #expect(kitchen.hears(-50) == [.publishHeard(address: robin, rssi: -57)])  // -56.75
        #expect(kitchen.hears(-50) == [])  // -55.06
    }

    @Test func birdsRememberedAreBounded() {
        var machine = FleetOwnership(.init(room: "kitchen", maximumBirds: 2))
        for index in 0..<5 {
            _ = machine.heard(BluetoothAddress(value: 0xF00D_B17D_0000 + UInt64(index))!, rssi: -50, now: .zero)
            _ = machine.reportedHeard(BluetoothAddress(value: 0xF00D_B17D_0100 + UInt64(index))!, by: "garden", rssi: -50, now: .zero)
        }
        #expect(machine.birdCount == 2)
    }
}
