import FakeBlueZSupport
import DBus
import Glibc
import Testing

/// More birds than the adapter has links.
@Suite("More birds than links")
struct LinkLimitTests {
    /// Five birds, a controller that holds two links and does not say so
    /// (Connect past the limit is never answered): the limit is learned from
    /// two such Connects in a row, never exceeded again (its check comes only
    /// after 10 minutes), and every bird gets readings.
    @Test func everyBirdIsReadThroughTwoLinks() async throws {
        let fake = try await FakeBlueZ()
        let birds = (1...5).map { "F0:0D:B1:7D:00:0\($0)" }
        for (n, address) in birds.enumerated() {
            try await fake.addBird(address: address, name: "Bird\(n + 1)", alpha: "\(10 * (n + 1))", rssi: Int16(-40 - n))
        }
        try await fake.call("SetMaxLinks", .uint32(2))
        let watch = try fake.launch(
            "watch", "--all", "alpha", "--json", "--connect-timeout", "2", "--poll-interval", "1")
        var read: Set<String> = []
        var limit: [String: Any]?
        var polled: Set<String> = []
        while read.count < birds.count || limit == nil {
            let event = try parseJSON(try await watch.line(containing: "\"event\"", within: .seconds(30)))
            switch event["event"] as? String {
            case "reading": read.insert(event["address"] as? String ?? "")
            case "links": limit = event
            case "polled": polled.insert(event["address"] as? String ?? "")
            default: break
            }
        }
        #expect(limit?["limit"] as? Int == 2 && limit?["limit_learned"] as? Bool == true, "\(limit ?? [:])")
        #expect(polled.count == 1, "one held bird made room for polling: \(polled)")
        // Polled birds come round again.
        var again: Set<String> = []
        while again.count < birds.count - 1 {
            let event = try parseJSON(try await watch.line(containing: "\"reading\"", within: .seconds(30)))
            again.insert(event["address"] as? String ?? "")
        }
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        let links = try await fake.call("Links")
        #expect(links.first?.integer == 2, "never more than two links up: \(links)")
        #expect(links.last?.integer == 2, "two Connects past the limit, the two it was learned from: \(links)")
    }
}
