import FakeBlueZSupport
import TestProcesses
import DBus
import Foundation
import Glibc
import Testing

@Suite("birdctl watch")
struct WatchTests {
    @Test func streamsTenThousandPushesInOrder() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "alpha", "--json", "--count", "10001")
        // The initial read, then the stream.
        let first = try parseJSON(try await watch.line(containing: "\"reading\""))
        #expect(first["source"] as? String == "read")
        try await waitForNotifying(fake)
        try await fake.call("Burst", .string(bird), .string(alphaUUID), .uint32(10_000), .uint32(101))
        var received = 0
        while received < 10_000 {
            guard let line = try await watch.nextLine(within: .seconds(30)) else { break }
            let object = try parseJSON(line)
            guard object["event"] as? String == "reading" else { continue }
            let expected = Double(received % 101) / 100
            guard object["value"] as? Double == expected, object["source"] as? String == "notify" else {
                Issue.record("reading \(received) was \(line)")
                return
            }
            received += 1
        }
        #expect(received == 10_000)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aNameNotifiedCutAtTheMTUIsCompletedByAReadNeverPrintedCut() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.call("SetMTU", .string(bird), .uint16(23))  // notifications carry ≤ 20 bytes
        let watch = try fake.launch("watch", "name", "--json")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake, [FakeBlueZ.nameUUID])
        let long = "Troglodytes troglodytes hiemalis"
        try await fake.push(long, to: FakeBlueZ.nameUUID)
        let completed = try parseJSON(try await watch.line(containing: "\"reading\""))
        #expect(completed["value"] as? String == long, "\(completed)")
        #expect(completed["source"] as? String == "read")
        try await fake.push("Wren", to: FakeBlueZ.nameUUID)
        let short = try parseJSON(try await watch.line(containing: "\"reading\""))
        #expect(short["value"] as? String == "Wren" && short["source"] as? String == "notify", "\(short)")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aChangeRightAfterTheFirstReadIsNotMissed() async throws {
        // The watch subscribes before it reads: a change the peripheral makes
        // just after answering the read is notified, not lost between the two.
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.call("ChangeAfterNextRead", .string(bird), .string(alphaUUID), .bytes(Array("55".utf8)))
        let watch = try fake.launch("watch", "alpha", "--json", "--count", "2")
        let first = try parseJSON(try await watch.line(containing: "\"reading\""))
        #expect(first["source"] as? String == "read" && first["value"] as? Double == 0.8, "\(first)")
        let second = try parseJSON(try await watch.line(containing: "\"reading\""))
        #expect(second["source"] as? String == "notify" && second["value"] as? Double == 0.55, "\(second)")
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func textLinesAreTaggedWithTheAddress() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "--count", "4")
        for expected in ["name   Robin", "color  #FF8800", "alpha  0.8"] {
            let line = try #require(try await watch.nextLine())
            #expect(line.hasSuffix("\(bird)  \(expected)"), "\(line)")
        }
        try await waitForNotifying(fake, allFields)
        try await fake.push("#00FF00", to: FakeBlueZ.colorUUID)
        #expect(try await watch.nextLine()?.hasSuffix("color  #00FF00") == true)
        #expect(try await watch.waitForExit() == 0)
        #expect(watch.stderr.contains("connected to Robin (\(bird))"))
    }

    @Test func reconnectsAfterADroppedLink() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "alpha", "--json")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        try await fake.push("10")
        #expect(try parseJSON(try await watch.line(containing: "\"reading\""))["value"] as? Double == 0.1)
        try await fake.call("DropLink", .string(bird))
        _ = try await watch.line(containing: "\"disconnected\"")
        _ = try await watch.line(containing: "\"connected\"")
        _ = try await watch.line(containing: "\"reading\"")  // the read after reconnecting
        try await waitForNotifying(fake)
        try await fake.push("20")
        #expect(try parseJSON(try await watch.line(containing: "\"reading\""))["value"] as? Double == 0.2)
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aBirdAskedForByAddressIsFoundAgainAfterADroppedLink() async throws {
        // Not in BlueZ's cache at first: found by discovery. After the drop it
        // is in the cache; the rescan must still listen for it (the driver once
        // offered it from the cache, the machine declined, and nothing scanned).
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", bird, "alpha", "--json")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        try await fake.call("DropLink", .string(bird))
        _ = try await watch.line(containing: "\"disconnected\"")
        _ = try await watch.line(containing: "\"connected\"")
        _ = try await watch.line(containing: "\"reading\"")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func waitsForBluetoothdAndResumes() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "alpha", "--json")
        _ = try await watch.line(containing: "\"reading\"")
        try await fake.stop()
        #expect(try await watch.line(containing: "\"waiting\"").contains("bluetoothd"))
        try await fake.start()
        try await fake.addBird()
        _ = try await watch.line(containing: "\"connected\"")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        try await fake.push("42")
        #expect(try parseJSON(try await watch.line(containing: "\"reading\""))["value"] as? Double == 0.42)
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func waitsForTheAdapterToBePoweredBackOn() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "alpha", "--json")
        _ = try await watch.line(containing: "\"reading\"")
        try await fake.call("SetPowered", .string("hci0"), .bool(false))
        _ = try await watch.line(containing: "\"waiting\"")
        try await fake.call("SetPowered", .string("hci0"), .bool(true))
        _ = try await watch.line(containing: "\"connected\"")
        _ = try await watch.line(containing: "\"reading\"")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func ctrlCStopsNotifyAndDisconnects() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "--notify-method", "start")
        _ = try await watch.line(containing: "alpha")
        try await waitForNotifying(fake, allFields)
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        let calls = try await fake.calls()
        #expect(!calls.contains { $0.hasPrefix("AcquireNotify") })
        let stops = calls.filter { $0.hasPrefix("StopNotify") }
        #expect(stops.count == 3)
        let disconnect = try #require(calls.lastIndex(of: "Disconnect \(birdPath)"))
        #expect(calls.lastIndex { $0.hasPrefix("StopNotify") }! < disconnect)
    }

    /// By default notifications come through AcquireNotify's sockets (the fake
    /// offers it, as bluetoothd does); Ctrl-C and SIGTERM end each with
    /// StopNotify, answered before its socket closes and before the bus
    /// connection does (bluetoothd before 5.86 frees a notification whose
    /// owner left the bus, then reads it when the socket hangs up), and
    /// before the Disconnect.
    @Test(arguments: [SIGINT, SIGTERM])
    func aSignalReleasesTheAcquiredNotifications(_ signal: Int32) async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "--json")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake, allFields)
        try await fake.push("42")
        let pushed = try parseJSON(try await watch.line(containing: "\"value\":0.42"))
        #expect(pushed["source"] as? String == "notify")
        watch.signal(signal)
        #expect(try await watch.waitForExit() == 0)
        let calls = try await fake.calls()
        #expect(calls.filter { $0.hasPrefix("AcquireNotify") }.count == 3, "\(calls)")
        #expect(calls.filter { $0.hasPrefix("StopNotify") }.count == 3, "\(calls)")
        // Ended by StopNotify, not by a socket closing first.
        #expect(!calls.contains { $0.hasPrefix("ReleaseNotify") || $0.hasPrefix("StartNotify") }, "\(calls)")
        let disconnect = try #require(calls.lastIndex(of: "Disconnect \(birdPath)"), "\(calls)")
        #expect(calls.lastIndex { $0.hasPrefix("StopNotify") }! < disconnect)
    }

    /// AcquireNotify refused (another client subscribed with StartNotify, or
    /// BlueZ will not): auto falls back to StartNotify; `acquire` fails.
    @Test(arguments: [("auto", 0), ("acquire", 9)])
    func anAcquireNotifyRefusedFallsBackToStartNotifyUnlessAcquireIsAsked(_ method: String, _ status: Int32) async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.failAlways("AcquireNotify", "org.bluez.Error.InProgress", "In Progress")
        let result = try await fake.birdctl("watch", bird, "alpha", "--notify-method", method, "--count", "1", "--json")
        #expect(result.status == status, "\(result.stderr)")
        let calls = try await fake.calls()
        #expect(calls.contains { $0.hasPrefix("StartNotify") } == (method == "auto"), "\(calls)")
    }

    @Test func aClosedStdoutEndsQuietly() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        // As `| head -1`: our end of stdout closes after the first line.
        let watch = try BirdctlProcess(["watch"], environment: fake.environment, closeAfterLines: 1)
        _ = try await watch.nextLine()
        // The next line birdctl writes meets the closed pipe: one of the
        // initial values, or a notification pushed here.
        let pusher = Task {
            for value in 0..<100 {
                try await Task.sleep(for: .milliseconds(100))
                try? await fake.push(String(value))
            }
        }
        defer { pusher.cancel() }
        #expect(try await watch.waitForExit() == 0)
        #expect(!watch.stderr.contains("error"), "\(watch.stderr)")
        // It still cleaned up after itself.
        #expect(try await fake.calls().contains("Disconnect \(birdPath)"))
    }

    @Test func aBadValueIsReportedAndTheStreamGoesOn() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "alpha", "--json", "--count", "3")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        try await fake.push("8.5")
        try await fake.push("55")
        try await fake.push("56")
        let bad = try parseJSON(try await watch.line(containing: "bad_value"))
        #expect(bad["raw"] as? String == "382e35")
        #expect(bad["field"] as? String == "alpha")
        #expect(try parseJSON(try await watch.line(containing: "\"reading\""))["value"] as? Double == 0.55)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func allStreamsFromTwoBirdsAtOnce() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.addBird(address: "F0:0D:B1:7D:00:02", name: "Wren", alpha: "30")
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--count", "4")
        var addresses = Set<String>()
        var values: [String: Double] = [:]
        for _ in 0..<2 {
            let reading = try parseJSON(try await watch.line(containing: "\"reading\""))
            addresses.insert(reading["address"] as? String ?? "")
        }
        #expect(addresses == [bird, "F0:0D:B1:7D:00:02"])
        try await waitForNotifying(fake, count: 2)
        try await fake.push("11")
        try await fake.push("22", address: "F0:0D:B1:7D:00:02")
        for _ in 0..<2 {
            let reading = try parseJSON(try await watch.line(containing: "\"reading\""))
            values[reading["address"] as? String ?? ""] = reading["value"] as? Double
        }
        #expect(values == [bird: 0.11, "F0:0D:B1:7D:00:02": 0.22])
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func durationStopsTheStream() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        // By address: no listening window before the connection.
        let result = try await fake.birdctl("watch", bird, "--duration", "1")
        #expect(result.status == 0)
        #expect(result.stdout.count == 3)
    }
}

