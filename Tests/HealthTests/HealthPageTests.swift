import Bird
import BlueZ
import DBus
import Health
import Loop
import Testing

private let robin = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01", address: "F0:0D:B1:7D:00:01", name: "Robin")
private let alpha = BirdValue.alpha(percent: 50)

@Suite("Health: the metrics page")
struct HealthPageTests {
    /// Label values are escaped as the text format wants (backslash, double
    /// quote, newline); whole numbers print without a fraction.
    @Test func labelsAreEscapedAndNumbersPlain() {
        var page = Exposition()
        page.family("x_total", .counter, help: "A count.")
        page.sample("x_total", 3, labels: ["kind": "a\\b\"c\nd"])
        page.sample("x_total", 2.5)
        #expect(page.text == "# HELP x_total A count.\n# TYPE x_total counter\nx_total{kind=\"a\\\\b\\\"c\\nd\"} 3\nx_total 2.5\n")
    }

    /// A bird enters with its first link or reading (not when merely heard:
    /// a stranger costs nothing), counts its readings and links, and leaves
    /// when the fleet forgets it. Past the limit no new bird enters.
    @Test func birdsEnterWithALinkAndLeaveWhenForgotten() {
        var birds = BirdHealth(limit: 2)
        let start = MonotonicInstant.now
        birds.heard("F0:0D:B1:7D:00:09", rssi: -70)
        birds.record(.found(robin, rssi: -60), at: start)
        #expect(birds.birds.isEmpty)
        birds.record(.connected(robin), at: start)
        birds.record(.reading(robin, alpha, raw: Array("50".utf8), notified: true), at: start + .seconds(1))
        birds.heard(robin.address, rssi: -55)
        let robinHealth = birds.birds[robin.address]
        #expect(robinHealth?.readings == 1 && robinHealth?.connections == 1 && robinHealth?.rssi == -55)
        #expect(robinHealth?.lastReading == start + .seconds(1))
        for n in 2...4 {
            let other = BirdCentral.Peripheral(path: ObjectPath("/org/bluez/hci0/dev_\(n)"), address: BluetoothAddress(value: 0xF00D_B17D_0000 + UInt64(n))!, name: nil)
            birds.record(.connected(other), at: start)
        }
        #expect(birds.birds.count == 2, "bounded: \(birds.birds.keys)")
        birds.record(.forgotten(address: robin.address), at: start)
        #expect(birds.birds[robin.address] == nil)
    }

