import FakeBlueZSupport
import TestProcesses
import Foundation
import Testing

/// `watch --all` as a service: bluetoothd restarted again and again (the
/// service soak does it every three minutes), each time every bird streams again.
@Suite("watch --all through bluetoothd restarts")
struct WatchAllRestartTests {
    static let birds = (1...3).map { "F0:0D:B1:7D:00:0\($0)" }

    @Test func everyBirdStreamsAgainAfterEachOfSeveralRestarts() async throws {
        let fake = try await FakeBlueZ()
        for bird in Self.birds { try await fake.addBird(address: bird, rssi: -50) }
        let watch = try fake.launch("watch", "--all", "alpha", "--json")
        for round in 0..<4 {
            var streaming: Set<String> = []
            while streaming.count < Self.birds.count {
                let line = try await watch.line(containing: "\"reading\"", within: .seconds(30))
                if let address = try parseJSON(line)["address"] as? String { streaming.insert(address) }
            }
            if round == 3 { break }
            try await fake.stop()
            _ = try await watch.line(containing: "\"waiting\"")
            try await fake.start()
            for bird in Self.birds { try await fake.addBird(address: bird, rssi: -50) }
        }
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }

    /// bluetoothd dies while a Connect of ours is out (the hour-long VM soak:
    /// after that restart no bird got a link again): every bird streams once
    /// it is back.
    @Test func aConnectOutWhenBluetoothdDiesHoldsNothingUp() async throws {
        let fake = try await FakeBlueZ()
        for bird in Self.birds { try await fake.addBird(address: bird, rssi: -50) }
        let watch = try fake.launch("watch", "--all", "alpha", "--json")
        var streaming: Set<String> = []
        while streaming.count < Self.birds.count {
            let line = try await watch.line(containing: "\"reading\"", within: .seconds(30))
            if let address = try parseJSON(line)["address"] as? String { streaming.insert(address) }
        }
        // A fourth bird whose Connect is refused as bluetoothd ends (bluetoothd
        // 5.82 answered "No route to host" as it terminated, in the soak).
        try await fake.delayNext("Connect", seconds: 1)
        try await fake.failNext("Connect", "org.bluez.Error.Failed", "le-connection-abort-by-local")
        try await fake.addBird(address: "F0:0D:B1:7D:00:04", rssi: -50)
        let out = await poll { (try? await fake.calls().contains("Connect /org/bluez/hci0/dev_F0_0D_B1_7D_00_04")) == true }
        #expect(out)
        try await Task.sleep(for: .milliseconds(1050))
        try await fake.stop()
        _ = try await watch.line(containing: "\"waiting\"")
        try await fake.start()
        for bird in Self.birds + ["F0:0D:B1:7D:00:04"] { try await fake.addBird(address: bird, rssi: -50) }
        streaming = []
        while streaming.count < 4 {
            let line = try await watch.line(containing: "\"reading\"", within: .seconds(40))
            if let address = try parseJSON(line)["address"] as? String { streaming.insert(address) }
        }
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }
}
