import FakeBlueZSupport
import TestProcesses
import Foundation
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

    /// A limit learned is kept in the state directory (by the adapter's
    /// address), and the birds followed; killed and started again, birdctl
    /// takes the limit at once, says so, learns nothing again, and adopts
    /// the links the first run left up (polled birds are read in turn, none
    /// kept from the others); stopped, it writes every bird it read. A
    /// state file it cannot read is said and ignored.
    @Test func aLearnedLimitOutlivesARestart() async throws {
        let fake = try await FakeBlueZ()
        for n in 1...4 {
            try await fake.addBird(address: "F0:0D:B1:7D:00:0\(n)", name: "Bird\(n)", alpha: "\(10 * n)")
            // As a Bumble bird: a link up hides it from discovery, so only asking BlueZ finds it.
            try await fake.call("SetQuietWhileLinked", .string("F0:0D:B1:7D:00:0\(n)"), .bool(true))
        }
        try await fake.call("SetMaxLinks", .uint32(2))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("birdctl-state-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("state")
        let arguments = ["watch", "--all", "alpha", "--json", "--connect-timeout", "2", "--state-dir", directory.path]

        let first = try BirdctlProcess(arguments, environment: fake.environment)
        let learned = try parseJSON(try await first.line(containing: "\"links\"", within: .seconds(60)))
        #expect(learned["limit"] as? Int == 2 && learned["limit_learned"] as? Bool == true, "\(learned)")
        let kept = try String(contentsOf: file, encoding: .utf8)
        #expect(kept.hasPrefix("birdctl-state 1\nlimit 00:AA:01:00:00:00 2\nbird F0:0D:B1:7D:00:01 "), "\(kept)")
        first.signal(SIGKILL)
        _ = try await first.waitForExit()
        let refused = try await fake.call("Links").last?.integer ?? 0
        // Every bird known, last read long ago: the second run writes its
        // readings only every 10 minutes, or as it ends.
        let known = (1...4).map { "bird F0:0D:B1:7D:00:0\($0) 0\n" }.joined()
        try ("birdctl-state 1\nlimit 00:AA:01:00:00:00 2\n" + known).write(to: file, atomically: true, encoding: .utf8)
        let secondStarted = Int64(Date().timeIntervalSince1970)

        let second = try BirdctlProcess(arguments, environment: fake.environment)
        let recalled = try parseJSON(try await second.line(containing: "\"event\"", within: .seconds(30)))
        #expect(recalled["event"] as? String == "links" && recalled["limit"] as? Int == 2 && recalled["limit_learned"] as? Bool == true,
                "the limit taken at start, before any connect: \(recalled)")
        var read: Set<String> = []
        let deadline = ContinuousClock.now + .seconds(90)
        while read.count < 4 {
            try #require(ContinuousClock.now < deadline, "every bird read within 90 s of the restart; read: \(read.sorted())")
            let event = try parseJSON(try await second.line(containing: "\"event\"", within: .seconds(60)))
            if event["event"] as? String == "reading" { read.insert(event["address"] as? String ?? "") }
            #expect(event["event"] as? String != "links" || event["limit"] as? Int == 2, "no other limit: \(event)")
        }
        second.signal(SIGINT)
        #expect(try await second.waitForExit() == 0)
        let links = try await fake.call("Links")
        #expect(links.first?.integer == 2, "never more than two links up: \(links)")
        // The first run's links, kept by bluetoothd, may be adopted after a new
        // attempt was let through (birdctl counts the links it knows of): at most one refusal more.
        #expect((links.last?.integer ?? 0) - refused <= 1, "not learned again from refusals: \(refused) then \(links)")
        let keptAfter = try String(contentsOf: file, encoding: .utf8)
        #expect(keptAfter.hasPrefix("birdctl-state 1\nlimit 00:AA:01:00:00:00 2\nbird "), "\(keptAfter)")
        let readAt = Dictionary(uniqueKeysWithValues: keptAfter.split(separator: "\n").compactMap { line -> (String, Int64)? in
            let words = line.split(separator: " ")
            return words.count == 3 && words[0] == "bird" ? (String(words[1]), Int64(words[2]) ?? -1) : nil
        })
        for n in 1...4 {
            #expect((readAt["F0:0D:B1:7D:00:0\(n)"] ?? -1) >= secondStarted, "each bird read is written as the watch ends: \(keptAfter)")
        }

        try "birdctl-state 9\nlimit 00:AA:01:00:00:00 1\n".write(to: file, atomically: true, encoding: .utf8)
        let third = try BirdctlProcess(arguments, environment: fake.environment)
        _ = try await third.line(containing: "\"event\"", within: .seconds(30))
        let warned = await third.stderr(contains: "warning: ignoring the state file \(file.path): it is not a birdctl state file")
        #expect(warned, "\(third.stderr)")
        third.signal(SIGINT)
        #expect(try await third.waitForExit() == 0)
    }
}
