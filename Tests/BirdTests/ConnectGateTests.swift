import Bird
import BlueZ
import DBus
import Testing

private let readAlpha = BirdCentral.Configuration(mode: .read, fields: [.alpha])
private let watchAlpha = BirdCentral.Configuration(mode: .watch(reconnect: true), fields: [.alpha], scanTimeout: nil)

private func connects(_ actions: [BirdFleet.Action]) -> [BirdFleet.MachineID] {
    actions.compactMap { if case .connect(let id, _) = $0 { id } else { nil } }
}

private extension BirdFleet {
    /// One bird's command, its Connect to Robin out (machine 0).
    static func connectingToRobin(_ configuration: BirdCentral.Configuration = readAlpha) -> BirdFleet {
        var fleet = BirdFleet(configuration)
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        _ = fleet.deviceSighted(birdSighting)
        #expect(connects(fleet.timerFired(.machine(0, .listen))) == [0])
        return fleet
    }
}

/// The fleet's `ConnectGate`, through the fleet's events: one Connect out at
/// a time, whose its reply is, and links that are not ours to undo.
@Suite("Connection attempts: one out at a time, and whose reply it is")
struct ConnectGateTests {
    /// A connect deadline is not the machine's until the links up on its
    /// adapter are counted (Linux does not report a controller at its limit):
    /// the driver is asked to count them, and answers with `connectDeadlinePassed`.
    @Test func aConnectDeadlineAsksForTheLinksUpOnItsAdapter() {
        var fleet = BirdFleet.connectingToRobin()
        #expect(fleet.timerFired(.machine(0, .connect)) == [.countLinks(0, adapter.path)])
        let passed = fleet.connectDeadlinePassed(0, connectedDevices: [], adapter: "hci0")
        #expect(passed.contains(.disconnect(device)))
        #expect(passed.last == .finish(.failed(.connectTimeout)))
    }

    /// A watch of a bird BlueZ knows connects at once; its deadline (the
    /// bird was not heard) gives that attempt up and listens instead. Heard,
    /// the bird is connected again — by the same machine, but not before the
    /// Connect given up is answered (one out at a time), and that answer,
    /// even a late success, is not taken for the new attempt's.
    @Test func aConnectGivenUpIsAnsweredToNobody() {
        var fleet = BirdFleet(BirdCentral.Configuration(mode: .watch(reconnect: true), fields: [.alpha], address: robin.address))
        _ = fleet.bluetoothReady(adapter: adapter, requested: nil)
        #expect(connects(fleet.deviceKnown(0, birdSighting)) == [0])
        let passed = fleet.connectDeadlinePassed(0, connectedDevices: [], adapter: "hci0")
        #expect(passed.contains(.disconnect(device)) && passed.contains(.startScanning(0, lookUpKnown: nil)), "\(passed)")
        #expect(!fleet.awaitsConnect(0, device))
        #expect(connects(fleet.deviceSighted(birdSighting)) == [], "the new attempt waits for the old one's answer")
        let late = fleet.connectReplied(0, .success(()))
        #expect(!late.contains(.report(.connected(robin))), "a late answer is nobody's: \(late)")
        #expect(connects(late) == [0], "the new attempt goes once the old one is answered")
        #expect(fleet.awaitsConnect(0, device))
        #expect(fleet.connectReplied(0, .success(())).contains(.report(.connected(robin))))
    }

    /// A link up before our Connect (another program's: bluetoothctl, another
    /// birdctl) is used but not undone: no Disconnect at the end. Once that
    /// link went down, a link made again is ours, and is undone.
    @Test func aBorrowedLinkIsLeftUpAndALinkMadeLaterIsOurs() {
        var fleet = BirdFleet.connectingToRobin(watchAlpha)
        _ = fleet.connectSent(device, whileConnected: true)
        _ = fleet.connectReplied(0, .success(()))
        _ = fleet.servicesResolved(device: device, characteristics: characteristics)
        _ = fleet.notifyStarted(0, .alpha, .success(()))
        _ = fleet.readCompleted(0, .alpha, .success(Array("80".utf8)))
        // The other program lets its link go: the watch finds Robin again and connects itself.
        _ = fleet.deviceDisconnected(device)
        var again = fleet.deviceSighted(birdSighting)
        if again.contains(.armTimer(.machine(0, .listen), .seconds(1))) { again += fleet.timerFired(.machine(0, .listen)) }
        #expect(connects(again) == [0], "\(again)")
        _ = fleet.connectReplied(0, .success(()))
        _ = fleet.servicesResolved(device: device, characteristics: characteristics)
        #expect(fleet.stopRequested().contains(.disconnect(device)), "our own link is undone")

        // Given up before the answer (Ctrl-C): the Connect went to a device
        // already connected, so no Disconnect; to one that was not, one.
        var early = BirdFleet.connectingToRobin(watchAlpha)
        _ = early.connectSent(device, whileConnected: true)
        #expect(!early.stopRequested().contains(.disconnect(device)), "another program's link stays up")
        var ours = BirdFleet.connectingToRobin(watchAlpha)
        #expect(ours.stopRequested().contains(.disconnect(device)), "our own attempt is undone")

        var borrowing = BirdFleet.connectingToRobin()
        _ = borrowing.connectSent(device, whileConnected: true)
        _ = borrowing.connectReplied(0, .success(()))
        _ = borrowing.servicesResolved(device: device, characteristics: characteristics)
        let done = borrowing.readCompleted(0, .alpha, .success(Array("80".utf8)))
        #expect(done.last == .finish(.success))
        #expect(!done.contains(.disconnect(device)), "another program's link stays up: \(done)")
    }

    /// bluetoothd going ends every attempt: the bus answers the Connect that
    /// was out (NoReply), and that answer is nobody's — the machine starts afresh.
    @Test func theConnectOutWhenBluetoothdWentIsNobodys() {
        var fleet = BirdFleet.connectingToRobin(watchAlpha)
        _ = fleet.bluetoothUnavailable(BlueZError(.bluetoothdNotRunning))
        #expect(!fleet.awaitsConnect(0, device))
        let noReply = BlueZError(.other, name: "org.freedesktop.DBus.Error.NoReply", message: "")
        #expect(fleet.connectReplied(0, .failure(noReply)).isEmpty)
    }
}
