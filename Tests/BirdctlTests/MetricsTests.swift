import FakeBlueZSupport
import TestProcesses
import DBus
import Foundation
import Glibc
import Testing

/// `--metrics`: the health page, read by promtool and scraped by a real Prometheus server.
@Suite("Metrics")
struct MetricsTests {
    static let birds = ["F0:0D:B1:7D:00:01", "F0:0D:B1:7D:00:02"]

    /// A watch of two birds serves its page on a port the kernel picks: the
    /// page passes `promtool check metrics`, other paths are 404, and a
    /// Prometheus server on loopback scrapes it: its query API returns each
    /// bird's readings and the adapter's links.
    @Test func aPrometheusServerScrapesTheHealthPage() async throws {
        let fake = try await FakeBlueZ()
        for (n, address) in Self.birds.enumerated() {
            try await fake.addBird(address: address, name: "Bird\(n + 1)", alpha: "\(10 * (n + 1))", rssi: Int16(-40 - n))
        }
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--metrics", "127.0.0.1:0")
        var read: Set<String> = []
        while read.count < Self.birds.count {
            let event = try parseJSON(try await watch.line(containing: "\"reading\"", within: .seconds(30)))
            read.insert(event["address"] as? String ?? "")
        }
        let port = try #require(await Self.metricsPort(of: watch))

        let page = try await Self.checkedPage(port: port)
        for address in Self.birds {
            #expect(page.contains("birdctl_bird_readings_total{address=\"\(address)\"} "), "\(page); birdctl said: \(watch.stderr)")
        }
        #expect(page.contains("birdctl_connect_attempts_total{adapter=\"hci0\"} "))
        #expect(try await Self.get("http://127.0.0.1:\(port)/").status == 404)

        let prometheus = try PrometheusServer(scraping: port)
        defer { prometheus.stop() }
        var answered: [String: Double] = [:]
        let scraped = try await poll(within: .seconds(90), every: .milliseconds(500)) {
            answered = try await prometheus.query("birdctl_bird_readings_total", by: "address")
            return Set(answered.keys) == Set(Self.birds) && answered.values.allSatisfy { $0 >= 1 }
        }
        #expect(scraped, "Prometheus's answer: \(answered); its log: \(prometheus.log)")
        let links = try await prometheus.query("birdctl_adapter_links", by: "adapter")
        #expect(links["hci0"] == 2, "\(links)")

        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    /// A port already taken is said, and the watch ends with the usage status (2).
    @Test func aTakenPortEndsTheWatch() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let first = try fake.launch("watch", "--all", "alpha", "--json", "--metrics", "127.0.0.1:0")
        let port = try #require(await Self.metricsPort(of: first))
        let second = try await fake.birdctl("watch", "--all", "alpha", "--metrics", "127.0.0.1:\(port)")
        #expect(second.status == 2)
        #expect(second.stderr.contains("cannot serve metrics at 127.0.0.1:\(port): bind: Address already in use"), "\(second.stderr)")
        first.signal(SIGINT)
        #expect(try await first.waitForExit() == 0)
    }

    /// A scan serves the adapters' part of the page (what each heard, no
    /// birds followed); serve the peripheral's (advertising, fields notified,
    /// writes taken and refused; nothing advertised nor notified while
    /// bluetoothd is gone). Both pass `promtool check metrics`.
    @Test func scanAndServeServeTheirPages() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(address: Self.birds[0], rssi: -50)
        let scan = try fake.launch("scan", "--json", "--metrics", "127.0.0.1:0")
        _ = try await scan.line(containing: "\"found\"", within: .seconds(30))
        let scanPort = try #require(await Self.metricsPort(of: scan))
        let scanned = try await Self.checkedPage(port: scanPort)
        #expect(scanned.split(separator: "\n").contains("birdctl_discovery_starts_total{adapter=\"hci0\"} 1"), "\(scanned)")
        let heard = scanned.split(separator: "\n").first { $0.hasPrefix("birdctl_advertisements_total{adapter=\"hci0\"} ") }
        #expect((heard?.split(separator: " ").last).flatMap { Int($0) } ?? 0 >= 1, "\(scanned)")
        #expect(scanned.split(separator: "\n").contains("birdctl_adapter_links{adapter=\"hci0\"} 0"))
        #expect(!scanned.contains("birdctl_bird_") && !scanned.contains("birdctl_serve_"), "\(scanned)")
        scan.signal(SIGINT)
        #expect(try await scan.waitForExit() == 0)

