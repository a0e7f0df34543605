import FakeBlueZSupport
import MosquittoSupport
import TestProcesses
import DBus
import Glibc
import Testing

/// `watch --all` with two adapters of the fake BlueZ as one pool: the same
/// bird is a device object under each (`/org/bluez/hciN/dev_…`).
@Suite("Several adapters as one pool, on the fake BlueZ")
struct AdapterPoolEndToEndTests {
    static let bird = "F0:0D:B1:7D:00:01"

    /// The next `connected` event (JSON), skipping others.
    static func connected(_ watch: BirdctlProcess) async throws -> [String: Any] {
        try parseJSON(try await watch.line(containing: "\"event\":\"connected\"", within: .seconds(30)))
    }

    @Test func aBirdHeardLouderOnHci1ConnectsThroughHci1() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        try await fake.addBird(address: Self.bird, rssi: -80)
        try await fake.addBird(on: "hci1", address: Self.bird, rssi: -45)
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--adapter", "all")
        let event = try await Self.connected(watch)
        #expect(event["adapter"] as? String == "hci1", "\(event)")
        _ = try await watch.line(containing: "\"reading\"", within: .seconds(30))
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        #expect(try await fake.calls().contains("Connect /org/bluez/hci1/dev_F0_0D_B1_7D_00_01"))
        #expect(try await !fake.calls().contains("Connect /org/bluez/hci0/dev_F0_0D_B1_7D_00_01"))
    }

    @Test func aBirdBondedOnHci0StaysThereWhileLouderOnHci1() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        try await fake.addBird(address: Self.bird, rssi: -85, cached: true)
        try await fake.call("BondOn", .string("hci0"), .string(Self.bird))
        try await fake.addBird(on: "hci1", address: Self.bird, rssi: -40)
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--adapter", "hci0,hci1")
        let event = try await Self.connected(watch)
        #expect(event["adapter"] as? String == "hci0", "\(event)")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// hci1 is powered off under the bird's link: the bird comes back through
    /// hci0 at once (its sighting there is used; it need not be heard anew),
    /// and the move is said.
    @Test func hci1PoweredOffItsBirdComesBackThroughHci0() async throws {
        try await handOver(adapters: "hci0,hci1") { try await $0.call("SetPowered", .string("hci1"), .bool(false)) }
    }

    /// hci1 is pulled out (its Adapter1 and devices removed): its bird comes back through hci0.
    @Test func hci1RemovedItsBirdComesBackThroughHci0() async throws {
        try await handOver(adapters: "all") { try await $0.call("RemoveAdapter", .string("hci1")) }
    }

    /// A bird streaming through hci1 (heard louder there), then `losing`
    /// hci1: an `adapter` event (adapter-gone), the bird connected through
    /// hci0, and streaming again.
    private func handOver(adapters: String, losing: (FakeBlueZ) async throws -> Void) async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        try await fake.addBird(address: Self.bird, rssi: -80)
        try await fake.addBird(on: "hci1", address: Self.bird, rssi: -45)
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--adapter", adapters)
        #expect(try await Self.connected(watch)["adapter"] as? String == "hci1")
        _ = try await watch.line(containing: "\"reading\"", within: .seconds(30))
        try await losing(fake)
        let moved = try parseJSON(try await watch.line(containing: "\"event\":\"adapter\"", within: .seconds(30)))
        #expect(moved["address"] as? String == Self.bird && moved["adapter"] as? String == "hci0", "\(moved)")
        #expect(moved["reason"] as? String == "adapter-gone", "\(moved)")
        #expect(try await Self.connected(watch)["adapter"] as? String == "hci0")
        _ = try await watch.line(containing: "\"reading\"", within: .seconds(30))
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// `--adapter all` takes in an adapter added later: a bird only it hears is connected through it.
    @Test func anAdapterAddedLaterJoinsThePool() async throws {
        let fake = try await FakeBlueZ(adapters: 1)
        try await fake.addBird(address: Self.bird, rssi: -60)
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--adapter", "all")
        #expect(try await Self.connected(watch)["adapter"] as? String == "hci0")
        try await fake.call("AddAdapter", .string("hci1"), .string("00:AA:01:00:00:01"))
        try await fake.addBird(on: "hci1", address: "F0:0D:B1:7D:00:02", name: "Wren", rssi: -60)
        let event = try await Self.connected(watch)
        #expect(event["address"] as? String == "F0:0D:B1:7D:00:02" && event["adapter"] as? String == "hci1", "\(event)")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// Every adapter of the pool powered off at start: exit 4, as with one;
    /// with --power-on each is powered on and used.
    @Test func aPoolPoweredOffIsPoweredOnWhenAsked() async throws {
        let fake = try await FakeBlueZ(adapters: 2, powered: false)
        try await fake.addBird(on: "hci1", address: Self.bird, rssi: -45)
        let off = try await fake.birdctl("watch", "--all", "--json", "--adapter", "hci0,hci1")
        #expect(off.status == 4, "\(off.stderr)")
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--adapter", "hci0,hci1", "--power-on")
        #expect(try await Self.connected(watch)["adapter"] as? String == "hci1")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// bluetoothd restarts: the pool starts over, and the bird comes back through the adapter that hears it louder.
    @Test func afterABluetoothdRestartTheBirdComesBackThroughTheLouder() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        try await fake.addBird(address: Self.bird, rssi: -80)
        try await fake.addBird(on: "hci1", address: Self.bird, rssi: -45)
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--adapter", "hci0,hci1")
        #expect(try await Self.connected(watch)["adapter"] as? String == "hci1")
        try await fake.stop()
        _ = try await watch.line(containing: "\"waiting\"")
        try await fake.start()
        try await fake.addBird(address: Self.bird, rssi: -45)
        try await fake.addBird(on: "hci1", address: Self.bird, rssi: -80)
        let again = try await Self.connected(watch)
        #expect(again["adapter"] as? String == "hci0", "\(again)")
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }

    /// `scan` listens on every adapter of the pool: a bird heard only by hci1 is found too.
    @Test func scanListensOnEveryAdapterOfThePool() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        try await fake.addBird(address: Self.bird, name: "Robin", rssi: -60)
        try await fake.addBird(on: "hci1", address: "F0:0D:B1:7D:00:02", name: "Wren", rssi: -60)
        let result = try await fake.birdctl("scan", "--timeout", "1", "--json", "--adapter", "hci0,hci1")
        #expect(result.status == 0, "\(result.stderr)")
        let done = try parseJSON(result.stdout.last { $0.contains("\"done\"") } ?? "{}")
        let found = (done["birds"] as? [[String: Any]] ?? []).compactMap { $0["address"] as? String }
        #expect(Set(found) == [Self.bird, "F0:0D:B1:7D:00:02"], "\(result.stdout)")
        let calls = try await fake.calls()
        #expect(calls.contains("StartDiscovery /org/bluez/hci0") && calls.contains("StartDiscovery /org/bluez/hci1"), "\(calls)")
    }

    /// Several adapters only where a pool makes sense.
    @Test func aListOfAdaptersIsAUsageErrorWhereOneBirdIsMeant() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        for arguments in [["watch", Self.bird, "--adapter", "hci0,hci1"], ["read", "--adapter", "all"],
                          ["watch", "--all", "--adapter", "hci0,wlan0"], ["watch", "--all", "--adapter", "hci0,hci0"]] {
            let result = try await BirdctlProcess.run(arguments, environment: fake.environment)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("--adapter"), "\(arguments): \(result.stderr)")
        }
    }
}

