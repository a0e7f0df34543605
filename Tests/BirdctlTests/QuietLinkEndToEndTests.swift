import FakeBlueZSupport
import TestProcesses
import DBus
import Glibc
import Testing

/// Watches (`--all` and of one bird) and links that die quietly, on the fake BlueZ: the bird
/// notifies every 200 ms (Chatter), then keeps its link but says nothing
/// more (Hang).
@Suite("Links that die quietly")
struct QuietLinkEndToEndTests {
    /// Lines up to the first `quiet` event with this probe outcome; those before it are returned too.
    private func quiet(_ probe: String, from watch: BirdctlProcess) async throws -> (event: [String: Any], before: [String]) {
        var before: [String] = []
        while true {
            let line = try await watch.line(containing: "\"event\"", within: .seconds(30))
            let event = try parseJSON(line)
            if event["event"] as? String == "quiet", event["probe"] as? String == probe { return (event, before) }
            before.append(line)
        }
    }

    /// `all`: `watch --all`; else `watch` of the bird alone.
    private func chattering(all: Bool = true) async throws -> (FakeBlueZ, BirdctlProcess) {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch =
            if all { try fake.launch("watch", "--all", "alpha", "--json", "--quiet-after", "2", "--connect-timeout", "2") }
            else { try fake.launch("watch", bird, "alpha", "--json", "--quiet-after", "2") }
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        try await fake.call("Chatter", .string(bird), .string(alphaUUID), .uint32(200))
        _ = try await watch.line(containing: "\"notify\"")
        return (fake, watch)
    }

    /// Notifications stop and reads go unanswered: the probe's deadline
    /// passes, the link is ended, and the bird, heard again, streams again.
    @Test func aBirdDeadOnItsLinkIsFoundAgain() async throws {
        let (fake, watch) = try await chattering()
        try await fake.call("Hang", .string(bird), .bool(false))
        let (sent, _) = try await quiet("sent", from: watch)
        #expect(sent["address"] as? String == bird)
        // Two usual gaps of at least 1 s each (the learned gap depends on when the chatter began).
        let usual = try #require(sent["usual_gap_s"] as? Double, "\(sent)")
        #expect(usual >= 1 && abs((sent["silent_s"] as? Double ?? 0) - 2 * usual) < 0.01, "\(sent)")
        let (unanswered, between) = try await quiet("unanswered", from: watch)
        #expect((unanswered["message"] as? String ?? "").contains("no answer"), "\(unanswered)")
        #expect(!between.contains { $0.contains("\"disconnected\"") })
        _ = try await watch.line(containing: "\"disconnected\"")
        #expect(try await fake.calls().contains { $0.hasPrefix("Disconnect \(birdPath)") })
        try await fake.call("SetRSSI", .string(bird), .int16(-55))  // heard again
        _ = try await watch.line(containing: "\"connected\"")
        let again = try parseJSON(try await watch.line(containing: "\"notify\""))
        #expect(again["address"] as? String == bird)
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// One bird watched (not `--all`), and bluetoothd holding our Disconnect
    /// (5.82 held it ~2 s, and answered a Connect sent meanwhile at once, on
    /// the dying link: StartNotify then failed with NotConnected, exit 7).
    /// The bird, heard again at once, is connected to once that link is down:
    /// one `connected`, then it streams, with no link lost between.
    @Test func oneBirdDeadOnItsLinkIsConnectedAgainOnceTheLinkIsDown() async throws {
        let (fake, watch) = try await chattering(all: false)
        try await fake.delayAlways("Disconnect", seconds: 3)
        try await fake.call("Hang", .string(bird), .bool(false))
        _ = try await quiet("unanswered", from: watch)
        _ = try await watch.line(containing: "\"disconnected\"")
        var after: [String] = []
        while true {
            let line = try await watch.line(containing: "\"event\"", within: .seconds(30))
            after.append(line)
            if line.contains("\"notify\"") { break }
        }
        #expect(after.count { $0.contains("\"connected\"") } == 1, "\(after)")
        #expect(!after.contains { $0.contains("\"disconnected\"") || $0.contains("\"error\"") }, "\(after)")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// Notifications stop but reads are answered: the bird is merely quiet,
    /// its link kept, and it is looked at again after a window twice as long.
    @Test func aQuietBirdThatAnswersKeepsItsLink() async throws {
        let (fake, watch) = try await chattering()
        try await fake.call("Hang", .string(bird), .bool(true))
        let (first, _) = try await quiet("sent", from: watch)
        _ = try await quiet("answered", from: watch)
        let (second, between) = try await quiet("sent", from: watch)
        let silences = [first, second].map { $0["silent_s"] as? Double ?? 0 }
        #expect(abs(silences[1] - 2 * silences[0]) < 0.01, "the window doubled: \(first), \(second)")
        #expect(!between.contains { $0.contains("\"disconnected\"") || $0.contains("\"connected\"") }, "\(between)")
        #expect(!(try await fake.calls()).contains { $0.hasPrefix("Disconnect") })
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }
}
