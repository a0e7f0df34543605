import BlueZTestSupport
import DBus
import Glibc
import Testing

/// A service among strangers: devices advertising the Bird Service at
/// addresses of their own (as random addresses rotate), some never answering,
/// some asking for pairing, as fast as the fake can make them.
@Suite("A crowd of strangers", .timeLimit(.minutes(5)))
struct StrangerFloodTests {
    static let strangers: UInt32 = 100_000

    @Test func watchAllKeepsStreamingTheRealBirdAndForgetsTheCrowd() async throws {
        let fake = try FakeBlueZ()
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

    /// Reads lines until `condition` holds (or fails after 30 s without a line).
    func waitFor(_ condition: (Counts) -> Bool) async throws {
        while !condition(counts) {
            guard let line = try await watch.nextLine(within: .seconds(30)) else { throw LineCounterError.ended }
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
