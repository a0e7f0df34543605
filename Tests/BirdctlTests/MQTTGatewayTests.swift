import FakeBlueZSupport
import MosquittoSupport
import TestProcesses
import Foundation
import Glibc
import Testing

/// `watch --mqtt` against a real broker (Debian's mosquitto) on a loopback
/// port, checked with `mosquitto_sub`.
@Suite("birdctl watch --mqtt")
struct MQTTGatewayTests {
    @Test func publishesReadingsStateEventsAvailabilityAndDiscovery() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let subscriber = try await broker.subscribe(["gw/#", "homeassistant/#"])
        let watch = try fake.launch("watch", "--quiet", "--count", "4", "--mqtt", broker.url(prefix: "gw"))
        try await waitForNotifying(fake, allFields)
        // A change before the first read's reply is superseded by the read
        // (it is older): push once the read is published.
        let early = try await subscriber.messages(until: { $0.topic == "gw/\(bird)/alpha" })
        try await fake.push("10")
        let finished = try await watch.finish()
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(finished.stdout.isEmpty, "--quiet printed \(finished.stdout)")

        let seen = try await early + subscriber.messages(until: { $0.topic == "gw/status" && $0.payload == "offline" })
        let topics = seen.map(\.topic)
        #expect(seen.first { $0.topic == "gw/status" }?.payload == "online")
        #expect(seen.filter { $0.topic == "gw/\(bird)/alpha" }.map(\.payload) == ["0.8", "0.1"])
        #expect(seen.first { $0.topic == "gw/\(bird)/name" }?.payload == "Robin")
        #expect(seen.first { $0.topic == "gw/\(bird)/color" }?.payload == "#FF8800")
        // Events as --json has them, on the bird's event topic.
        let events = try seen.filter { $0.topic == "gw/\(bird)/event" }.map { try parseJSON($0.payload)["event"] as? String }
        #expect(events.starts(with: ["found", "connected"]), "\(events)")
        // The bird came online before its readings and went offline at the end.
        let online = try #require(topics.firstIndex(of: "gw/\(bird)/status"))
        #expect(seen[online].payload == "online" && online < topics.firstIndex(of: "gw/\(bird)/alpha")!)
        #expect(seen.last { $0.topic == "gw/\(bird)/status" }?.payload == "offline")

