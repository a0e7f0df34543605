import FakeBlueZSupport
import MosquittoSupport
import TestProcesses
import Foundation
import DBus
import Glibc
import Testing

/// A service among strangers: devices advertising the Bird Service at
/// addresses of their own (as random addresses rotate), some never answering,
/// some asking for pairing, as fast as the fake can make them.
/// Serialized: each runs a fake at full speed; two at once on a small machine
/// would only slow everything else the unit run does beside them.
/// Not under a sanitizer (`make sanitize`): AddressSanitizer keeps freed
/// memory in quarantine and shadows every byte, so private memory measures
/// the sanitizer, not birdctl (it grew by ~480 MiB there). `make test-unit`
/// runs these uninstrumented.
@Suite(
    "A crowd of strangers", .serialized, .timeLimit(.minutes(5)),
    .enabled(if: ProcessInfo.processInfo.environment["ASAN_OPTIONS"] == nil
        && ProcessInfo.processInfo.environment["TSAN_OPTIONS"] == nil))
struct StrangerFloodTests {
    static let strangers: UInt32 = 100_000
    static let connectingStrangers: UInt32 = 600

    @Test func watchAllKeepsStreamingTheRealBirdAndForgetsTheCrowd() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch(
            "watch", "--all", "alpha", "--json", "--connect-timeout", "1", "--forget-after", "2")
        let counter = LineCounter(watch)
        try await counter.waitFor { $0.readings >= 1 }
        try await waitForNotifying(fake)
        let before = watch.privateMemoryKiB
        try await fake.call("Strangers", .uint32(Self.strangers), .uint32(300), .string("mixed"))
        // The real bird notifies throughout the crowd: every value arrives.
        var pushed = 0
        while try await fake.call("StrangersLeft").first?.integer != 0 || pushed < 20 {
            pushed += 1
            try await fake.push(String(pushed % 100))
            try await counter.waitFor { $0.readings >= 1 + pushed }
        }
        // Let the fleet forget the last of them (--forget-after 2: within 2 s
        // of the last heard), and birdctl give back what they took (checked
        // every 10 s: FreedMemory).
        try await Task.sleep(for: .seconds(12))
        let after = watch.privateMemoryKiB
        let counts = await counter.counts
        #expect(counts.readings == 1 + pushed, "no reading of the real bird lost")
        #expect(counts.strangersFound > 100 && counts.declined > 0, "the crowd was heard: \(counts)")
        let left = try await fake.call("StrangersLeft")
        #expect(left.first?.integer == 0 && left.last?.integer == 0, "every stranger gone, none bonded with: \(left)")
        #expect(after - before < 2048, "private memory grew by \(after - before) KiB (from \(before) KiB)")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        print("stranger flood: \(pushed) readings, \(counts), private memory \(before) -> \(after) KiB")
    }

    @Test func watchAllMQTTPublishesEveryReadingAndLeavesNothingOfTheCrowdRetained() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        // Only the real bird's readings: a subscriber to the crowd's events
        // would cost more than the gateway it watches.
        let values = try await broker.subscribe(["gw/\(bird)/alpha"])
        let watch = try fake.launch(
            "watch", "--all", "alpha", "--json", "--connect-timeout", "1", "--forget-after", "2",
            "--mqtt", broker.url(prefix: "gw"))
        let counter = LineCounter(watch)
        try await counter.waitFor { $0.readings >= 1 }
        _ = try await values.messages { $0.topic == "gw/\(bird)/alpha" }
        try await waitForNotifying(fake)
        let before = watch.privateMemoryKiB
        try await fake.call("Strangers", .uint32(Self.strangers), .uint32(300), .string("mixed"))
        // Every value the bird notifies during the crowd reaches the broker,
        // each once and in order (values pushed one at a time, each awaited there).
        var pushed = 0
        var published = 1
        while try await fake.call("StrangersLeft").first?.integer != 0 || pushed < 20 {
            pushed += 1
            let value = pushed % 99 + 1  // 1…99: "0.0N", "0.N" or "0.NN" on the broker
            try await fake.push(String(value))
            try await counter.waitFor { $0.readings >= 1 + pushed }
            let arrived = try await values.messages(within: .seconds(120)) { $0.topic == "gw/\(bird)/alpha" }
            published += arrived.count
            #expect(arrived.map(\.payload) == [value < 10 ? "0.0\(value)" : value % 10 == 0 ? "0.\(value / 10)" : "0.\(value)"], "reading \(pushed) on the broker")
        }
        try await Task.sleep(for: .seconds(12))
        let after = watch.privateMemoryKiB
        let counts = await counter.counts
        #expect(counts.readings == 1 + pushed && published == 1 + pushed, "printed \(counts.readings), published \(published)")
        #expect(counts.strangersFound > 100 && counts.declined > 0, "the crowd was heard: \(counts)")
        let left = try await fake.call("StrangersLeft")
        #expect(left.first?.integer == 0 && left.last?.integer == 0, "every stranger gone, none bonded with: \(left)")
        #expect(after - before < 2048, "private memory grew by \(after - before) KiB (from \(before) KiB)")
        // Forgotten (2 s) and cleared while the gateway runs: nothing of a
        // stranger is retained, neither its topics nor its discovery.
        let retained = try await broker.retained("#")
        let ofStrangers = retained.keys.filter { $0.contains("D0:") || $0.contains("birdctl_gw_D0") }
        #expect(ofStrangers.isEmpty, "\(ofStrangers.count) retained topics of strangers: \(ofStrangers.sorted().prefix(10))")
        #expect(retained["gw/\(bird)/status"] == "online", "the real bird is still there")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        print("stranger flood --mqtt: \(published) readings on the broker, \(counts), private memory \(before) -> \(after) KiB, \(retained.count) retained topics")
    }

    /// Strangers that are Birds, one every 20 ms, each connected, read,
    /// subscribed to and published, then out of range and forgotten; three
    /// such crowds. What they leave is glibc's heap, not birdctl's state:
    /// the pages where the crowd's last survivors sit stay resident after
    /// `malloc_trim`, and the next crowd reuses them. So the first crowd
    /// raises private memory once and the later ones hardly at all.
    @Test func strangersThatConnectLeaveAHighWaterMarkNotAGrowth() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let watch = try fake.launch(
            "watch", "--all", "alpha", "--json", "--connect-timeout", "1", "--forget-after", "2",
            "--mqtt", broker.url(prefix: "gw"))
        guard let first = try await watch.nextLine(within: .seconds(30)) else { throw LineCounterError.ended }
        #expect(first.contains(bird), "\(first)")
        try await waitForNotifying(fake)
        // Lines read as they come (a full pipe would stall the watch).
        let strangersRead = Task {
            var read = Set<Substring>()
            while let line = try await watch.nextLine(within: .seconds(120)) {
                guard line.contains("\"reading\""), let at = line.range(of: "D0:") else { continue }
                read.insert(line[at.lowerBound...].prefix(17))
            }
            return read.count
        }
        var memory = [watch.privateMemoryKiB]
        for _ in 1...3 {
            try await fake.call("Strangers", .uint32(Self.connectingStrangers), .uint32(10_000), .string("birds"))
            while try await fake.call("StrangersLeft").first?.integer != 0 {
                try await Task.sleep(for: .milliseconds(500))
            }
            // Forgotten (2 s), and the freed memory given back (FreedMemory: every 10 s).
            try await Task.sleep(for: .seconds(12))
            memory.append(watch.privateMemoryKiB)
        }
        let retained = try await broker.retained("#")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        let read = try await strangersRead.value
        #expect(read > 150, "strangers connected and read: \(read)")
        let ofStrangers = retained.keys.filter { $0.contains("D0:") || $0.contains("birdctl_gw_D0") }
        #expect(ofStrangers.isEmpty, "\(ofStrangers.count) retained topics of strangers: \(ofStrangers.sorted().prefix(10))")
        let growth = zip(memory.dropFirst(), memory).map { $0 - $1 }
        #expect(growth[0] < 2048, "the first crowd raised private memory by \(growth[0]) KiB: \(memory)")
        #expect(growth[2] < 256, "the third crowd raised private memory by \(growth[2]) KiB: \(memory)")
        print("strangers that connect: \(read) read in three crowds, private memory \(memory) KiB")
    }

    @Test func scanForgetsTheCrowd() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let scan = try fake.launch("scan", "--timeout", "0", "--forget-after", "2", "--json")
        guard let first = try await scan.nextLine(within: .seconds(30)) else { throw LineCounterError.ended }
        #expect(first.contains(bird), "\(first)")
        let before = scan.privateMemoryKiB
        try await fake.call("Strangers", .uint32(Self.strangers), .uint32(300), .string("silent"))
        // Lines read as they come (a full pipe would stall the scan).
        let lines = Task {
            var found = 0
            while let line = try await scan.nextLine(within: .seconds(60)) {
                if line.contains("\"found\"") && line.contains("D0:") { found += 1 }
            }
            return found
        }
        while try await fake.call("StrangersLeft").first?.integer != 0 {
            try await Task.sleep(for: .milliseconds(500))
        }
        try await Task.sleep(for: .seconds(12))
        let after = scan.privateMemoryKiB
        scan.signal(SIGINT)
        #expect(try await scan.waitForExit() == 0)
        let found = try await lines.value
        #expect(found > 100, "the crowd was heard: \(found) found")
        #expect(after - before < 2048, "private memory grew by \(after - before) KiB (from \(before) KiB)")
        print("stranger flood, scan: \(found) strangers found, private memory \(before) -> \(after) KiB")
    }
}

/// Reads a watch's JSON Lines as they come and counts what matters here.
private actor LineCounter {
    struct Counts: CustomStringConvertible {
        var readings = 0
        var strangersFound = 0
        var declined = 0
        var description: String { "\(readings) readings, \(strangersFound) strangers found, \(declined) declined" }
    }
    private(set) var counts = Counts()
    private let watch: BirdctlProcess

    init(_ watch: BirdctlProcess) { self.watch = watch }

    /// Reads lines until `condition` holds (or fails after 120 s without a line:
    /// the crowd comes as fast as the fake can make it, and beside a whole
    /// unit run on two cores birdctl may lag it by tens of seconds).
    func waitFor(_ condition: (Counts) -> Bool) async throws {
        while !condition(counts) {
            guard let line = try await watch.nextLine(within: .seconds(120)) else { throw LineCounterError.ended }
            if line.contains("\"reading\"") {
                #expect(line.contains(bird), "\(line)")
                counts.readings += 1
            } else if line.contains("\"found\"") && line.contains("D0:") {
                counts.strangersFound += 1
            } else if line.contains("\"pairing-declined\"") {
                counts.declined += 1
            }
        }
    }
}

private enum LineCounterError: Error { case ended }
