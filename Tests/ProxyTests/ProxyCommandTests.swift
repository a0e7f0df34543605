import FakeBlueZSupport
import Foundation
import Glibc
import Testing
import TestProcesses

/// `birdctl watch --all --proxy`: one process follows its Birds and is the
/// Bluetooth proxy Home Assistant's client library (aioesphomeapi 23.0.0)
/// adopts, passing on every device heard, Bird or not.
@Suite("birdctl watch --all --proxy")
struct ProxyCommandTests {
    static let bird = "F0:0D:B1:7D:00:01"
    static let battery = "C0:FF:EE:00:00:01"
    static let thermometer = "C0:FF:EE:00:00:02"

    /// A key file only its owner reads.
    static func keyFile(_ text: String = ProxyEndToEndTests.keyText, mode: mode_t = 0o600) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("birdctl-proxy-key-\(UUID().uuidString)").path
        try Data((text + "\n").utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, mode)
        return path
    }

    /// The port the watch says it serves the proxy on.
    static func proxyPort(of watch: BirdctlProcess) async -> Int? {
        let said = "serving a Bluetooth proxy at 127.0.0.1:"
        guard await watch.stderr(contains: said, within: .seconds(30)), let range = watch.stderr.range(of: said) else { return nil }
        return Int(watch.stderr[range.upperBound...].prefix { $0.isNumber })
    }

    @Test func homeAssistantHearsEveryDeviceWhileTheWatchReadsItsBirds() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(address: Self.bird, rssi: -45)
        try await fake.addDevice(address: Self.battery, name: "Battery", rssi: -70)
        let key = try Self.keyFile()
        defer { unlink(key) }
        let watch = try BirdctlProcess(
            ["watch", "--all", "alpha", "--json", "--proxy", "127.0.0.1:0", "--proxy-key", key, "--metrics", "127.0.0.1:0"],
            environment: fake.environment)
        let port = try #require(await Self.proxyPort(of: watch), "\(watch.stderr)")
        #expect(watch.stderr.contains("(encrypted)"))

        let client = try ChildProcess(
            ProxyEndToEndTests.python, [ProxyEndToEndTests.client, String(port), ProxyEndToEndTests.keyText, "3"], stdout: .pipe,
            stderr: .pipe)
        let stdout = try #require(client.stdout)
        #expect(try #require(readLine(from: stdout), "the client did not subscribe").contains("subscribed"))
        // Heard after the client subscribed: it comes as BlueZ signals it.
        try await fake.addDevice(address: Self.thermometer, name: "Thermo", uuids: ["00001809-0000-1000-8000-00805f9b34fb"], rssi: -80)
        let result = try ProxyEndToEndTests.json(try #require(readLine(from: stdout), "the client printed no result"))
        #expect(await client.exited() == 0)
        #expect(result["mac_address"] as? String == "00:AA:01:00:00:00", "\(result)")
        #expect((result["name"] as? String)?.hasPrefix("birdctl-") == true)
        let advertisements = try #require(result["advertisements"] as? [[String: Any]], "\(result); birdctl said: \(watch.stderr)")
        func last(_ address: String) -> [String: Any]? {
            advertisements.last { $0["address"] as? String == address.filter { $0 != ":" } }
        }
        let bird = try #require(last(Self.bird), "\(advertisements)")
        let battery = try #require(last(Self.battery), "\(advertisements)")
        let thermometer = try #require(last(Self.thermometer), "\(advertisements)")
        #expect(bird["rssi"] as? Int == -45 && battery["rssi"] as? Int == -70 && thermometer["rssi"] as? Int == -80)
        // The name, then the Battery Service's 16-bit UUID, as AD structures.
        #expect((battery["data"] as? String)?.hasPrefix("08094261747465727903030f18") == true, "\(battery)")
        #expect((bird["data"] as? String)?.hasPrefix("0609526f62696e") == true, "\(bird)")
        // The health page counts what was passed on: at least the three devices' advertisements.
        let metrics = try #require(await MetricsPage.port(of: watch), "\(watch.stderr)")
        let page = try await MetricsPage.get("http://127.0.0.1:\(metrics)/metrics").body
        let passedOn = page.split(separator: "\n").first { $0.hasPrefix("birdctl_proxy_advertisements_total ") }
        #expect(passedOn.flatMap { Int($0.split(separator: " ")[1]) }.map { $0 >= advertisements.count } == true, "\(page)")

        // The watch followed its bird all along.
        _ = try await watch.line(containing: "\"reading\"", within: .seconds(30))
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// Plaintext only where it was asked for or no other machine can
    /// connect; a key that is not one, or proxy options without --proxy,
    /// are usage errors (2) before anything is done.
    @Test func aProxyAskedForWronglyIsAUsageError() async throws {
        let fake = try await FakeBlueZ()
        let short = try Self.keyFile("AAAA")
        defer { unlink(short) }
        let cases: [([String], String)] = [
            (["--proxy", "6053"], "--proxy on *:6053 needs --proxy-key FILE"),
            (["--proxy", "0.0.0.0:6053"], "--proxy on 0.0.0.0:6053 needs --proxy-key FILE"),
            (["--proxy", "127.0.0.1:0", "--proxy-key", short], "should hold 32 bytes in base64"),
            (["--proxy", "127.0.0.1:0", "--proxy-key", "/nonexistent"], "--proxy-key: cannot read /nonexistent"),
            (["--proxy", "127.0.0.1:0", "--proxy-key", short, "--proxy-plaintext"], "choose one"),
            (["--proxy-plaintext"], "--proxy-plaintext goes with --proxy"),
        ]
        for (arguments, said) in cases {
            let watch = try await BirdctlProcess.run(["watch", "--all"] + arguments, environment: fake.environment)
            #expect(watch.status == 2 && watch.stderr.contains(said), "\(arguments): \(watch.status) \(watch.stderr)")
        }
        let one = try await BirdctlProcess.run(["watch", Self.bird, "--proxy", "127.0.0.1:0"], environment: fake.environment)
        #expect(one.status == 2 && one.stderr.contains("--proxy goes with --all"), "\(one.stderr)")
    }

    /// A key others can read is warned about; plaintext on loopback needs no key.
    @Test func plaintextOnLoopbackAndAKeyOthersCanRead() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addDevice(address: Self.battery, name: "Battery", rssi: -70)
        let open = try Self.keyFile(mode: 0o644)
        defer { unlink(open) }
        let warned = try BirdctlProcess(
            ["watch", "--all", "--proxy", "127.0.0.1:0", "--proxy-key", open], environment: fake.environment)
        #expect(await warned.stderr(contains: "other users can read it (chmod 600 \(open))"), "\(warned.stderr)")
        warned.signal(SIGINT)
        _ = try await warned.waitForExit()

        let plain = try BirdctlProcess(["watch", "--all", "--proxy", "127.0.0.1:0"], environment: fake.environment)
        let port = try #require(await Self.proxyPort(of: plain), "\(plain.stderr)")
        #expect(plain.stderr.contains("(plaintext)"))
        let client = try ChildProcess.run(ProxyEndToEndTests.python, [ProxyEndToEndTests.client, String(port), "-", "1"])
        let result = try ProxyEndToEndTests.json(try #require(client.stdout.split(separator: "\n").last.map(String.init)))
        #expect((result["advertisements"] as? [[String: Any]])?.first?["address"] as? String == "C0FFEE000001", "\(result)")
        plain.signal(SIGINT)
        #expect(try await plain.waitForExit() == 0)
    }
}
