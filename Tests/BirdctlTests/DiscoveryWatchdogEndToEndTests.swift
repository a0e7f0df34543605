import FakeBlueZSupport
import Foundation
import TestProcesses
import Testing

/// `watch --all` and an adapter that hears nothing: the fake's discovery
/// reports a bird only while it is visible, so a bird out of sight whose link
/// was lost is a bird looked for and not heard.
@Suite("watch --all: the discovery watchdog")
struct DiscoveryWatchdogEndToEndTests {
    static let bird = "F0:0D:B1:7D:00:01"

    /// A silent window restarts discovery (StopDiscovery, StartDiscovery);
    /// the next, with no link up, powers the adapter off and on; the bird
    /// in sight again streams again.
    @Test func aSilentAdapterHasItsDiscoveryRestartedThenItIsPoweredOffAndOn() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(address: Self.bird, rssi: -50)
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--discovery-watchdog", "1", "--connect-timeout", "1")
        _ = try await watch.line(containing: "\"reading\"", within: .seconds(30))
        try await fake.call("SetVisible", .string(Self.bird), .bool(false))
        try await fake.call("DropLink", .string(Self.bird))
        let restart = try parseJSON(try await watch.line(containing: "\"discovery-deaf\"", within: .seconds(10)))
        #expect(restart["action"] as? String == "restart" && restart["stalled"] as? Bool == false, "\(restart)")
        let stall = try parseJSON(try await watch.line(containing: "\"discovery-deaf\"", within: .seconds(10)))
        #expect(stall["action"] as? String == "power-cycle" && stall["stalled"] as? Bool == true, "\(stall)")
        try await fake.call("SetVisible", .string(Self.bird), .bool(true))
        _ = try await watch.line(containing: "\"connected\"", within: .seconds(30))
        _ = try await watch.line(containing: "\"reading\"", within: .seconds(30))
        let calls = try await fake.calls()
        let stops = calls.indices.filter { calls[$0] == "StopDiscovery /org/bluez/hci0" }
        #expect(stops.contains { calls[($0 + 1)...].contains("StartDiscovery /org/bluez/hci0") }, "restarted: \(calls)")
        #expect(calls.count { $0 == "Set /org/bluez/hci0" } == 2, "powered off and on: \(calls)")
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }
}
