import FakeBlueZSupport
import TestProcesses
import DBus
import Foundation
import Testing

@Suite("birdctl exit codes")
struct ExitCodeTests {
    @Test func usageErrorsExitTwo() async throws {
        let fake = try await FakeBlueZ()
        for arguments in [["frobnicate"], ["read", "--bogus"], ["read", "beak"], ["watch", "--count", "0"],
                          ["scan", "--timeout", "soon"], ["read", "--adapter", "wlan0"], ["watch", "--all", bird]] {
            let result = try await BirdctlProcess.run(arguments, environment: fake.environment)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("usage:"), "\(arguments)")
        }
        #expect(try await fake.birdctl("--help").status == 0)
        #expect(try await fake.birdctl("read", "--help").stdout.first?.hasPrefix("usage: birdctl read") == true)
    }

    @Test func noBluetoothdExitsThree() async throws {
        let fake = try await FakeBlueZ()
        try await fake.stop()
        let result = try await fake.birdctl("read")
        #expect(result.status == 3)
        #expect(result.stderr.contains("bluetoothd is not running"))
    }

    @Test func noSystemBusExitsThree() async throws {
        let result = try await BirdctlProcess.run(
            ["scan"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/bus"])
        #expect(result.status == 3)
        #expect(result.stderr.contains("cannot connect to the system bus"))
    }

    @Test func noAdapterExitsThree() async throws {
        let fake = try await FakeBlueZ(adapters: 0)
        let result = try await fake.birdctl("watch")
        #expect(result.status == 3)
        #expect(result.stderr.contains("no Bluetooth adapter"))
        let named = try await FakeBlueZ().birdctl("read", "--adapter", "hci3")
        #expect(named.status == 3)
        #expect(named.stderr.contains("no Bluetooth adapter named hci3"))
    }

    @Test func poweredOffExitsFourUnlessPoweredOn() async throws {
        let fake = try await FakeBlueZ(powered: false)
        try await fake.addBird()
        let off = try await fake.birdctl("read", "name")
        #expect(off.status == 4)
        #expect(off.stderr.contains("hci0 is powered off"))
        let on = try await fake.birdctl("read", "name", "--power-on")
        #expect(on.status == 0, "\(on.stderr)")
        #expect(on.stdout == ["Robin"])
    }

    @Test func accessDeniedExitsFive() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.failNext("SetDiscoveryFilter", "org.freedesktop.DBus.Error.AccessDenied", "Rejected send message")
        let result = try await fake.birdctl("read")
        #expect(result.status == 5)
        #expect(result.stderr.contains("permission denied"))
    }

    /// The real thing, not an injected error: a bus whose policy (upstream
    /// BlueZ's) lets only root and the bluetooth group talk to org.bluez, and
    /// birdctl run as nobody.
    @Test(.enabled(if: geteuid() == 0, "switching to another user needs root"))
    func aUserTheBusPolicyRefusesExitsFive() async throws {
        let fake = try await FakeBlueZ(busConfig: "bluetooth-policy-bus.conf")
        try await fake.addBird()
        for command in [["scan", "--timeout", "1"], ["read"], ["serve"]] {
            let result = try await BirdctlProcess.run(command, environment: fake.environment, asUser: ("nobody", "nogroup"))
            #expect(result.status == 5, "\(command): \(result.stderr)")
            #expect(result.stderr.contains("permission denied by the system bus policy"), "\(command): \(result.stderr)")
        }
        // Root (allowed by the same policy) is answered.
        #expect(try await fake.birdctl("read", "alpha").stdout == ["0.8"])
    }

    @Test func nothingFoundBeforeTheTimeoutExitsSix() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addDevice(address: "11:22:33:44:55:66", name: "Thermometer")
        let result = try await fake.birdctl("read", "--timeout", "0.5")
        #expect(result.status == 6)
        #expect(result.stderr.contains("no Bird found before the timeout"), "\(result.stderr)")
    }

    @Test func connectWaitsForTheStopDiscoveryItFollows() async throws {
        // Scan off, then connect: a StopDiscovery never answered holds the
        // Connect back until the connect deadline.
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: false)
        try await fake.delayNext("StopDiscovery", seconds: -1)
        let result = try await fake.birdctl("read", "--connect-timeout", "1")
        #expect(result.status == 7, "\(result.stderr)")
        let calls = try await fake.calls()
        #expect(calls.contains("StopDiscovery /org/bluez/hci0"))
        #expect(!calls.contains { $0.hasPrefix("Connect") }, "\(calls)")
    }

    /// By address too, where birdctl loaded only that bird and asks BlueZ
    /// for the others' links at the deadline.
    @Test(arguments: [[], ["F0:0D:B1:7D:00:02"]])
    func aConnectDeadlineWhileTheAdapterHoldsOtherLinksSaysSo(_ address: [String]) async throws {
        // A controller at its connection limit: Linux tells BlueZ nothing, the
        // Connect never ends; birdctl says how many links the adapter holds.
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.addBird(address: "F0:0D:B1:7D:00:02", name: "Wren", rssi: -40)  // the nearest
        let holder = try fake.launch("watch", bird, "alpha", "--json")
        _ = try await holder.line(containing: "\"reading\"")
        // Every Connect: by address, birdctl first tries the cached bird
        // without hearing it, then looks for it and connects again.
        try await fake.delayAlways("Connect", seconds: -1)
        let result = try await fake.birdctl(["read"] + address + ["--connect-timeout", "1"])
        #expect(result.status == 7)
        #expect(result.stderr.contains("while hci0 holds 1 other link: its controller may take no more"), "\(result.stderr)")
        holder.signal(SIGINT)
        #expect(try await holder.waitForExit() == 0)
    }

    /// A cached bird is tried without hearing it first; when that Connect
    /// hangs, birdctl looks for the bird and connects again. The first
    /// Connect's late failure is nobody's: it must not end the second.
    @Test func aConnectGivenUpOnIsNotTakenForTheNextOne() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        try await fake.delayNext("Connect", seconds: -1)
        let result = try await fake.birdctl("read", bird, "alpha", "--connect-timeout", "2")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == ["0.8"])
        #expect(try await fake.calls().filter { $0.hasPrefix("Connect ") }.count == 2)
    }

    @Test func aConnectDeadlineExitsSevenWithinTheDeadline() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.delayNext("Connect", seconds: -1)
        let result = try await fake.birdctl("read", "--connect-timeout", "1")
        #expect(result.status == 7)
        #expect(result.stderr.contains("could not connect before the connect deadline"))
        // The pending connection was cancelled.
        #expect(try await fake.calls().contains("Disconnect \(birdPath)"))
    }

    /// bluetoothd 5.82, a bird gone before its ATT channel is up: the link
    /// comes up and goes while Connect is pending (Connected true, then
    /// false), and no link comes of it before the deadline.
    @Test func aLinkThatCameAndWentBeforeTheDeadlineExitsSevenAsALostConnection() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.delayAlways("Connect", seconds: -1)
        // A deadline the signals below come well within, also on a loaded machine.
        let read = try fake.launch("read", "--connect-timeout", "10")
        #expect(try await poll { try await fake.calls().contains { $0.hasPrefix("Connect ") } })
        for connected in [true, false] {
            try await fake.call(
                "EmitRaw", .objectPath(ObjectPath(birdPath)), .string("org.freedesktop.DBus.Properties"),
                .string("PropertiesChanged"), .string("sa{sv}as"),
                .array(element: "v", [
                    .variant(.string("org.bluez.Device1")),
                    .variant(.dictionary(key: "s", value: "v", [DictEntry(.string("Connected"), .variant(.bool(connected)))])),
                    .variant(.array(element: "s", [])),
                ]))
        }
        let result = try await read.finish()
        #expect(result.status == 7)
        #expect(result.stderr.contains("the connection was lost"), "\(result.stderr)")
    }

    @Test func aFailedConnectExitsSevenAfterBoundedRetries() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        for _ in 0..<1 { try await fake.failNext("Connect", "org.bluez.Error.Failed", "le-connection-abort-by-local") }
        let retried = try await fake.birdctl("read", "name")
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(try await fake.calls().filter { $0.hasPrefix("Connect") }.count == 2)

        try await fake.failNext("Connect", "org.bluez.Error.Failed", "Software caused connection abort")
        let failed = try await fake.birdctl("read", "name")
        #expect(failed.status == 7)
        #expect(failed.stderr.contains("Software caused connection abort"))
    }

    /// bluetoothd answers a pending Connect "br-connection-canceled" when the
    /// link it brought up went (a bird out of range as the link came up):
    /// tried again, and when every attempt went so, the connection was lost.
    @Test func aConnectCanceledEveryTimeIsALostConnection() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.failAlways("Connect", "org.bluez.Error.Failed", "br-connection-canceled")
        let read = try await fake.birdctl("read", "name")
        #expect(read.status == 7)
        #expect(read.stderr.contains("the connection was lost"), "\(read.stderr)")
        #expect(try await fake.calls().filter { $0.hasPrefix("Connect") }.count == 4)
    }

    @Test func aLinkLostWithoutReconnectExitsSeven() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "--no-reconnect")
        _ = try await watch.line(containing: "alpha")
        try await fake.call("DropLink", .string(bird))
        #expect(try await watch.waitForExit() == 7)
        #expect(watch.stderr.contains("connection was lost"))
    }

    @Test func interruptingAReadExits130() async throws {
        let fake = try await FakeBlueZ()
        let read = try fake.launch("read", "--timeout", "0")
        try await Task.sleep(for: .milliseconds(300))
        read.signal(SIGINT)
        #expect(try await read.waitForExit() == 130)
    }
}
