import Bird
import BlueZ
import DBus
import Gateway
import Testing

private let robin = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01", address: "F0:0D:B1:7D:00:01", name: "Robin")
private let wren = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_02", address: "F0:0D:B1:7D:00:02", name: "Wren")
private let finch = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_03", address: "F0:0D:B1:7D:00:03", name: "Finch")

private func reading(_ bird: BirdCentral.Peripheral, _ percent: UInt8) -> BirdCentral.Report {
    .reading(bird, .alpha(percent: percent), raw: Array(String(percent).utf8), notified: true)
}

/// A gateway brought to a state through real events.
private extension GatewayMachine {
    /// Started, with `birds` connected (and discovered).
    static func running(_ birds: [BirdCentral.Peripheral] = [robin], discovery: Bool = true, maximumBirds: Int = 4096) -> GatewayMachine {
        var machine = GatewayMachine(.init(discovery: discovery, maximumBirds: maximumBirds))
        _ = machine.start()
        _ = machine.brokerConnected()
        _ = machine.probeReturned()
        for bird in birds { _ = machine.report(.connected(bird)) }
        return machine
    }
}

@Suite("The gateway's policy, through events")
struct GatewayMachineTests {
    @Test func startingPublishesTheGatewaysStatusAndDiscoveryAsSticky() {
        var machine = GatewayMachine(.init(discovery: true))
        #expect(machine.start() == [.publishSticky(.gatewayDiscovery)])
        #expect(machine.start() == [])
        #expect(machine.brokerConnected() == [.publish(.probe)])
        // Online once the retained statuses were read (and stale ones corrected).
        #expect(machine.retainedOnline("F0:0D:B1:7D:00:09") == [
            .publishSticky(.birdStatus(address: "F0:0D:B1:7D:00:09", online: false))
        ])
        #expect(machine.probeReturned() == [.publishSticky(.gatewayStatus(online: true))])
        #expect(machine.probeReturned() == [])
        var quiet = GatewayMachine(.init(discovery: false))
        #expect(quiet.start() == [])
        // The probe goes at every connect (a clean session loses an echo under way).
        #expect(quiet.brokerConnected() == [.publish(.probe)])
        #expect(quiet.brokerConnected() == [.publish(.probe)])
    }

    /// A connect attempt given up (its deadline, or Connect failing) counts
    /// on the gateway's retained health, its sensor described the first
    /// time; other failures do not count.
    @Test func connectFailuresAreCountedForHomeAssistant() {
        var machine = GatewayMachine.running([])
        let timeout = BirdCentral.Report.gaveUp(.connectTimeoutWithLinksUp(adapter: "hci0", links: 3))
        #expect(machine.report(timeout) == [
            .publish(.event(address: nil, timeout)), .publishSticky(.healthDiscovery), .publishSticky(.health(connectFailures: 1)),
        ])
        let refused = BirdCentral.Report.gaveUp(.connectFailed(BlueZError(.failed, name: "org.bluez.Error.Failed", message: "x")))
        #expect(machine.report(refused).last == .publishSticky(.health(connectFailures: 2)))
        #expect(machine.report(.gaveUp(.connectionLost)) == [.publish(.event(address: nil, .gaveUp(.connectionLost)))])
        var quiet = GatewayMachine.running([], discovery: false)
        #expect(quiet.report(timeout).last == .publishSticky(.health(connectFailures: 1)))
        #expect(!quiet.report(timeout).contains(.publishSticky(.healthDiscovery)))
    }

    @Test func inAFleetALostLinkStopsTheBirdsSharedSensorsComingBack() {
        var shared = GatewayMachine(.init(discovery: true, shared: true))
        _ = shared.start()
        _ = shared.brokerConnected()
        _ = shared.probeReturned()
        _ = shared.report(.connected(robin))
        #expect(shared.report(.disconnected(robin)).last == .forgetSharedDiscovery(address: robin.address))
        // A gateway of its own keeps them: it is the bird's only gateway.
        var alone = GatewayMachine.running()
        #expect(!alone.report(.disconnected(robin)).contains(.forgetSharedDiscovery(address: robin.address)))
    }

    @Test func aConnectionIsAnEventThenDiscoveryOnceThenTheStatus() {
        var machine = GatewayMachine.running([])
        // The links in use follow (the gateway's links sensor, described once).
        #expect(machine.report(.connected(robin)) == [
            .publish(.event(address: robin.address, .connected(robin))),
            .publishSticky(.birdDiscovery(robin)), .publishSticky(.birdStatus(address: robin.address, online: true)),
            .publishSticky(.linksDiscovery), .publishSticky(.links(used: 1, limit: nil)),
        ])
        #expect(machine.report(.disconnected(robin)) == [
            .publishSticky(.birdStatus(address: robin.address, online: false)), .publishSticky(.links(used: 0, limit: nil)),
            .publish(.event(address: robin.address, .disconnected(robin))),
        ])
        // Discovered already: not again.
        #expect(machine.report(.connected(robin)) == [
            .publish(.event(address: robin.address, .connected(robin))), .publishSticky(.birdStatus(address: robin.address, online: true)),
            .publishSticky(.links(used: 1, limit: nil)),
        ])
        // The limit, once given or learned, goes with it.
        #expect(machine.report(.links(adapter: "hci0", used: 1, limit: 3, learned: true)).contains(
            .publishSticky(.links(used: 1, limit: 3))))
        // Several adapters as one pool: the sensor's limit is their sum, each
        // adapter's figures go with it, and each adapter's sensors are described once.
        let hci1 = GatewayMachine.AdapterLinks(adapter: "hci1", used: 0, limit: 2)
        #expect(machine.report(.links(adapter: "hci1", used: 0, limit: 2, learned: true)) == [
            .publish(.event(address: nil, .links(adapter: "hci1", used: 0, limit: 2, learned: true))),
            .publishSticky(.adapterLinksDiscovery(adapter: "hci0")), .publishSticky(.adapterLinksDiscovery(adapter: "hci1")),
            .publishSticky(.links(used: 1, limit: 5, adapters: [.init(adapter: "hci0", used: 1, limit: 3), hci1])),
        ])
        // An adapter's news replaces its own.
        #expect(machine.report(.links(adapter: "hci1", used: 0, limit: 1, learned: true)).contains(
            .publishSticky(.links(used: 1, limit: 4, adapters: [.init(adapter: "hci0", used: 1, limit: 3), .init(adapter: "hci1", used: 0, limit: 1)]))))
        // A learned limit forgotten: the sum is not known while one adapter's is not.
        #expect(machine.report(.links(adapter: "hci0", used: 1, limit: nil, learned: false)).contains(
            .publishSticky(.links(used: 1, limit: nil, adapters: [.init(adapter: "hci0", used: 1, limit: nil), .init(adapter: "hci1", used: 0, limit: 1)]))))
        #expect(machine.report(.links(adapter: "hci0", used: 1, limit: 3, learned: true)).contains(
            .publishSticky(.links(used: 1, limit: 4, adapters: [.init(adapter: "hci0", used: 1, limit: 3), .init(adapter: "hci1", used: 0, limit: 1)]))))
        // A bird on hci1 counts there, and its going down counts there too.
        let wren = BirdCentral.Peripheral(path: "/org/bluez/hci1/dev_F0_0D_B1_7D_00_02", address: "F0:0D:B1:7D:00:02", name: "Wren")
        #expect(machine.report(.connected(wren)).contains(
            .publishSticky(.links(used: 2, limit: 4, adapters: [.init(adapter: "hci0", used: 1, limit: 3), .init(adapter: "hci1", used: 1, limit: 1)]))))
        #expect(machine.report(.disconnected(wren)).contains(
            .publishSticky(.links(used: 1, limit: 4, adapters: [.init(adapter: "hci0", used: 1, limit: 3), .init(adapter: "hci1", used: 0, limit: 1)]))))
        var quiet = GatewayMachine.running([], discovery: false)
        #expect(!quiet.report(.connected(robin)).contains(.publishSticky(.birdDiscovery(robin))))
    }

    @Test func everyValueGoesOutAndTheStateOncePerWakeUpWithTheNewest() {
        var machine = GatewayMachine.running([robin, wren])
        for percent: UInt8 in [10, 20, 30] {
            #expect(machine.report(reading(robin, percent)) == [.publish(.value(address: robin.address, .alpha(percent: percent)))])
        }
        _ = machine.report(reading(wren, 5))
        #expect(machine.wakeUpEnds() == [
            .publish(.state(address: robin.address, [.alpha: .alpha(percent: 30)])),
            .publish(.state(address: wren.address, [.alpha: .alpha(percent: 5)])),
        ])
        #expect(machine.wakeUpEnds() == [])
        // Another report goes after the states of the readings before it.
        _ = machine.report(reading(robin, 40))
        #expect(machine.report(.disconnected(robin)) == [
            .publish(.state(address: robin.address, [.alpha: .alpha(percent: 40)])),
            .publishSticky(.birdStatus(address: robin.address, online: false)), .publishSticky(.links(used: 1, limit: nil)),
            .publish(.event(address: robin.address, .disconnected(robin))),
        ])
    }

    @Test func aStaleOnlineOnTheBrokerIsMarkedOfflineUnlessHeld() {
        var machine = GatewayMachine.running([robin])
        #expect(machine.retainedOnline(robin.address) == [], "held: the broker is right")
        #expect(machine.retainedOnline(wren.address) == [.publishSticky(.birdStatus(address: wren.address, online: false))])
        #expect(machine.birdCount == 2, "remembered, so bounded like the others")
        _ = machine.close()
        #expect(machine.retainedOnline(finch.address) == [])
    }

    @Test func aForgottenBirdIsClearedAndDiscoveredAfreshIfItReturns() {
        var machine = GatewayMachine.running([robin, wren])
        _ = machine.report(.disconnected(robin))
        _ = machine.report(reading(wren, 7))
        #expect(machine.forget(robin.address) == [
            .publish(.state(address: wren.address, [.alpha: .alpha(percent: 7)])),
            .forgetSticky(addresses: [robin.address]), .publish(.clearing(address: robin.address)),
        ])
        #expect(machine.birdCount == 1)
        #expect(machine.report(.connected(robin)).contains(.publishSticky(.birdDiscovery(robin))))
    }

    /// The fleet forgets a bird it no longer hears: its topics are cleared;
    /// a stranger the gateway never published leaves nothing to clear.
    @Test func aBirdTheFleetForgetsIsClearedAStrangerLeavesNothing() {
        var machine = GatewayMachine.running([robin])
        _ = machine.report(.disconnected(robin))
        let forgotten = machine.report(.forgotten(address: robin.address))
        #expect(forgotten == [
            .publish(.event(address: robin.address, .forgotten(address: robin.address))),
            .forgetSticky(addresses: [robin.address]), .publish(.clearing(address: robin.address)),
        ])
        #expect(machine.birdCount == 0)
        let stranger: BluetoothAddress = "D0:00:00:00:00:01"
        #expect(machine.report(.forgotten(address: stranger)) == [
            .publish(.event(address: stranger, .forgotten(address: stranger)))
        ])
    }

    /// Under --all a stranger that asks for pairing connects, is declined
    /// and dropped by the fleet with no disconnection and no `forgotten`:
    /// what its connection published is cleared at once.
    @Test func aNewBirdBeyondTheBoundForgetsTheOfflineOnesNotTheOnlineOnes() {
        var machine = GatewayMachine.running([robin, wren], maximumBirds: 2)
        _ = machine.report(.disconnected(robin))
        let actions = machine.report(.connected(finch))
        #expect(actions.contains(.forgetSticky(addresses: [robin.address])), "\(actions)")
        #expect(machine.birdCount == 2)
        // Wren (online) was kept: its status goes offline at the end.
        #expect(machine.close().contains(.closePublisher(final: [
            .birdStatus(address: wren.address, online: false), .birdStatus(address: finch.address, online: false),
            .gatewayStatus(online: false),
        ])))
        // A reading of a new bird beyond the bound makes room too.
        var full = GatewayMachine.running([robin], maximumBirds: 1)
        _ = full.report(.disconnected(robin))
        #expect(full.reading(wren.address, .alpha(percent: 1)) == .forgetStickyThenPublishValue([robin.address]))
        #expect(full.reading(wren.address, .alpha(percent: 2)) == .publishValue)
    }

    @Test func closingSaysOfflineThenWaitsWhileTheBrokerMakesProgress() {
        var machine = GatewayMachine.running([robin])
        _ = machine.report(reading(robin, 50))
        #expect(machine.close() == [
            .publish(.state(address: robin.address, [.alpha: .alpha(percent: 50)])),
            .closePublisher(final: [.birdStatus(address: robin.address, online: false), .gatewayStatus(online: false)]),
            .armExitTimer,
        ])
        #expect(machine.close() == [])
        #expect(machine.report(reading(robin, 60)) == [], "nothing new once closing")
        #expect(machine.exitDeadlinePassed(undelivered: 100) == [.armExitTimer])
        #expect(machine.exitDeadlinePassed(undelivered: 40) == [.armExitTimer])
        #expect(machine.exitDeadlinePassed(undelivered: 40) == [.gaveUp(undelivered: 40), .finish(delivered: false)])
        #expect(machine.publisherClosed(undelivered: 40) == [], "finished once")
    }

    @Test func theBrokerTakingEverythingEndsIt() {
        var machine = GatewayMachine.running([robin])
        _ = machine.close()
        #expect(machine.publisherClosed(undelivered: 0) == [.cancelExitTimer, .finish(delivered: true)])
        // All taken at the deadline but no end from the publisher: one more deadline.
        var hung = GatewayMachine.running([robin])
        _ = hung.close()
        #expect(hung.exitDeadlinePassed(undelivered: 0) == [.armExitTimer])
        #expect(hung.exitDeadlinePassed(undelivered: 0) == [.finish(delivered: true)])
        var never = GatewayMachine(.init(discovery: true))
        #expect(never.close() == [.finish(delivered: true)])
    }

    @Test func droppedMessagesAreAnEvent() {
        var machine = GatewayMachine.running()
        #expect(machine.dropped(12) == [.publish(.dropped(12))])
    }
}
