import BlueZTestSupport
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
}
