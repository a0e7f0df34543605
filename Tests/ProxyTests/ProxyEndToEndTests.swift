import Bird
import DBus
import Foundation
import Testing
import TestProcesses

@testable import Proxy

/// The proxy in this process, on a real loop and a real socket, and Home
/// Assistant's own client library (aioesphomeapi 23.0.0, Home Assistant
/// 2024.3's pin) connecting to it as Home Assistant does when it adopts a
/// Bluetooth proxy: the Noise handshake, Hello, login, device info, the
/// entity list, free slots, raw advertisements.
@Suite("The proxy and aioesphomeapi")
struct ProxyEndToEndTests {
    static let project = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let python = project.appendingPathComponent(".build/proxy-venv/bin/python").path
    static let client = project.appendingPathComponent("fixtures/proxy/esphome_client.py").path
    static let keyText = "ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CBgoM="
    static let key = NoiseKey(base64: keyText)!
    static let identity = ProxySession.Identity(
        name: "birdctl-test", friendlyName: "birdctl test", macAddress: "00:AA:01:00:00:00", birdctlVersion: "0.2.0")

    /// A proxy on a loop of its own (a free loopback port).
    final class Running: @unchecked Sendable {
        let loop = EventLoop()
        var server: ProxyServer!
        var said: [String] = []

        init(key: NoiseKey?) async throws {
            loop.start()
            try await on { [self] in
                server = try ProxyServer(
                    loop: loop, configuration: .init(host: "127.0.0.1", port: 0, key: key), identify: { identity }
                ) { [self] in said.append($0) }
            }
        }

        func on(_ body: @escaping @Sendable () throws -> Void) async throws { try await loop.runAndWait(body) }

        /// The server stopped on its loop, then the loop.
        func stop() async throws {
            try await on { [self] in server.stop() }
            loop.stop()
        }

        /// Clients subscribed to advertisements, asked on the loop.
        func subscribers() async throws -> Int {
            let count = Counter()
            try await on { [self] in count.value = server.advertisementSubscribers }
            return count.value
        }

        final class Counter: @unchecked Sendable { var value = 0 }
    }

    static func json(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
    }

    @Test func homeAssistantsClientAdoptsItAndGetsAdvertisements() async throws {
        let proxy = try await Running(key: Self.key)
        let port = proxy.server.port
        try await proxy.on {
            // Heard before the client came: it gets it as it subscribes.
            var wren = BluetoothLERawAdvertisement()
            wren.address = 0xC0B1_2D00_0003
            wren.rssi = -60
            proxy.server.devicesHeard = { [wren] }
        }
        let child = try ChildProcess(Self.python, [Self.client, String(port), Self.keyText, "3"], stdout: .pipe, stderr: .pipe)
        let stdout = try #require(child.stdout)
        let subscribed = try #require(readLine(from: stdout), "the client did not subscribe")
        #expect(subscribed.contains("subscribed"))
        // The client has sent its subscription; the proxy takes it in on its loop.
        #expect(try await poll { try await proxy.subscribers() == 1 })
        try await proxy.on {
            var robin = BluetoothLERawAdvertisement()
            robin.address = 0xC0B1_2D00_0001
            robin.rssi = -48
            robin.addressType = 1
            robin.data = Data([0x06, 0x09] + Array("Robin".utf8))
            proxy.server.advertise(robin)
            robin.address = 0xC0B1_2D00_0002
            robin.rssi = -71
            proxy.server.advertise(robin)
        }
        let line = try #require(readLine(from: stdout), "the client printed no result")
        let result = try Self.json(line)
        #expect(result["name"] as? String == "birdctl-test")
        #expect(result["mac_address"] as? String == "00:AA:01:00:00:00")
        #expect(result["feature_flags"] as? Int == 63)
        #expect(result["entities"] as? Int == 0)
        #expect(result["slots"] as? [Int] == [0, 0])
        let advertisements = try #require(result["advertisements"] as? [[String: Any]])
        #expect(advertisements.map { $0["address"] as? String } == ["C0B12D000003", "C0B12D000001", "C0B12D000002"])
        #expect(advertisements[1]["data"] as? String == "0609526f62696e")
        #expect(advertisements.map { $0["rssi"] as? Int } == [-60, -48, -71])
        #expect(await child.exited() == 0)
        try await proxy.stop()
    }

    /// Home Assistant's config flow: a client with no key is told encryption
    /// is required; one with another key learns the proxy's name and that
    /// its key is wrong; neither gets anything else.
    @Test func aClientWithoutTheKeyGetsNothing() async throws {
        let proxy = try await Running(key: Self.key)
        let port = String(proxy.server.port)
        let plain = try ChildProcess.run(Self.python, [Self.client, port, "-"])
        #expect(try Self.json(plain.stdout)["error"] as? String == "requires encryption", "\(plain.stdout)")
        let wrong = try ChildProcess.run(Self.python, [Self.client, port, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
        let answer = try Self.json(wrong.stdout)
        #expect(answer["error"] as? String == "invalid key" && answer["name"] as? String == "birdctl-test", "\(wrong.stdout)")
        try await proxy.stop()
    }

    @Test func aKeyIsThirtyTwoBytesInBase64() {
        #expect(NoiseKey(base64: " \(Self.keyText)\n")?.bytes == Array(UInt8(100)...UInt8(131)))
        #expect(NoiseKey(base64: "AAAA") == nil)
        #expect(NoiseKey(base64: String(Self.keyText.dropLast(4)) + "AA==") == nil)  // 31 bytes
        #expect(NoiseKey(base64: String(repeating: "!", count: 44)) == nil)
        #expect(NoiseKey(bytes: Array(repeating: 1, count: 33)) == nil)
    }
}