        let serve = try await fake.serve("--metrics", "127.0.0.1:0")
        try await fake.call("RemoteSubscribe", .string(FakeBlueZ.alphaUUID))
        _ = try await serve.line(containing: "\"subscribed\"")
        try await fake.remoteWrite(FakeBlueZ.alphaUUID, "55")
        await #expect(throws: DBusError.self) { try await fake.remoteWrite(FakeBlueZ.alphaUUID, "101") }
        _ = try await serve.line(containing: "refused_write")
        let servePort = try #require(await Self.metricsPort(of: serve))
        let served = try await Self.checkedPage(port: servePort)
        for line in [
            "birdctl_serve_advertising 1", "birdctl_serve_notifying_fields 1",
            "birdctl_serve_writes_total{result=\"accepted\"} 1", "birdctl_serve_writes_total{result=\"refused\"} 1",
        ] {
            #expect(served.split(separator: "\n").contains { $0 == line }, "\(line): \(served)")
        }
        #expect(!served.contains("birdctl_adapter_") && !served.contains("birdctl_bird_"), "\(served)")
        // bluetoothd goes: nothing is advertised nor notified; back, serve advertises again.
        try await fake.stop()
        _ = try await serve.line(containing: "\"stopped_advertising\"")
        let stopped = try await Self.checkedPage(port: servePort).split(separator: "\n")
        #expect(stopped.contains("birdctl_serve_advertising 0") && stopped.contains("birdctl_serve_notifying_fields 0"), "\(stopped)")
        try await fake.start()
        _ = try await serve.line(containing: "\"advertising\"")
        #expect(try await Self.checkedPage(port: servePort).split(separator: "\n").contains("birdctl_serve_advertising 1"))
        serve.signal(SIGINT)
        #expect(try await serve.waitForExit() == 0)
    }

    /// The page at `port`, which must be served and pass `promtool check metrics`.
    static func checkedPage(port: Int) async throws -> String {
        let page = try await MetricsPage.get("http://127.0.0.1:\(port)/metrics")
        #expect(page.status == 200, "\(page.body)")
        let checked = try await MetricsPage.promtool(page.body)
        #expect(checked.status == 0, "promtool: \(checked.output)")
        return page.body
    }

    static func metricsPort(of watch: BirdctlProcess) async -> Int? { await MetricsPage.port(of: watch) }

    static func get(_ url: String) async throws -> (status: Int, body: String) { try await MetricsPage.get(url) }
}

/// Debian's Prometheus server on a free loopback port, scraping birdctl every second.
final class PrometheusServer: Sendable {
    let port: Int
    let directory: URL
    private let process: ChildProcess

    init(scraping target: Int) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("prometheus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let configuration = """
            global: {scrape_interval: 1s, scrape_timeout: 1s}
            scrape_configs:
              - job_name: birdctl
                static_configs: [{targets: ['127.0.0.1:\(target)']}]
            """
        try configuration.write(to: directory.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        port = try freeLoopbackPort()
        process = try ChildProcess(
            "/usr/bin/prometheus",
            [
                "--config.file=\(directory.path)/prometheus.yml", "--storage.tsdb.path=\(directory.path)/data",
                "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
            ],
            stderr: .file(directory.appendingPathComponent("log")))
    }

    var log: String { (try? String(contentsOf: directory.appendingPathComponent("log"), encoding: .utf8)) ?? "" }

    /// An instant query's values by one label (empty while Prometheus is not up or has no sample).
    func query(_ expression: String, by label: String) async throws -> [String: Double] {
        let url = "http://127.0.0.1:\(port)/api/v1/query?query=\(expression)"
        guard case let (200, body) = try await MetricsTests.get(url),
            let answer = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any],
            let data = answer["data"] as? [String: Any], let results = data["result"] as? [[String: Any]]
        else { return [:] }
        var values: [String: Double] = [:]
        for result in results {
            guard let metric = result["metric"] as? [String: String], let key = metric[label],
                let value = result["value"] as? [Any], let text = value.last as? String
            else { continue }
            values[key] = Double(text)
        }
        return values
    }

    func stop() {
        process.kill()
        _ = process.wait(within: .seconds(10))
        try? FileManager.default.removeItem(at: directory)
    }
}
