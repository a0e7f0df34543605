import FakeBlueZSupport
import TestProcesses
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
        let fake = try await FakeBlueZ()
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
        let fake = try await FakeBlueZ()
        try await fake.addBird(name: Self.advertisedName, birdName: Self.gattName)
        let watch = try await fake.birdctl("watch", "name", "--count", "1")
        #expect(watch.status == 0, "\(watch.stderr)")
        Self.expectNothingRaw(watch.stderr, "watch's stderr")
        Self.expectNothingRaw(watch.stdout.joined(separator: "\n"), "watch's stdout")
        #expect(watch.stderr.contains("connected to \(Self.escapedName) (\(bird))"), "\(watch.stderr)")
        #expect(watch.stdout.first?.hasSuffix(#"name   Rob\u202eni"#) == true, "\(watch.stdout)")
    }

    /// A look-alike of "Robin" (a zero-width space, a tag character) that
    /// also spells an escape with a backslash of its own: shown visibly, the
    /// backslash doubled, once on stdout and once on stderr.
    @Test func formatCharactersAndAPeersBackslashAreShown() async throws {
        let name = "Ro\u{200B}bin\u{E0041}\\x1b"
        let shown = #"Ro\u200bbin\u{e0041}\\x1b"#
        let fake = try await FakeBlueZ()
        try await fake.addBird(name: name, birdName: "Robin")
        let scan = try await fake.birdctl("scan", "--timeout", "0.5")
        #expect(scan.stdout.first?.hasSuffix(shown) == true, "\(scan.stdout)")
        let watch = try await fake.birdctl("watch", "name", "--count", "1")
        #expect(watch.stderr.contains("connected to \(shown) (\(bird))"), "\(watch.stderr)")
        let json = try await fake.birdctl("scan", "--timeout", "0.5", "--json")
        let found = try parseJSON(try #require(json.stdout.first))
        #expect(found["name"] as? String == name)
    }

    /// BLE carries at most 248 bytes of name; BlueZ hands on whatever it is
    /// given (an alias, a fake). 100 KB is cut where it enters, and marked.
    @Test func aHundredKilobyteNameIsCutTo248Bytes() async throws {
        let name = String(repeating: "Zaunkönig ", count: 9_310)  // 102,410 bytes
        let cut = String(repeating: "Zaunkönig ", count: 22) + "Zaunk…"  // 247 bytes: the next "ö" would pass 248
        let fake = try await FakeBlueZ()
        try await fake.addBird(name: name, birdName: "Robin")
        let scan = try await fake.birdctl("scan", "--timeout", "0.5")
        #expect(scan.status == 0, "\(scan.stderr)")
        #expect(scan.stdout.count == 1 && scan.stdout[0].hasSuffix("   " + cut), "\(scan.stdout.map(\.utf8.count))")
        let json = try await fake.birdctl("scan", "--timeout", "0.5", "--json")
        #expect(try parseJSON(try #require(json.stdout.first))["name"] as? String == cut)
        let watch = try await fake.birdctl("watch", "name", "--count", "1")
        #expect(watch.stderr.contains("connected to \(cut) (\(bird))"), "\(watch.stderr.utf8.count) bytes of stderr")
        #expect(watch.stderr.utf8.count < 4_000)
    }

    @Test func aBareReadIsEscapedToo() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(birdName: Self.gattName)
        let read = try await fake.birdctl("read", bird, "name")
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == [#"Rob\u202eni"#])
    }
}

/// Peripherals that misbehave on purpose: each ends with a clear message and
/// the documented exit code, or the stream goes on.
@Suite("Hostile peripherals")
struct HostilePeripheralTests {
    @Test func garbageValuesAreBadValuesWithTheirBytes() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(color: "\u{1B}]52;c;AAAA\u{07}", birdNameBytes: [0xFF, 0xFE, 0x52], alpha: "-1")
        let read = try await fake.birdctl("read", "--json")
        #expect(read.status == 8, "\(read.stderr)")
        let record = try parseJSON(try #require(read.stdout.first))
        let errors = try #require(record["errors"] as? [String: String])
        #expect(errors["color"] == "expected #RRGGBB or #RRGGBBAA" && errors["alpha"] == "expected an integer 0…100")
        #expect(errors["name"] == "not valid UTF-8", "\(errors)")
        #expect((record["raw"] as? [String: String])?["name"] == "fffe52")
        #expect(!read.stderr.contains("\u{1B}") && !read.stderr.contains("\u{07}"), "\(read.stderr)")
    }

    @Test func aNameOf512BytesReadsWhole() async throws {
        let long = String(repeating: "Zaunkönig ", count: 46) + "Zaunki"  // 512 bytes of UTF-8
        #expect(long.utf8.count == 512)
        let fake = try await FakeBlueZ()
        try await fake.addBird(birdName: long)
        let read = try await fake.birdctl("read", bird, "name")
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == [long])
    }

    @Test func aBirdThatAnswersEveryReadWithAnATTErrorStillStreams() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.call(
            "FailAlways", .string("ReadValue"), .string("org.bluez.Error.Failed"),
            .string("Operation failed with ATT error: 0x0e"))
        let watch = try fake.launch("watch", "alpha", "--json", "--count", "2")
        let error = try parseJSON(try await watch.line(containing: "\"error\""))
        #expect((error["message"] as? String)?.contains("ATT error: 0x0e") == true, "\(error)")
        try await waitForNotifying(fake)
        try await fake.push("10")
        try await fake.push("20")
        let first = try parseJSON(try await watch.line(containing: "\"reading\""))
        let second = try parseJSON(try await watch.line(containing: "\"reading\""))
        #expect(first["value"] as? Double == 0.1 && second["value"] as? Double == 0.2)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aBirdThatDropsTheLinkDuringServiceDiscoveryAgainAndAgain() async throws {
        // As a hostile or failing bird does, 50 times: each is reported, then a rescan.
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.call("DropDuringDiscovery", .string(bird), .uint32(50))
        let watch = try fake.launch("watch", "alpha", "--json")
        var drops = 0
        var memoryAtDrop5 = 0
        while let line = try await watch.nextLine(within: .seconds(60)) {
            if line.contains("\"disconnected\"") { drops += 1 }
            if drops == 5 && memoryAtDrop5 == 0 { memoryAtDrop5 = watch.privateMemoryKiB }
            if line.contains("\"reading\"") { break }
        }
        #expect(drops == 50)
        // Memory stays bounded: 45 more cycles add nothing that stays (not
        // under AddressSanitizer, whose quarantine holds freed memory).
        let memoryNow = watch.privateMemoryKiB
        if ProcessInfo.processInfo.environment["ASAN_OPTIONS"] == nil {
            #expect(memoryAtDrop5 > 0 && memoryNow > 0)
            #expect(memoryNow - memoryAtDrop5 < 512, "private memory grew \(memoryNow - memoryAtDrop5) KiB over 45 lost links")
        }
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aReadOfABirdThatDropsTheLinkDuringServiceDiscoveryFailsClearly() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.call("DropDuringDiscovery", .string(bird), .uint32(1))
        let read = try await fake.birdctl("read")
        #expect(read.status == 7, "\(read.stderr)")
        #expect(read.stderr.contains("the connection was lost"), "\(read.stderr)")
    }
}
