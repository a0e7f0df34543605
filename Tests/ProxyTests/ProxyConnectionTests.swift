import DBus
import FakeBlueZSupport
import Foundation
import Glibc
import Testing
import TestProcesses

/// Home Assistant's connections through `birdctl watch --all --proxy`, with
/// its own client (bleak-esphome 1.0.0 over aioesphomeapi 23.0.0): a device
/// that is not a Bird connected, its services, a read, a write, a
/// notification, the slot given back; no slot, no attempt; a client killed
/// mid-connection takes its link with it.
@Suite("Home Assistant connects through the proxy")
struct ProxyConnectionTests {
    static let thermometer = "C0:FF:EE:00:00:03"
    static let level = "00002a19-0000-1000-8000-00805f9b34fb"
    static let script = ProxyEndToEndTests.project.appendingPathComponent("fixtures/proxy/esphome_connect.py").path

    /// A bird, and a Battery Service device whose level reads, writes and notifies.
    static func fake() async throws -> FakeBlueZ {
        let fake = try await FakeBlueZ()
        try await fake.addBird(address: "F0:0D:B1:7D:00:01", rssi: -45)
        try await fake.addGattDevice(
            address: thermometer, name: "Thermo", service: "0000180f-0000-1000-8000-00805f9b34fb",
            characteristics: [(level, ["read", "write", "notify"], Array("9".utf8))], rssi: -65)
        return fake
    }

    static func path(_ address: String) -> String { "/org/bluez/hci0/dev_" + address.replacingOccurrences(of: ":", with: "_") }

    /// The device's properties in the fake, nil once its object is gone.
    static func device(_ fake: FakeBlueZ, _ address: String) async throws -> [String: DBusValue]? {
        let tree = try await fake.managedObjects()
        return tree.dictionaryEntries?.first { $0.key.objectPath?.rawValue == path(address) }?.value.dictionaryEntries?
            .first { $0.key.string == "org.bluez.Device1" }?.value.propertyMap
    }

    static func connected(_ fake: FakeBlueZ, _ address: String) async throws -> Bool {
        try await device(fake, address)?["Connected"]?.bool == true
    }