@Suite("birdctl beside other clients")
struct SharedLinkTests {
    /// bluetoothd gives acquired notifications to one client: a second
    /// watch is told who holds them and how to share.
    @Test func aSecondWatchOfNotificationsAnotherAcquiredSaysHowToShare() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let first = try fake.launch("watch", bird, "alpha", "--json")
        _ = try await first.line(containing: "\"reading\"")
        let second = try await fake.birdctl("watch", bird, "alpha")
        #expect(second.status == 9)
        #expect(second.stderr.contains("another client holds these notifications through AcquireNotify"), "\(second.stderr)")
        #expect(second.stderr.contains("--notify-method start"), "\(second.stderr)")
        first.signal(SIGINT)
        #expect(try await first.waitForExit() == 0)
    }

    @Test func aSecondWatchEndingLeavesTheFirstStreaming() async throws {
        // bluetoothd keeps one notify session per client: the second watch's
        // StopNotify ends its own, and it leaves up the link it found up.
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let first = try fake.launch("watch", "alpha", "--json", "--notify-method", "start")
        _ = try await first.line(containing: "\"reading\"")
        let second = try fake.launch("watch", bird, "alpha", "--json", "--notify-method", "start")
        _ = try await second.line(containing: "\"reading\"")
        second.signal(SIGINT)
        #expect(try await second.waitForExit() == 0)
        #expect(try await fake.calls().filter { $0.hasPrefix("Disconnect") }.isEmpty)
        // (The second watch's read showed on the first as a change, as
        // another client's read does with BlueZ; the next line is ours.)
        try await fake.push("33")
        let reading = try parseJSON(try await first.line(containing: "\"value\":0.33"))
        #expect(reading["source"] as? String == "notify")
        first.signal(SIGINT)
        #expect(try await first.waitForExit() == 0)
    }

    @Test func readWhileWatchingUsesTheLinkAndLeavesItUp() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "alpha", "--json")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        // The connected bird may not advertise; read finds it connected.
        try await fake.call("SetVisible", .string(bird), .bool(false))
        let read = try await fake.birdctl("read", bird, "name", "--timeout", "3")
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == ["Robin"])
        #expect(try await fake.calls().filter { $0.hasPrefix("Disconnect") }.isEmpty)
        // The watch still streams.
        try await fake.push("33")
        #expect(try parseJSON(try await watch.line(containing: "\"reading\""))["value"] as? Double == 0.33)
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }
}