    /// The whole page: every family once, with HELP and TYPE; the adapter's
    /// limit only when known; a bird's age from its last reading.
    @Test func thePageHoldsAdaptersBirdsGatewayAndProcess() {
        var adapter = AdapterHealth(name: "hci0")
        adapter.links = 2
        adapter.limit = 3
        adapter.limitLearned = true
        adapter.connectAttempts = 7
        adapter.connectFailures = ["timeout": 2, "in_progress": 1]
        adapter.resets = 1
        adapter.discoveryRestarts = 3
        adapter.discoveryStalls = 1
        var unknown = AdapterHealth(name: "hci1")
        unknown.links = 0
        var birds = BirdHealth()
        let then = MonotonicInstant.now
        birds.record(.reading(robin, alpha, raw: Array("50".utf8), notified: false), at: then)
        let text = HealthPage.render(
            adapters: [adapter, unknown], birds: birds, gateway: GatewayHealth(queued: 4, dropped: 1, reconnects: 2),
            peripheral: nil, process: ProcessUsage.current(), now: then + .milliseconds(2500))
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains("birdctl_adapter_links{adapter=\"hci0\"} 2"))
        #expect(lines.contains("birdctl_adapter_link_limit{adapter=\"hci0\"} 3"))
        #expect(!lines.contains { $0.hasPrefix("birdctl_adapter_link_limit{adapter=\"hci1\"}") })
        #expect(lines.contains("birdctl_connect_failures_total{adapter=\"hci0\",kind=\"timeout\"} 2"))
        #expect(lines.contains("birdctl_adapter_resets_total{adapter=\"hci0\"} 1"))
        #expect(lines.contains("birdctl_discovery_restarts_total{adapter=\"hci0\"} 3"))
        #expect(lines.contains("birdctl_discovery_stalls_total{adapter=\"hci0\"} 1"))
        #expect(lines.contains("birdctl_bird_last_reading_age_seconds{address=\"F0:0D:B1:7D:00:01\"} 2.5"))
        #expect(lines.contains("birdctl_mqtt_dropped_messages_total 1"))
        #expect(lines.contains { $0.hasPrefix("process_resident_memory_bytes ") })
        #expect(lines.contains { $0.hasPrefix("process_open_fds ") })
        let families = lines.filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        #expect(Set(families).count == families.count, "each family once: \(families)")
    }

    /// serve's page: advertising, the fields notified now, writes by result;
    /// no adapters nor birds. bluetoothd gone, nothing is advertised nor notified.
    @Test func servesPageSaysWhatCentralsDid() {
        var peripheral = PeripheralHealth()
        for event: BirdPeripheral.Event in [
            .advertising(adapter: "hci0"), .subscription(.alpha, subscribed: true), .subscription(.color, subscribed: true),
            .subscription(.color, subscribed: false), .valueChanged(.alpha(percent: 55), byCentral: true),
            .valueChanged(.alpha(percent: 56), byCentral: false),
        ] {
            peripheral.record(event)
        }
        let lines = HealthPage.render(
            adapters: nil, birds: nil, gateway: nil, peripheral: peripheral, process: ProcessUsage.current(), now: .now
        ).split(separator: "\n").map(String.init)
        #expect(lines.contains("birdctl_serve_advertising 1"))
        #expect(lines.contains("birdctl_serve_notifying_fields 1"))
        #expect(lines.contains("birdctl_serve_writes_total{result=\"accepted\"} 1"))
        #expect(lines.contains("birdctl_serve_writes_total{result=\"refused\"} 0"))
        #expect(!lines.contains { $0.contains("birdctl_adapter_") || $0.contains("birdctl_bird_") }, "\(lines)")
        peripheral.record(.stoppedAdvertising)
        peripheral.record(.subscription(.alpha, subscribed: false))
        #expect(peripheral.advertising == false && peripheral.notifyingFields.isEmpty)
    }

    /// The proxy's section: its clients, links, advertisements and how
    /// Home Assistant's connects ended (a fixed set of labels).
    @Test func theProxysSection() {
        let proxy = ProxyHealth(clients: 2, clientsDropped: 1, advertisements: 40, links: 1, connects: ["no_slot": 3, "linked": 4])
        let lines = HealthPage.render(
            adapters: [], birds: nil, gateway: nil, proxy: proxy, peripheral: nil, process: ProcessUsage.current(), now: .now
        ).split(separator: "\n").map(String.init)
        for line in [
            "birdctl_proxy_clients 2", "birdctl_proxy_clients_dropped_total 1", "birdctl_proxy_advertisements_total 40",
            "birdctl_proxy_links 1", "birdctl_proxy_connects_total{result=\"linked\"} 4", "birdctl_proxy_connects_total{result=\"no_slot\"} 3",
            "# TYPE birdctl_proxy_connects_total counter",
        ] {
            #expect(lines.contains(line), "\(line) not in \(lines)")
        }
        let without = HealthPage.render(adapters: [], birds: nil, gateway: nil, peripheral: nil, process: ProcessUsage.current(), now: .now)
        #expect(!without.contains("birdctl_proxy_"))
    }

    /// BlueZ's error kinds as labels: snake case, from a closed set.
    @Test func errorKindsAreSnakeCaseLabels() {
        #expect(BlueZError.Kind.inProgress.label == "in_progress")
        #expect(BlueZError.Kind.timeout.label == "timeout")
        #expect(BlueZError.Kind.bluetoothdNotRunning.label == "bluetoothd_not_running")
    }
}