/// The MQTT gateway over a pool: the links state carries each adapter's
/// figures, each adapter gets its two sensors, and `retire` clears them.
@Suite("Several adapters as one pool, through the MQTT gateway")
struct AdapterPoolGatewayTests {
    @Test func eachAdapterHasItsLinksSensorsUntilTheGatewayRetires() async throws {
        let fake = try await FakeBlueZ(adapters: 2)
        try await fake.addBird(address: "F0:0D:B1:7D:00:01", rssi: -45)
        try await fake.addBird(on: "hci1", address: "F0:0D:B1:7D:00:02", rssi: -45)
        let broker = try await MosquittoBroker()
        let watch = try fake.launch(
            "watch", "--all", "alpha", "--json", "--adapter", "hci0,hci1", "--links", "3", "--mqtt", broker.url(prefix: "gw"))
        var adapters: Set<String> = []
        while adapters.count < 2 {
            let event = try parseJSON(try await watch.line(containing: "\"event\":\"connected\"", within: .seconds(30)))
            adapters.insert(event["adapter"] as? String ?? "")
        }
        let links = #"{"used":2,"limit":6,"adapters":{"hci0":{"used":1,"limit":3},"hci1":{"used":1,"limit":3}}}"#
        let published = await poll(within: .seconds(20), every: .milliseconds(200)) {
            (try? await broker.retained("gw/links"))?["gw/links"] == links
        }
        let last = try await broker.retained("gw/links")
        #expect(published, "\(last)")
        let sensors = try await broker.retained("homeassistant/sensor/+/config").keys.filter { $0.contains("birdctl_gw_link") }
        #expect(Set(sensors) == Set(["links", "link_limit", "links_hci0", "link_limit_hci0", "links_hci1", "link_limit_hci1"]
            .map { "homeassistant/sensor/birdctl_gw_\($0)/config" }), "\(sensors)")
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
        let retired = try await BirdctlProcess.run(["retire", "--mqtt", broker.url(prefix: "gw")], environment: [:])
        #expect(retired.status == 0, "\(retired.stderr)")
        let left = try await broker.retained("#").keys.filter { $0.hasPrefix("gw/") || $0.contains("birdctl_gw") }
        #expect(left.isEmpty, "\(left)")
    }
}
