import BlueZTestSupport
import Foundation
import Testing

/// What a stranger's radio says reaches the terminal escaped, never raw.
@Suite("Hostile peers")
struct HostilePeerTests {
    /// Clear the screen, set the window title, ring the bell; then a one-character CSI.
    static let advertisedName = "Ev\u{1B}[2J\u{1B}]0;pwned\u{07}il\u{9B}31m"
    static let escapedName = #"Ev\x1b[2J\x1b]0;pwned\x07il\u009b31m"#
    /// A GATT name passes the decoder (no control character) but reverses the text after it.
    static let gattName = "Rob\u{202E}ni"

    static func expectNothingRaw(_ text: String, _ comment: String) {
        for scalar in ["\u{1B}", "\u{07}", "\u{9B}", "\u{202E}"] {
            #expect(!text.contains(scalar), "\(comment) holds \(scalar.unicodeScalars.first!.value): \(text)")
        }
    }

    @Test func scanEscapesAnAdvertisedName() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird(name: Self.advertisedName, birdName: "Robin")
        let text = try await fake.birdctl("scan", "--timeout", "0.5")
        #expect(text.status == 0, "\(text.stderr)")
        Self.expectNothingRaw(text.stdout.joined(separator: "\n"), "scan's stdout")
        #expect(text.stdout.first?.hasSuffix(Self.escapedName) == true, "\(text.stdout)")

        let json = try await fake.birdctl("scan", "--timeout", "0.5", "--json")
        Self.expectNothingRaw(json.stdout.joined(separator: "\n"), "scan --json")
        // JSON escapes them as JSON does: a parser gets the name back exactly.
        let found = try parseJSON(try #require(json.stdout.first))
        #expect(found["name"] as? String == Self.advertisedName)
    }

    @Test func watchEscapesNamesInEventsAndReadings() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird(name: Self.advertisedName, birdName: Self.gattName)
        let watch = try await fake.birdctl("watch", "name", "--count", "1")
        #expect(watch.status == 0, "\(watch.stderr)")
        Self.expectNothingRaw(watch.stderr, "watch's stderr")
        Self.expectNothingRaw(watch.stdout.joined(separator: "\n"), "watch's stdout")
        #expect(watch.stderr.contains("connected to \(Self.escapedName) (\(bird))"), "\(watch.stderr)")
        #expect(watch.stdout.first?.hasSuffix(#"name   Rob\u202eni"#) == true, "\(watch.stdout)")
    }

    @Test func aBareReadIsEscapedToo() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird(birdName: Self.gattName)
        let read = try await fake.birdctl("read", bird, "name")
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == [#"Rob\u202eni"#])
    }
}
