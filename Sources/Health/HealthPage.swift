import Bird
import Loop

/// The MQTT gateway's side of the health page.
public struct GatewayHealth: Sendable {
    /// Messages waiting for the broker or not yet acknowledged.
    public var queued: Int
    /// Messages dropped from a full buffer while the broker was away.
    public var dropped: Int
    /// Connections to the broker made again after one was lost.
    public var reconnects: Int

    public init(queued: Int, dropped: Int, reconnects: Int) {
        (self.queued, self.dropped, self.reconnects) = (queued, dropped, reconnects)
    }
}

/// The page a Prometheus server scrapes from `--metrics`: base units,
/// `_total` counters, labels from a bounded set (adapter names, BlueZ error
/// kinds, followed birds' addresses: never a stranger's).
public enum HealthPage {
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The page of a command: the sections it has (`watch`: adapters, birds,
    /// the gateway and the proxy; `scan`: adapters; `serve`: the peripheral), and the process.
    public static func render(
        adapters: [AdapterHealth]?, birds: BirdHealth?, gateway: GatewayHealth?, proxy: ProxyHealth? = nil,
        peripheral: PeripheralHealth?, process: ProcessUsage, now: MonotonicInstant
    ) -> String {
        var page = Exposition()
        if let adapters { adapterFamilies(adapters, into: &page) }
        if let birds { birdFamilies(birds, now: now, into: &page) }
        if let peripheral { peripheralFamilies(peripheral, into: &page) }
        if let proxy { proxyFamilies(proxy, into: &page) }
        if let gateway {
            page.single("birdctl_mqtt_queued_messages", .gauge, help: "Messages waiting for the MQTT broker or not yet acknowledged.", gateway.queued)
            page.single("birdctl_mqtt_dropped_messages_total", .counter, help: "Messages dropped from the full buffer while the broker was away.", gateway.dropped)
            page.single("birdctl_mqtt_reconnects_total", .counter, help: "Connections to the MQTT broker made again after one was lost.", gateway.reconnects)
        }
        if let cpu = process.cpuSeconds {
            page.single("process_cpu_seconds_total", .counter, help: "User and system CPU time spent, in seconds.", cpu)
        }
        if let resident = process.residentBytes {
            page.single("process_resident_memory_bytes", .gauge, help: "Resident memory size, in bytes.", resident)
        }
        if let descriptors = process.openDescriptors {
            page.single("process_open_fds", .gauge, help: "Open file descriptors.", descriptors)
        }
        return page.text
    }

    private static func adapterFamilies(_ adapters: [AdapterHealth], into page: inout Exposition) {
        page.family("birdctl_adapter_links", .gauge, help: "Links up, going down or being made on the adapter.")
        for adapter in adapters { page.sample("birdctl_adapter_links", adapter.links, labels: ["adapter": adapter.name]) }
        page.family("birdctl_adapter_link_limit", .gauge, help: "The adapter's link limit, given (--links) or learned; absent while unknown.")
        for adapter in adapters {
            if let limit = adapter.limit { page.sample("birdctl_adapter_link_limit", limit, labels: ["adapter": adapter.name]) }
        }
        page.family("birdctl_adapter_link_limit_learned", .gauge, help: "1 if the adapter's link limit was learned, 0 if given or unknown.")
        for adapter in adapters {
            page.sample("birdctl_adapter_link_limit_learned", adapter.limitLearned ? 1 : 0, labels: ["adapter": adapter.name])
        }
        page.family("birdctl_connect_attempts_total", .counter, help: "Connect calls made through the adapter.")
        for adapter in adapters { page.sample("birdctl_connect_attempts_total", adapter.connectAttempts, labels: ["adapter": adapter.name]) }
        page.family("birdctl_connect_failures_total", .counter, help: "Connect attempts that failed, by BlueZ error kind (timeout: the deadline passed).")
        for adapter in adapters {
            for (kind, count) in adapter.connectFailures.sorted(by: { $0.key < $1.key }) {
                page.sample("birdctl_connect_failures_total", count, labels: ["adapter": adapter.name, "kind": kind])
            }
        }
        page.family("birdctl_advertisements_total", .counter, help: "Bird Service advertisements heard through the adapter.")
        for adapter in adapters { page.sample("birdctl_advertisements_total", adapter.advertisements, labels: ["adapter": adapter.name]) }
        page.family("birdctl_discovery_starts_total", .counter, help: "Times discovery was started on the adapter (the first, and after each outage or restart).")
        for adapter in adapters { page.sample("birdctl_discovery_starts_total", adapter.discoveryStarts, labels: ["adapter": adapter.name]) }
        page.family(
            "birdctl_discovery_restarts_total", .counter,
            help: "Times the adapter's discovery was restarted because it heard no Bird while one was looked for.")
        for adapter in adapters { page.sample("birdctl_discovery_restarts_total", adapter.discoveryRestarts, labels: ["adapter": adapter.name]) }
        page.family(
            "birdctl_discovery_stalls_total", .counter,
            help: "Times the adapter was still deaf after a restart (then restarted again, or powered off and on if nothing was connected on it).")
        for adapter in adapters { page.sample("birdctl_discovery_stalls_total", adapter.discoveryStalls, labels: ["adapter": adapter.name]) }
        page.family("birdctl_adapter_resets_total", .counter, help: "Times the adapter was powered off and on because nothing came through it.")
        for adapter in adapters { page.sample("birdctl_adapter_resets_total", adapter.resets, labels: ["adapter": adapter.name]) }
    }

    private static func proxyFamilies(_ proxy: ProxyHealth, into page: inout Exposition) {
        page.single("birdctl_proxy_clients", .gauge, help: "Home Assistant's API clients connected to the proxy.", proxy.clients)
        page.single("birdctl_proxy_clients_dropped_total", .counter, help: "Clients the proxy dropped: a bad key or frame, silence, too slow.", proxy.clientsDropped)
        page.single("birdctl_proxy_advertisements_total", .counter, help: "Advertisements passed on to the clients that asked for them.", proxy.advertisements)
        page.single("birdctl_proxy_links", .gauge, help: "Home Assistant's links through the proxy, up or being made.", proxy.links)
        page.family("birdctl_proxy_connects_total", .counter, help: "Connects Home Assistant asked for, by how they ended (linked, failed, no_slot).")
        for (result, count) in proxy.connects.sorted(by: { $0.key < $1.key }) {
            page.sample("birdctl_proxy_connects_total", count, labels: ["result": result])
        }
    }

    private static func peripheralFamilies(_ peripheral: PeripheralHealth, into page: inout Exposition) {
        page.single("birdctl_serve_advertising", .gauge, help: "1 while the Bird Service is advertised, else 0.", peripheral.advertising ? 1 : 0)
        page.single("birdctl_serve_notifying_fields", .gauge, help: "Fields (name, color, alpha) a central has notifications of.", peripheral.notifyingFields.count)
        page.family("birdctl_serve_writes_total", .counter, help: "Writes from centrals, taken (accepted) or refused as a bad value.")
        page.sample("birdctl_serve_writes_total", peripheral.writes, labels: ["result": "accepted"])
        page.sample("birdctl_serve_writes_total", peripheral.refusedWrites, labels: ["result": "refused"])
    }

    private static func birdFamilies(_ health: BirdHealth, now: MonotonicInstant, into page: inout Exposition) {
        let birds = health.birds.sorted { $0.key < $1.key }
        page.family("birdctl_bird_readings_total", .counter, help: "Readings decoded from the bird.")
        for (address, bird) in birds { page.sample("birdctl_bird_readings_total", bird.readings, labels: ["address": address.description]) }
        page.family("birdctl_bird_connections_total", .counter, help: "Links made to the bird (each poll of a polled bird is one).")
        for (address, bird) in birds { page.sample("birdctl_bird_connections_total", bird.connections, labels: ["address": address.description]) }
        page.family("birdctl_bird_last_reading_age_seconds", .gauge, help: "Seconds since the bird's last reading; absent before its first.")
        for (address, bird) in birds {
            guard let last = bird.lastReading else { continue }
            let age = now - last
            let seconds = Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18
            page.sample("birdctl_bird_last_reading_age_seconds", (seconds * 1000).rounded() / 1000, labels: ["address": address.description])
        }
        page.family("birdctl_bird_rssi_dbm", .gauge, help: "The bird's signal strength as last heard, in dBm; absent if never heard.")
        for (address, bird) in birds {
            if let rssi = bird.rssi { page.sample("birdctl_bird_rssi_dbm", Int(rssi), labels: ["address": address.description]) }
        }
    }
}