        // What the broker keeps for a subscriber that comes later.
        let retained = try await broker.retained("#")
        #expect(retained["gw/status"] == "offline")
        #expect(retained["gw/\(bird)/alpha"] == "0.1")
        #expect(retained["gw/\(bird)/status"] == "offline")
        let state = try parseJSON(try #require(retained["gw/\(bird)"]))
        #expect(state["address"] as? String == bird && state["name"] as? String == "Robin")
        #expect(state["color"] as? String == "#FF8800" && state["alpha"] as? Double == 0.1)

        // Home Assistant discovery: the gateway, and one sensor per field on the bird's device.
        let gatewayConfig = try parseJSON(try #require(retained["homeassistant/binary_sensor/birdctl_gw/config"]))
        #expect(gatewayConfig["state_topic"] as? String == "gw/status")
        for field in ["name", "color", "alpha"] {
            let topic = "homeassistant/sensor/birdctl_gw_F00DB17D0001_\(field)/config"
            let config = try parseJSON(try #require(retained[topic], "no \(topic)"))
            #expect(config["unique_id"] as? String == "birdctl_gw_F00DB17D0001_\(field)")
            #expect(config["state_topic"] as? String == "gw/\(bird)/\(field)")
            let device = try #require(config["device"] as? [String: Any])
            #expect(device["identifiers"] as? [String] == ["birdctl_F00DB17D0001"])
            #expect(device["via_device"] as? String == "birdctl_gw")
            #expect(device["name"] as? String == "Robin")
            let availability = try #require(config["availability"] as? [[String: Any]])
            #expect(availability.compactMap { $0["topic"] as? String } == ["gw/status", "gw/\(bird)/status"])
        }
    }

    /// A Connect that fails counts on the gateway's retained health, with its
    /// Home Assistant sensor; the bird is connected at its next sighting.
    @Test func aFailedConnectCountsOnTheGatewaysHealth() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.call("FailNext", .string("Connect"), .string("org.bluez.Error.Failed"), .string("Page Timeout"))
        let broker = try await MosquittoBroker()
        let watch = try fake.launch("watch", "--all", "--quiet", "--mqtt", broker.url(prefix: "gw"))
        let counted = await poll(within: .seconds(30), every: .milliseconds(200)) {
            (try? await broker.retained("gw/health"))?["gw/health"] == #"{"connect_failures":1}"#
        }
        let retained = try await broker.retained("gw/#")
        #expect(counted, "\(retained)")
        let sensor = try await broker.retained("homeassistant/sensor/birdctl_gw_connect_failures/config")
        #expect(sensor.values.first?.contains(#""state_topic":"gw/health""#) == true, "\(sensor)")
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aGatewayKilledWhileABirdWasOnlineLeavesItOfflineOnceRestartedWithoutIt() async throws {
        // The will covers only the gateway's status: a bird's retained
        // "online" outlives a kill -9. The gateway that starts again (not
        // hearing the bird) reads the retained statuses and corrects them.
        let broker = try await MosquittoBroker()
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let first = try fake.launch("watch", "--all", "--quiet", "--mqtt", broker.url(prefix: "gw"))
        let subscriber = try await broker.subscribe(["gw/\(bird)/status", "gw/status"])
        _ = try await subscriber.messages(until: { $0.topic == "gw/\(bird)/status" && $0.payload == "online" })
        first.signal(SIGKILL)
        _ = try await first.waitForExit()
        _ = try await subscriber.messages(until: { $0.topic == "gw/status" && $0.payload == "offline" })
        #expect(try await broker.retained("gw/#")["gw/\(bird)/status"] == "online", "the stale status this test is about")

        let empty = try await FakeBlueZ()
        let second = try empty.launch("watch", "--all", "--quiet", "--mqtt", broker.url(prefix: "gw"))
        _ = try await subscriber.messages(until: { $0.topic == "gw/\(bird)/status" && $0.payload == "offline" })
        // The gateway says it is online only after correcting its birds, so
        // the bird's "offline" may be seen before the gateway's "online".
        #expect(try await poll { try await broker.retained("gw/status")["gw/status"] == "online" })
        #expect(try await broker.retained("gw/#")["gw/\(bird)/status"] == "offline")
        second.signal(SIGTERM)
        #expect(try await second.waitForExit() == 0)
    }

    @Test func retireClearsABirdThenTheGatewayAndLeavesOthersAlone() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        for prefix in ["gw", "gw/nested", "other"] {
            let finished = try await fake.birdctl("watch", "--count", "3", "--quiet", "--mqtt", broker.url(prefix: prefix))
            #expect(finished.status == 0, "\(finished.stderr)")
        }
        let before = try await broker.retained("#")
        let ours = [
            "gw/F0", "gw/status", "homeassistant/binary_sensor/birdctl_gw/", "homeassistant/sensor/birdctl_gw_F00D",
            "homeassistant/number/birdctl_gw_F00D", "homeassistant/text/birdctl_gw_F00D", "gw/links",
            "homeassistant/sensor/birdctl_gw_links/", "homeassistant/sensor/birdctl_gw_link_limit/",
        ]
        let others = before.filter { topic in !topic.key.hasPrefix("birdctl-test/") && !ours.contains { topic.key.hasPrefix($0) } }
        #expect(others.keys.contains("gw/nested/status") && others.keys.contains("other/\(bird)/alpha"))
        #expect(before["homeassistant/sensor/birdctl_gw_F00DB17D0001_alpha/config"] != nil)

        // Running: refused, nothing cleared.
        let running = try fake.launch("watch", "--quiet", "--mqtt", broker.url(prefix: "gw"))
        // Online once it has read (and corrected) what the broker retains of its birds.
        #expect(try await poll { try await broker.retained("gw/status")["gw/status"] == "online" })
        let refused = try await BirdctlProcess.run(["retire", "--mqtt", broker.url(prefix: "gw")], environment: [:])
        #expect(refused.status == 2 && refused.stderr.contains("is online"), "\(refused.stderr)")
        running.signal(SIGTERM)
        #expect(try await running.waitForExit() == 0)

        let one = try await BirdctlProcess.run(["retire", "--mqtt", broker.url(prefix: "gw"), bird.lowercased()], environment: [:])
        #expect(one.status == 0, "\(one.stderr)")
        var left = try await broker.retained("#")
        #expect(left.keys.filter { $0.hasPrefix("gw/F0") || $0.contains("birdctl_gw_F00D") }.isEmpty, "\(left.keys.sorted())")
        #expect(left["gw/status"] == "offline" && left["homeassistant/binary_sensor/birdctl_gw/config"] != nil)
        #expect(Set(one.stdout).contains("homeassistant/sensor/birdctl_gw_F00DB17D0001_alpha/config"), "\(one.stdout)")

        let all = try await BirdctlProcess.run(["retire", "--mqtt", broker.url(prefix: "gw")], environment: [:])
        #expect(all.status == 0, "\(all.stderr)")
        left = try await broker.retained("#")
        #expect(left["gw/status"] == nil && left["homeassistant/binary_sensor/birdctl_gw/config"] == nil && left["gw/links"] == nil)
        #expect(left.filter { !$0.key.hasPrefix("birdctl-test/") } == others)
    }

    @Test func retireWithoutABrokerIsElevenAndWithBadArgumentsTwo() async throws {
        let broker = try await MosquittoBroker()
        await broker.stop()
        let unreachable = try await BirdctlProcess.run(["retire", "--mqtt", broker.url(prefix: "gw")], environment: [:])
        #expect(unreachable.status == 11 && unreachable.stderr.contains("cannot reach the MQTT broker"), "\(unreachable.stderr)")
        for arguments in [["retire"], ["retire", "--mqtt", "mqtt://127.0.0.1/gw", "robin"]] {
            let usage = try await BirdctlProcess.run(arguments, environment: [:])
            #expect(usage.status == 2, "\(arguments): \(usage.stderr)")
        }
    }

    @Test func aBrokerRestartMidStreamLosesNoReading() async throws {
        // QoS 1 both ways and a persistent subscriber session: every reading
        // arrives, in order; a message in flight when the broker went may come
        // twice (QoS 1 is at least once), so at most the window's 64 repeat.
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let topic = "gw/\(bird)/name"
        let subscriber = try await broker.subscribe([topic], sessionID: "restart-test")
        let watch = try fake.launch("watch", "name", "--quiet", "--mqtt", broker.url(prefix: "gw"), "--no-discovery")
        try await waitForNotifying(fake, [FakeBlueZ.nameUUID])
        #expect(await watch.stderr(contains: "connected to the MQTT broker"))
        // The first read's value is through before the stream starts (a
        // notification overtaking the read's answer would supersede it).
        _ = try await subscriber.messages(until: { $0.payload == "Robin" })
        for i in 0..<600 {
            if i == 200 { await broker.stop() }
            if i == 400 { try await broker.start() }
            try await fake.push("n\(i)", to: FakeBlueZ.nameUUID)
        }
        let seen = try await subscriber.messages(within: .seconds(60), until: { $0.payload == "n599" })
        var firstSeen: [String] = []
        for message in seen where !firstSeen.contains(message.payload) { firstSeen.append(message.payload) }
        #expect(firstSeen == (0..<600).map { "n\($0)" })
        #expect(seen.count - firstSeen.count <= 64, "\(seen.count - firstSeen.count) repeated")
        #expect(watch.stderr.contains("lost the MQTT broker"), "\(watch.stderr)")
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aHungBrokerNeverStallsBluetoothAndAnExitDoesNotWaitForIt() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let watch = try fake.launch("watch", "alpha", "--json", "--mqtt", broker.url(prefix: "gw"))
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        #expect(await watch.stderr(contains: "connected to the MQTT broker"))
        broker.signal(SIGSTOP)
        defer { broker.signal(SIGCONT) }
        try await fake.call("Burst", .string(bird), .string(alphaUUID), .uint32(2000), .uint32(101))
        var readings = 0
        while readings < 2000, let line = try await watch.nextLine(within: .seconds(10)) {
            if line.contains("\"reading\"") { readings += 1 }
        }
        #expect(readings == 2000)
        // The broker stays stopped: that birdctl exits at all shows it gave up
        // on it (two 3 s deadlines without progress); how fast is no test's
        // business on shared cores (an 8 s bound failed at 8.1 s under a load of 11).
        watch.signal(SIGTERM)
        let status = try await watch.waitForExit(within: .seconds(60))
        #expect(status == 11, "readings the broker never took are a failure")
        #expect(watch.stderr.contains("did not take"), "\(watch.stderr)")
    }

    @Test func aBurstPublishesEveryValueAndAStateThatEndsOnTheNewest() async throws {
        // The state goes out once per loop wake-up, after the readings it
        // found: every value still arrives, in order; the states never go
        // back, and the last one has the newest value. (A newer state takes
        // the place of one still queued, so it may overtake values.)
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let subscriber = try await broker.subscribe(["gw/\(bird)", "gw/\(bird)/alpha"])
        let watch = try fake.launch("watch", "alpha", "--quiet", "--mqtt", broker.url(prefix: "gw"), "--no-discovery")
        try await waitForNotifying(fake)
        let early = try await subscriber.messages(until: { $0.topic == "gw/\(bird)/alpha" })
        // 0.00 ... 0.99 ten times, then 1.00, which only the end can have.
        try await fake.call("Burst", .string(bird), .string(alphaUUID), .uint32(1000), .uint32(100))
        try await fake.push("100")
        let seen = try await early + subscriber.messages(within: .seconds(60)) { (seen: [ReceivedMessage]) in
            seen.filter { $0.topic == "gw/\(bird)/alpha" }.count == 1001
                && seen.contains { $0.topic == "gw/\(bird)" && $0.payload.contains("\"alpha\":1") }
        }
        let percent = { (value: Double) in Int((value * 100).rounded()) }
        let values = seen.filter { $0.topic == "gw/\(bird)/alpha" }.compactMap { Double($0.payload).map(percent) }
        #expect(values == [80] + (0..<1000).map { $0 % 100 } + [100])
        let states = try seen.filter { $0.topic == "gw/\(bird)" }.map { try parseJSON($0.payload) }
        #expect(states.allSatisfy { $0["time"] is String && $0["address"] as? String == bird })
        // Each state's alpha is a value at or after the previous state's.
        var next = values.startIndex
        for alpha in states.compactMap({ ($0["alpha"] as? Double).map(percent) }) {
            guard let found = values[next...].firstIndex(of: alpha) else {
                Issue.record("a state's alpha \(alpha) is older than the state's before it")
                break
            }
            next = found
        }
        #expect((states.last?["alpha"] as? Double).map(percent) == 100)
        #expect((1...values.count).contains(states.count))
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aFullBufferDropsTheOldestAndSaysHowMany() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let subscriber = try await broker.subscribe(["gw/#"], sessionID: "overflow-test")
        let watch = try fake.launch(
            "watch", "alpha", "--quiet", "--mqtt", broker.url(prefix: "gw"), "--mqtt-buffer", "50", "--no-discovery")
        try await waitForNotifying(fake)
        #expect(await watch.stderr(contains: "connected to the MQTT broker"))
        // Pushes before the first read's reply would be superseded by it: wait for it.
        let early = try await subscriber.messages(until: { $0.topic == "gw/\(bird)/alpha" })
        await broker.stop()
        #expect(await watch.stderr(contains: "lost the MQTT broker"))
        // 100 readings: 100 values and the bird's state (a snapshot: one
        // waiting message, replaced by each newer one) for 50 places.
        for i in 0..<100 { try await fake.push(String(i)) }
        try await broker.start()
        // Until the dropped event and the state that says the newest value
        // (birdctl may still be busy with the notifications when the broker
        // is back: then some readings come after the event).
        let seen = try await early + subscriber.messages(within: .seconds(40)) { (seen: [ReceivedMessage]) in
            seen.contains { $0.topic == "gw/event" } && seen.contains { $0.topic == "gw/\(bird)" && $0.payload.contains("\"alpha\":0.99") }
        }
        let dropped = try #require(seen.first { $0.topic == "gw/event" }, "no dropped event in \(seen.map(\.topic))")
        let event = try parseJSON(dropped.payload)
        #expect(event["event"] as? String == "dropped")
        let count = try #require(event["messages"] as? Int)
        #expect((50...60).contains(count), "dropped \(count)")
        // stderr is read apart from the broker's messages: wait for the line.
        #expect(await watch.stderr(contains: "dropped the \(count) oldest"), "\(watch.stderr)")
        // What was kept is the newest, in order: the readings after the
        // initial read (and its retained copy) run up to 99 without a gap.
        // QoS 1 is at least once: a message in flight when the broker came
        // back may arrive twice (seen once in CI: 62, 62).
        let values = seen.filter { $0.topic == "gw/\(bird)/alpha" }.compactMap { Int((Double($0.payload)! * 100).rounded()) }
        let kept = values.drop { $0 == 80 }.reduce(into: [Int]()) { once, value in
            if once.last != value { once.append(value) }
        }
        #expect(kept.last == 99 && kept.elementsEqual((kept.first ?? 0)...99), "\(values)")
        #expect((40...50).contains(kept.count), "\(kept.count) readings kept of 100 with a 50-message buffer")
        // The state was not dropped: it says the newest value.
        let state = try parseJSON(try #require(seen.last { $0.topic == "gw/\(bird)" }).payload)
        #expect(state["alpha"] as? Double == 0.99)
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func threeGatewaysHearingOneBirdEachOwnTheirEntities() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let subscriber = try await broker.subscribe(["+/\(bird)/alpha"])
        // Three clients of one bird's notifications: signals, which they share.
        let gateways = try ["kitchen", "hall", "attic"].map {
            try fake.launch("watch", "alpha", "--json", "--notify-method", "start", "--mqtt", broker.url(prefix: $0))
        }
        // Each reads after subscribing: its first reading means it is notified.
        for gateway in gateways { _ = try await gateway.line(containing: "\"reading\"") }
        for gateway in gateways { #expect(await gateway.stderr(contains: "connected to the MQTT broker")) }
        try await fake.push("42")
        let seen = try await subscriber.messages(until: { messages in
            Set(messages.filter { $0.payload == "0.42" }.map(\.topic)).count == 3
        })
        #expect(Set(seen.filter { $0.payload == "0.42" }.map(\.topic)) == Set(["kitchen", "hall", "attic"].map { "\($0)/\(bird)/alpha" }))
        for gateway in gateways { gateway.signal(SIGTERM) }
        for gateway in gateways { #expect(try await gateway.waitForExit() == 0) }
        let retained = try await broker.retained("homeassistant/#")
        for name in ["kitchen", "hall", "attic"] {
            let config = try parseJSON(try #require(retained["homeassistant/sensor/birdctl_\(name)_F00DB17D0001_alpha/config"]))
            #expect(config["state_topic"] as? String == "\(name)/\(bird)/alpha")
            #expect((config["device"] as? [String: Any])?["identifiers"] as? [String] == ["birdctl_F00DB17D0001"])
        }
        let statuses = try await broker.retained("+/status")
        #expect(statuses == ["kitchen/status": "offline", "hall/status": "offline", "attic/status": "offline"])
    }

    @Test func tlsWithAPasswordFromAFile() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker(users: ["gateway": "s3cret:with:colons"], tls: true)
        let tls = try #require(broker.tls)
        let credentials = broker.directory.appendingPathComponent("credentials").path
        try "gateway:s3cret:with:colons\n".write(toFile: credentials, atomically: true, encoding: .utf8)
        chmod(credentials, 0o600)
        let finished = try await fake.birdctl(
            "watch", "alpha", "--count", "1", "--quiet", "--mqtt", broker.url(prefix: "secure"),
            "--mqtt-ca", tls.caCertificate, "--mqtt-credentials", credentials)
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(!finished.stderr.contains("warning"), "\(finished.stderr)")
        let retained = try await broker.retained(
            "secure/#", extra: ["--cafile", tls.caCertificate, "-u", "gateway", "-P", "s3cret:with:colons"])
        #expect(retained["secure/\(bird)/alpha"] == "0.8")
        #expect(retained["secure/status"] == "offline")
    }

    @Test func aBrokerThatAsksForAClientCertificateGetsOne() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker(tls: true, requireClientCertificate: true)
        let tls = try #require(broker.tls)
        let with = try await fake.birdctl(
            "watch", "alpha", "--count", "1", "--quiet", "--mqtt", broker.url(prefix: "cert"), "--mqtt-ca", tls.caCertificate,
            "--mqtt-cert", tls.clientCertificate, "--mqtt-key", tls.clientKey)
        #expect(with.status == 0, "\(with.stderr)")
        let retained = try await broker.retained(
            "cert/#", extra: ["--cafile", tls.caCertificate, "--cert", tls.clientCertificate, "--key", tls.clientKey])
        #expect(retained["cert/\(bird)/alpha"] == "0.8")
        let without = try await fake.birdctl(
            "watch", "--mqtt", broker.url(), "--mqtt-ca", tls.caCertificate, timeout: .seconds(15))
        #expect(without.status == 11, "\(without.stderr)")
        #expect(without.stderr.contains("MQTT broker"), "\(without.stderr)")
    }

    @Test func aWrongPasswordFromTheEnvironmentExitsElevenAtOnce() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker(users: ["gateway": "right"])
        let watch = try BirdctlProcess(
            ["watch", "--mqtt", broker.url()],
            environment: fake.environment.merging(["BIRDCTL_MQTT_USERNAME": "gateway", "BIRDCTL_MQTT_PASSWORD": "wrong"]) { $1 })
        // A refusal is final: no retry keeps it running past the bound.
        let finished = try await watch.finish(within: .seconds(15))
        #expect(finished.status == 11)
        #expect(finished.stderr.contains("the MQTT broker refused the connection"), "\(finished.stderr)")
        #expect(!finished.stderr.contains("wrong"), "the password reached stderr")
    }

    @Test func anUntrustedCertificateExitsEleven() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker(tls: true)
        let finished = try await fake.birdctl(
            "watch", "--mqtt", broker.url(), "--mqtt-ca", try #require(broker.tls).otherCACertificate, timeout: .seconds(15))
        #expect(finished.status == 11)
        #expect(finished.stderr.contains("TLS with the MQTT broker failed"), "\(finished.stderr)")
        #expect(finished.stderr.contains("certificate verify failed"), "\(finished.stderr)")
    }

    @Test func noBrokerAtStartExitsEleven() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        await broker.stop()
        let finished = try await fake.birdctl("watch", "--mqtt", broker.url(), timeout: .seconds(15))
        #expect(finished.status == 11)
        #expect(finished.stderr.contains("cannot reach the MQTT broker: Connection refused"), "\(finished.stderr)")
    }

    @Test(arguments: [
        (["--mqtt", "mqtt://user:pass@localhost"], "no credentials in the URL"),
        (["--mqtt", "http://localhost"], "--mqtt expects"),
        (["--mqtt", "mqtt://localhost/a/#"], "wildcard"),
        (["--mqtt", "mqtts://localhost"], "needs --mqtt-ca"),
        (["--mqtt-ca", "/etc/hostname"], "goes with --mqtt"),
        (["--quiet"], "--quiet goes with --mqtt"),
        (["--mqtt", "mqtt://localhost", "--mqtt-credentials", "/nonexistent"], "cannot read /nonexistent"),
        (["--fleet"], "--fleet goes with --mqtt"),
        (["--all", "--mqtt", "mqtt://localhost/house/kitchen", "--fleet-dwell", "3"], "--fleet-dwell goes with --fleet"),
        (["--all", "--mqtt", "mqtt://localhost/house", "--fleet"], "--fleet needs a prefix ROOT/ROOM"),
        (["--all", "--mqtt", "mqtt://localhost/house/fleet", "--fleet"], "cannot be 'fleet'"),
        (["--mqtt", "mqtt://localhost/house/kitchen", "--fleet"], "--fleet goes with --all"),
    ])
    func badGatewayOptionsAreUsageErrors(_ arguments: [String], _ message: String) async throws {
        let finished = try await BirdctlProcess.run(["watch"] + arguments, environment: [:])
        #expect(finished.status == 2)
        #expect(finished.stderr.contains(message), "\(finished.stderr)")
    }
}

/// One message as `mosquitto_sub -v` prints it.
struct ReceivedMessage {
    var topic: String
    var payload: String
}

extension BirdctlProcess {
    /// The subscriber's messages until `done` holds for them (or the time is up).
    func messages(
        within timeout: Duration = .seconds(20), until done: ([ReceivedMessage]) -> Bool
    ) async throws -> [ReceivedMessage] {
        var seen: [ReceivedMessage] = []
        let deadline = ContinuousClock.now + timeout
        while !done(seen) {
            let left = deadline - ContinuousClock.now
            guard left > .zero, let line = try await nextLine(within: left) else {
                throw TestSetupError("the subscriber's messages ended: \(seen.suffix(10).map { "\($0.topic) \($0.payload)" })")
            }
            // The retained readiness marker comes again after a reconnect.
            guard let space = line.firstIndex(of: " "), !line.hasPrefix("birdctl-test/ready/") else { continue }
            seen.append(ReceivedMessage(topic: String(line[..<space]), payload: String(line[line.index(after: space)...])))
        }
        return seen
    }

    /// Until one message satisfies `done`.
    func messages(
        within timeout: Duration = .seconds(20), until done: @escaping (ReceivedMessage) -> Bool
    ) async throws -> [ReceivedMessage] {
        try await messages(within: timeout) { (seen: [ReceivedMessage]) in seen.last.map(done) ?? false }
    }
}
