import FakeBlueZSupport
import MosquittoSupport
import TestProcesses
import Foundation
import Glibc
import Testing

/// The system bus's daemon killed (SIGKILL) under a running command: it ends
/// with exit 12 and says why, rather than sleeping for ever (libdbus stops
/// watching a closed socket, and before birdctl listened for the loss
/// `watch` sat in epoll_wait at 0 % CPU and systemd never restarted it).
/// The deadline is generous on purpose: the point is that it ends at all
/// (it takes milliseconds; see the fault matrix in docs/guide.md).
@Suite("the system bus goes away")
struct BusLossTests {
    static let message = "the system bus went away"
    static let deadline = Duration.seconds(10)

    @Test(arguments: [["watch"], ["watch", "--all"]])
    func watchEnds(_ command: [String]) async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try BirdctlProcess(command + ["alpha", "--json"], environment: fake.environment)
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        fake.bus.stop()
        let status = try await watch.waitForExit(within: Self.deadline)
        #expect(status == 12, "\(watch.stderr)")
        #expect(watch.stderr.contains(Self.message), "\(watch.stderr)")
        #expect(occurrences(of: "error:", in: watch.stderr) == 1, "one error, the cause: \(watch.stderr)")
    }

    @Test func scanUntilCtrlCEnds() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let scan = try fake.launch("scan", "--timeout", "0", "--json")
        _ = try await scan.line(containing: "\"found\"")
        fake.bus.stop()
        #expect(try await scan.waitForExit(within: Self.deadline) == 12, "\(scan.stderr)")
        #expect(scan.stderr.contains(Self.message), "\(scan.stderr)")
    }

    @Test func serveEnds() async throws {
        let fake = try await FakeBlueZ()
        let serve = try fake.launch("serve", "--json")
        _ = try await serve.line(containing: "\"advertising\"")
        fake.bus.stop()
        #expect(try await serve.waitForExit(within: Self.deadline) == 12, "\(serve.stderr)")
        #expect(serve.stderr.contains(Self.message), "\(serve.stderr)")
    }

    /// A read waiting for a reply that will never come: the call fails
    /// because the bus went, and the bus's loss is what is said, once.
    @Test func aReadWaitingForItsReplyEnds() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.delayAlways("ReadValue", seconds: -1)
        let read = try fake.launch("read", bird, "alpha")
        _ = try await poll { try await fake.calls().contains { $0.hasPrefix("ReadValue") } }
        fake.bus.stop()
        #expect(try await read.waitForExit(within: Self.deadline) == 12, "\(read.stderr)")
        #expect(read.stderr.contains(Self.message), "\(read.stderr)")
        #expect(occurrences(of: "error:", in: read.stderr) == 1, "one error, the cause: \(read.stderr)")
    }

    /// `watch --mqtt` mid-stream: every reading it received (and printed)
    /// before the bus went still reaches the broker, in order, and the
    /// gateway's clean goodbye (each bird offline) goes out before exit 12.
    @Test func theGatewayHandsTheBrokerWhatItReceivedAndEnds() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let subscriber = try await broker.subscribe(["gw/#"])
        let watch = try fake.launch("watch", "alpha", "--json", "--mqtt", broker.url(prefix: "gw"), "--no-discovery")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        #expect(await watch.stderr(contains: "connected to the MQTT broker"))
        // 2,000 a second for two seconds: the bus goes mid-stream. Its reply never comes.
        let pace = Task { try? await fake.call("Pace", .string(bird), .string(alphaUUID), .uint32(4000), .uint32(101)) }
        defer { pace.cancel() }
        var printed: [Double] = []
        while printed.count < 50, let line = try await watch.nextLine() {
            if line.contains("\"reading\"") { printed.append(try readingValue(line)) }
        }
        try #require(printed.count == 50, "the bus must go mid-stream, after readings were printed")
        fake.bus.stop()
        let finished = try await watch.finish(within: Self.deadline)
        #expect(finished.status == 12, "\(finished.stderr)")
        #expect(finished.stderr.contains(Self.message), "\(finished.stderr)")
        printed += try finished.stdout.filter { $0.contains("\"reading\"") }.map(readingValue)

        let seen = try await subscriber.messages(until: { $0.topic == "gw/\(bird)/status" && $0.payload == "offline" })
        let published = seen.filter { $0.topic == "gw/\(bird)/alpha" }.compactMap { Double($0.payload) }
            .drop(while: { $0 != printed.first })
        #expect(Array(published) == printed, "printed \(printed.count), the broker got \(published.count)")
        #expect(try await broker.retained("gw/status")["gw/status"] == "offline")
    }
}

private func occurrences(of text: String, in string: String) -> Int {
    string.components(separatedBy: text).count - 1
}

private func readingValue(_ line: String) throws -> Double {
    try #require(try parseJSON(line)["value"] as? Double, "\(line)")
}