    @Test func connectReadWriteNotifyAndTheSlotComesBack() async throws {
        let fake = try await Self.fake()
        let watch = try BirdctlProcess(["watch", "--all", "alpha", "--json", "--proxy", "127.0.0.1:0"], environment: fake.environment)
        let port = try #require(await ProxyCommandTests.proxyPort(of: watch), "\(watch.stderr)")
        _ = try await watch.line(containing: "\"reading\"", within: .seconds(30))

        let client = try Client(port: port, [Self.level, "2a"], watch: watch)
        guard let result = try await client.result(notifying: "7", fake: fake, holding: "feature_flags") else { return }
        #expect(await client.process.exited() == 0)

        #expect(result["feature_flags"] as? Int == 63)
        #expect(result["read"] as? String == "39" && result["read_after_write"] as? String == "2a", "\(result)")
        #expect(result["notified"] as? String == "37", "a read while notifying came as a notification: \(result)")
        #expect(result["read_while_notifying"] as? String == "2a", "\(result)")
        let services = try #require(result["services"] as? [[String: Any]])
        let battery = try #require(services.first { $0["uuid"] as? String == "0000180f-0000-1000-8000-00805f9b34fb" }, "\(services)")
        let characteristic = try #require((battery["characteristics"] as? [[String: Any]])?.first)
        // The fake's level is declared at 0x0b: its value at 0x0c, its configuration at 0x0d.
        #expect(battery["handle"] as? Int == 0x0a && characteristic["handle"] as? Int == 0x0c, "\(battery)")
        #expect(characteristic["descriptors"] as? [Int] == [0x0d], "\(characteristic)")
        // The limit is not known: one link more than those up is offered, and given back.
        let slots = try #require(result["slots"] as? [[Int]])
        #expect(slots.first == [1, 2] && slots.last == [1, 2] && slots.contains([1, 3]), "\(slots)")
        #expect(try await poll { try await !Self.connected(fake, Self.thermometer) }, "the link was not undone")
        #expect(try await Self.device(fake, Self.thermometer) != nil, "a plain disconnect keeps the device (and its cache)")
        let calls = try await fake.calls()
        #expect(!calls.contains("RemoveDevice /org/bluez/hci0"))
        // bluetoothd offers the level's notifications through a socket: they come that way, not as signals.
        let level = "\(Self.path(Self.thermometer))/service000a/char000b"
        #expect(calls.contains("AcquireNotify \(level)") && !calls.contains("StartNotify \(level)"), "\(calls)")

        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// Remote caching, as Home Assistant reconnects: the services are asked
    /// for on the first link only; on the next, with them kept, the client
    /// goes by handle at once (the table is made as the link comes up), and
    /// its own write of the configuration descriptor after subscribing does
    /// not start notifications twice. Notifications as signals here
    /// (`--notify-method start`), where a read's echo is no notification.
    @Test func aClientThatKeepsTheServicesGoesByHandle() async throws {
        let fake = try await Self.fake()
        let watch = try BirdctlProcess(
            ["watch", "--all", "alpha", "--json", "--notify-method", "start", "--proxy", "127.0.0.1:0"], environment: fake.environment)
        let port = try #require(await ProxyCommandTests.proxyPort(of: watch), "\(watch.stderr)")
        let client = try Client(port: port, [Self.level, "--cached"], watch: watch)
        guard let result = try await client.result(notifying: "7", fake: fake, holding: "connects") else { return }
        #expect(await client.process.exited() == 0)

        #expect(result["error"] == nil, "\(result); birdctl said: \(watch.stderr)")
        #expect(result["connects"] as? [Bool] == [false, true], "\(result)")
        #expect(result["services_asked"] as? Int == 1, "\(result)")
        // The client wrote the level's configuration descriptor itself (0x0d), after asking for notifications.
        #expect(result["descriptors_written"] as? [Int] == [0x0d], "\(result)")
        #expect(result["read"] as? String == "39" && result["notified"] as? String == "37", "\(result)")
        let starts = try await fake.calls().filter { $0 == "StartNotify \(Self.path(Self.thermometer))/service000a/char000b" }
        #expect(starts.count == 1, "\(starts)")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// Notifications asked for and given up before BlueZ answers (its
    /// AcquireNotify held 1.5 s): the socket it then hands over is given
    /// back, nothing reaches the client meanwhile, and a later subscription
    /// of the same characteristic works.
    @Test func notificationsGivenUpBeforeBlueZAnswersEndWhenItDoes() async throws {
        let fake = try await Self.fake()
        let watch = try BirdctlProcess(["watch", "--all", "alpha", "--json", "--proxy", "127.0.0.1:0"], environment: fake.environment)
        let port = try #require(await ProxyCommandTests.proxyPort(of: watch), "\(watch.stderr)")
        // The bird subscribes before its first reading: the delay is the client's.
        _ = try await watch.line(containing: "\"reading\"", within: .seconds(30))
        try await fake.call("DelayNext", .string("AcquireNotify"), .double(1.5))
        let client = try Client(port: port, [Self.level, "--overlap"], watch: watch)
        guard client.line(containing: "ready") != nil else { return }
        let level = "\(Self.path(Self.thermometer))/service000a/char000b"
        #expect(try await Self.characteristic(fake, level)?["NotifyAcquired"]?.bool == false, "the socket was kept")
        try await fake.call("PushValue", .string(Self.thermometer), .string(Self.level), .bytes(Array("5".utf8)))
        guard let result = try await client.result(notifying: "6", fake: fake, holding: "while_off") else { return }
        #expect(await client.process.exited() == 0)
        #expect(result["error"] == nil && result["while_off"] as? [String] == [], "\(result)")
        #expect(result["notified"] as? String == "36", "\(result)")
        #expect(try await fake.calls().filter { $0 == "AcquireNotify \(level)" }.count == 2)
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// A characteristic's properties in the fake, nil once its object is gone.
    static func characteristic(_ fake: FakeBlueZ, _ path: String) async throws -> [String: DBusValue]? {
        let tree = try await fake.managedObjects()
        return tree.dictionaryEntries?.first { $0.key.objectPath?.rawValue == path }?.value.dictionaryEntries?
            .first { $0.key.string == "org.bluez.GattCharacteristic1" }?.value.propertyMap
    }

    /// `fixtures/proxy/esphome_connect.py` on the thermometer through the proxy at `port`.
    struct Client {
        let process: ChildProcess
        let stdout: FileHandle
        let watch: BirdctlProcess

        init(port: Int, _ arguments: [String], watch: BirdctlProcess) throws {
            process = try ChildProcess(
                ProxyEndToEndTests.python, [ProxyConnectionTests.script, String(port), "-", ProxyConnectionTests.thermometer] + arguments,
                stdout: .pipe, stderr: .pipe)
            stdout = try #require(process.stdout)
            self.watch = watch
        }

        /// The client's next line if it holds `word`; else nil, recorded
        /// with what the client and birdctl said.
        func line(containing word: String) -> String? {
            let line = readLine(from: stdout)
            if let line, line.contains(word) { return line }
            let said = process.stderr.flatMap { String(data: $0.readDataToEndOfFile(), encoding: .utf8) } ?? ""
            Issue.record("no \(word) from the client (it said \(line ?? "nothing")): \(said); birdctl said: \(watch.stderr)")
            return nil
        }

        /// Once the client says it is notified of the level, the device
        /// notifies `value`; then the client's result (its line holding `word`).
        func result(notifying value: String, fake: FakeBlueZ, holding word: String) async throws -> [String: Any]? {
            guard line(containing: "notifying") != nil else { return nil }
            try await fake.call("PushValue", .string(ProxyConnectionTests.thermometer), .string(ProxyConnectionTests.level), .bytes(Array(value.utf8)))
            return try line(containing: word).map(ProxyEndToEndTests.json)
        }
    }

    /// The client's steps on a link to the thermometer, each with its result.
    static func steps(_ steps: String, fake: FakeBlueZ, watch: BirdctlProcess) async throws -> [[String]] {
        let port = try #require(await ProxyCommandTests.proxyPort(of: watch), "\(watch.stderr)")
        let client = try ChildProcess.run(ProxyEndToEndTests.python, [Self.script, String(port), "-", Self.thermometer, "--steps", steps])
        let line = try #require(client.stdout.split(separator: "\n").first { $0.contains("steps") }, "\(client.stdout)")
        let said = try #require(ProxyEndToEndTests.json(String(line))["steps"] as? [[Any]])
        return said.map { $0.map { "\($0)" } }
    }

    /// Pairing through birdctl's agent; the cache of a bonded device kept
    /// (BlueZ keeps it with the bond); unpairing forgets the device, its
    /// link with it.
    @Test func pairThenUnpair() async throws {
        let fake = try await Self.fake()
        let watch = try BirdctlProcess(["watch", "--all", "alpha", "--json", "--proxy", "127.0.0.1:0"], environment: fake.environment)
        let steps = try await Self.steps("pair,clear_cache,unpair", fake: fake, watch: watch)
        #expect(steps == [["pair", "1"], ["clear_cache", "0"], ["unpair", "1"]], "\(steps); birdctl said: \(watch.stderr)")
        let calls = try await fake.calls()
        #expect(calls.contains("Pair \(Self.path(Self.thermometer))"), "\(calls)")
        #expect(try await Self.device(fake, Self.thermometer) == nil, "unpaired, the device is forgotten")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// A cache cleared goes with the device's object once the link is down,
    /// not before: the link serves its services until then.
    @Test func aClearedCacheGoesWhenTheLinkIsDown() async throws {
        let fake = try await Self.fake()
        let watch = try BirdctlProcess(["watch", "--all", "alpha", "--json", "--proxy", "127.0.0.1:0"], environment: fake.environment)
        let steps = try await Self.steps("clear_cache,get_services,disconnect", fake: fake, watch: watch)
        #expect(
            steps == [["clear_cache", "1"], ["get_services", "BleakGATTServiceCollection"], ["disconnect", "1"]],
            "\(steps); birdctl said: \(watch.stderr)")
        #expect(try await poll { try await Self.device(fake, Self.thermometer) == nil }, "the device and its cache stayed")
        #expect(try await fake.calls().contains("RemoveDevice /org/bluez/hci0"))
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// `--links 1`, held by the bird: no slot for Home Assistant, and no
    /// Connect is tried for it.
    @Test func noSlotNoAttempt() async throws {
        let fake = try await Self.fake()
        let watch = try BirdctlProcess(
            ["watch", "--all", "alpha", "--json", "--links", "1", "--proxy", "127.0.0.1:0"], environment: fake.environment)
        let port = try #require(await ProxyCommandTests.proxyPort(of: watch), "\(watch.stderr)")
        _ = try await watch.line(containing: "\"reading\"", within: .seconds(30))
        let client = try ChildProcess.run(ProxyEndToEndTests.python, [Self.script, String(port), "-", Self.thermometer, Self.level])
        let line = try #require(client.stdout.split(separator: "\n").first { $0.contains("feature_flags") }, "\(client.stdout)")
        let result = try ProxyEndToEndTests.json(String(line))
        #expect(result["error"] != nil, "\(result)")
        #expect((result["slots"] as? [[Int]])?.first == [0, 1], "\(result)")
        #expect(!(try await fake.calls()).contains { $0.hasPrefix("Connect /org/bluez/hci0/dev_C0_FF_EE") })
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// A watch with the proxy, and a client holding a link to the thermometer through it.
    static func holding(_ options: [String] = []) async throws -> (fake: FakeBlueZ, watch: BirdctlProcess, client: ChildProcess, stdout: FileHandle) {
        let fake = try await Self.fake()
        let watch = try BirdctlProcess(["watch", "--all", "alpha", "--json", "--proxy", "127.0.0.1:0"] + options, environment: fake.environment)
        let port = try #require(await ProxyCommandTests.proxyPort(of: watch), "\(watch.stderr)")
        let client = try ChildProcess(
            ProxyEndToEndTests.python, [Self.script, String(port), "-", Self.thermometer, "--hold"], stdout: .pipe, stderr: .pipe)
        let stdout = try #require(client.stdout)
        #expect(try #require(readLine(from: stdout), "not connected; birdctl said: \(watch.stderr)").contains("connected"))
        #expect(try await Self.connected(fake, Self.thermometer))
        return (fake, watch, client, stdout)
    }

    /// `--metrics` beside `--proxy`: the page shows Home Assistant's
    /// clients and links, and a client dropped for what it sent.
    @Test func theHealthPageShowsTheProxy() async throws {
        let (fake, watch, client, _) = try await Self.holding(["--metrics", "127.0.0.1:0"])
        let metrics = try #require(await MetricsPage.port(of: watch), "\(watch.stderr)")
        let page = try await MetricsPage.get("http://127.0.0.1:\(metrics)/metrics").body
        let lines = page.split(separator: "\n")
        for line in ["birdctl_proxy_clients 1", "birdctl_proxy_links 1", "birdctl_proxy_connects_total{result=\"linked\"} 1"] {
            #expect(lines.contains(Substring(line)), "\(line) not in \(page)")
        }
        let checked = try await MetricsPage.promtool(page)
        #expect(checked.status == 0, "promtool: \(checked.output)")
        // A client whose first byte is no frame's is dropped.
        let port = try #require(await ProxyCommandTests.proxyPort(of: watch))
        let garbage = "import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); s.sendall(b'\\x05\\x00\\x00'); s.recv(1)"
        _ = try ChildProcess.run("/usr/bin/python3", ["-c", garbage, String(port)])
        client.kill()
        _ = await client.exited()
        #expect(try await poll { try await !Self.connected(fake, Self.thermometer) })
        let after = try await MetricsPage.get("http://127.0.0.1:\(metrics)/metrics").body.split(separator: "\n")
        for line in ["birdctl_proxy_clients 0", "birdctl_proxy_links 0", "birdctl_proxy_clients_dropped_total 1"] {
            #expect(after.contains(Substring(line)), "\(line) not in \(after)")
        }
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aClientKilledMidConnectionTakesItsLinkWithIt() async throws {
        let (fake, watch, client, _) = try await Self.holding()
        client.kill()
        _ = await client.exited()
        #expect(try await poll { try await !Self.connected(fake, Self.thermometer) }, "the link outlived its client")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// A watch that ends says goodbye to its clients, as ESPHome does at
    /// shutdown (Home Assistant then reconnects without an error), and
    /// undoes their links.
    @Test func anEndingWatchSaysGoodbyeAndUndoesTheLinks() async throws {
        let (fake, watch, client, stdout) = try await Self.holding()
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        let said = try ProxyEndToEndTests.json(try #require(readLine(from: stdout), "the client was not told"))
        #expect(said["disconnected"] as? Bool == true && said["expected"] as? Bool == true, "\(said)")
        #expect(await client.exited() == 0)
        #expect(try await !Self.connected(fake, Self.thermometer), "the link outlived the watch")
    }
}
