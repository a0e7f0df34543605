import FakeBlueZSupport
import TestProcesses
import DBus
import Glibc
import Testing

/// `watch --all` forgets birds it no longer hears, so nothing of them grows.
@Suite("Forgetting birds no longer heard")
struct ForgettingTests {
    @Test func aBirdGoneOutOfRangeIsForgottenAndFollowedAgainWhenBack() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--forget-after", "1")
        _ = try await watch.line(containing: "\"reading\"")
        try await fake.call("SetVisible", .string(bird), .bool(false))
        try await fake.call("DropLink", .string(bird))
        _ = try await watch.line(containing: "\"disconnected\"")
        let forgotten = try parseJSON(try await watch.line(containing: "\"forgotten\""))
        #expect(forgotten["address"] as? String == bird)
        // BlueZ is told to drop it (it keeps a device it was asked to connect
        // to for good, and our copy of its objects with it).
        let dropped = try await poll { try await fake.calls().contains("RemoveDevice /org/bluez/hci0") }
        #expect(dropped)
        // Heard again: BlueZ makes the device anew.
        try await fake.addBird(rssi: -55)
        _ = try await watch.line(containing: "\"connected\"")
        _ = try await watch.line(containing: "\"reading\"")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// A bonded bird forgotten stays in BlueZ's cache, bond and all.
    @Test func aBondedBirdForgottenKeepsItsBond() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.call("BondOn", .string("hci0"), .string(bird))
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--forget-after", "1")
        _ = try await watch.line(containing: "\"reading\"")
        try await fake.call("SetVisible", .string(bird), .bool(false))
        try await fake.call("DropLink", .string(bird))
        _ = try await watch.line(containing: "\"forgotten\"")
        // Still followed when heard again, without being made anew.
        try await fake.call("SetVisible", .string(bird), .bool(true))
        try await fake.call("SetRSSI", .string(bird), .int16(-55))
        _ = try await watch.line(containing: "\"connected\"")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        #expect(try await !fake.calls().contains("RemoveDevice /org/bluez/hci0"))
    }

    @Test func forgetAfterGoesWithAll() async throws {
        let fake = try await FakeBlueZ()
        let watch = try await fake.birdctl("watch", "--forget-after", "5")
        #expect(watch.status == 2 && watch.stderr.contains("--forget-after goes with --all"), "\(watch.stderr)")
    }
}
