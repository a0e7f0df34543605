import FakeBlueZSupport
import MosquittoSupport
import TestProcesses
import Foundation
import Testing

/// `watch --all --mqtt --fleet`: three gateways, each on a fake BlueZ of its
/// own, one real mosquitto, and one "air" that decides how loud each gateway
/// hears the bird. docs/fleet.md.
@Suite("Several gateways share the birds", .serialized)
struct FleetGatewayTests {
    /// A room's fake BlueZ and its gateway.
    struct Room {
        let name: String
        let fake: FakeBlueZ
        let gateway: BirdctlProcess

        func connected() async throws -> Bool {
            let tree = try await fake.managedObjects()
            return (tree.dictionaryEntries ?? []).contains { entry in
                entry.key.objectPath?.description == birdPath
                    && entry.value.dictionaryEntries?.first { $0.key.string == "org.bluez.Device1" }?.value
                        .propertyMap?["Connected"]?.bool == true
            }
        }
    }

    /// The air: the bird as each room hears it now.
    static func air(_ rooms: [Room], _ levels: [Int]) async throws {
        for (room, level) in zip(rooms, levels) { try await room.fake.call("SetRSSI", .string(bird), .int16(Int16(level))) }
    }

    /// A room per (name, RSSI at first), each with its fake BlueZ and its
    /// gateway (`--fleet`, a dwell of 3 s) on `broker`.
    static func startRooms(_ levels: KeyValuePairs<String, Int16>, on broker: MosquittoBroker) async throws -> [Room] {
        var rooms: [Room] = []
        for (name, rssi) in levels {
            let fake = try await FakeBlueZ()
            try await fake.addBird(rssi: rssi)
            let gateway = try fake.launch(
                "watch", "--all", "alpha", "--json", "--mqtt", broker.url(prefix: "house/\(name)"), "--fleet", "--fleet-dwell", "3")
            rooms.append(Room(name: name, fake: fake, gateway: gateway))
        }
        return rooms
    }

    /// The air keeps each room hearing the bird around `levels` (±2 dB) until
    /// the kitchen holds it and streams its first reading.
    static func heldByTheKitchen(_ rooms: [Room], _ levels: [Int], on broker: MosquittoBroker) async throws {
        let claimed = try await poll(within: .seconds(30), every: .milliseconds(200)) {
            try await air(rooms, levels.map { Int.random(in: $0 - 2 ... $0 + 2) })
            return try await holder(broker) == "kitchen"
        }
        #expect(claimed, "\(rooms.map(\.gateway.stderr))")
        _ = try await rooms[0].gateway.line(containing: "\"reading\"", within: .seconds(20))
    }

    static func holder(_ broker: MosquittoBroker) async throws -> String? {
        try await broker.retained("house/fleet/\(bird)/holder")["house/fleet/\(bird)/holder"]
    }

    /// A bird that stops advertising while held: nobody hears it, so its
    /// holder keeps it while the link lasts; when the link goes and the holder
    /// no longer hears it, the room that does takes it.
    @Test func aBirdSilentWhileHeldStaysWithItsHolderUntilTheLinkGoes() async throws {
        let broker = try await MosquittoBroker()
        let rooms = try await Self.startRooms(["kitchen": -45, "garden": -85], on: broker)
        try await Self.heldByTheKitchen(rooms, [-45, -85], on: broker)
        // Held, it is silent: nobody hears it move to the garden. 6 s, two dwell times.
        try await Task.sleep(for: .seconds(6))
        #expect(try await Self.holder(broker) == "kitchen")
        let stillLinked = try await rooms[0].connected()
        #expect(stillLinked)
        // Out of the kitchen's range: the link drops and the kitchen hears it no more.
        try await rooms[0].fake.call("SetVisible", .string(bird), .bool(false))
        try await rooms[0].fake.call("DropLink", .string(bird))
        let moved = try await poll(within: .seconds(30), every: .milliseconds(200)) {
            try await rooms[1].fake.call("SetRSSI", .string(bird), .int16(Int16.random(in: -52 ... -48)))
            return try await Self.holder(broker) == "garden"
        }
        #expect(moved, "\(rooms[0].gateway.stderr)")
        _ = try await rooms[1].gateway.line(containing: "\"reading\"", within: .seconds(20))
        for room in rooms { room.gateway.signal(SIGTERM) }
        for room in rooms { #expect(try await room.gateway.waitForExit() == 0) }
    }

    /// A broker restart: no will is published (the gateways did not die), the
    /// holder sends its claim again as it reconnects, and nobody else claims.
    @Test func aBrokerRestartKeepsTheHolder() async throws {
        let broker = try await MosquittoBroker()
        let rooms = try await Self.startRooms(["kitchen": -45, "garden": -60], on: broker)
        let holders = try await broker.subscribe(["house/fleet/+/holder"], sessionID: "fleet-holders")
        try await Self.heldByTheKitchen(rooms, [-45, -60], on: broker)
        await broker.stop()
        try await Task.sleep(for: .seconds(2))
        try await broker.start()
        for gateway in rooms.map(\.gateway) { #expect(await gateway.stderr(contains: "connected to the MQTT broker", within: .seconds(20))) }
        // Three dwell times of the air as it was: the kitchen keeps the bird.
        for _ in 0..<45 {
            try await Self.air(rooms, [Int.random(in: -47 ... -43), Int.random(in: -62 ... -58)])
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(try await Self.holder(broker) == "kitchen")
        let linked = try await [rooms[0].connected(), rooms[1].connected()]
        #expect(linked == [true, false])
        for room in rooms { room.gateway.signal(SIGTERM) }
        for room in rooms { #expect(try await room.gateway.waitForExit() == 0) }
        holders.signal(SIGTERM)
        let claims = try await holders.finish().stdout.filter { !$0.contains("birdctl-test/ready") }
            .compactMap { $0.split(separator: " ").last.map(String.init) }
        #expect(!claims.contains("garden"), "\(claims)\nkitchen: \(rooms[0].gateway.stderr)\ngarden: \(rooms[1].gateway.stderr)")

        // Retiring the kitchen clears its heard reports and its claim, not the garden's report.
        let retired = try await BirdctlProcess.run(["retire", "--mqtt", broker.url(prefix: "house/kitchen")], environment: [:])
        #expect(retired.status == 0, "\(retired.stderr)")
        let left = try await broker.retained("house/fleet/#")
        #expect(left["house/fleet/\(bird)/heard/kitchen"] == nil && left["house/fleet/\(bird)/holder"] == nil, "\(left)")
        #expect(left["house/fleet/\(bird)/heard/garden"] != nil, "\(left)")
    }

    /// A partition: the holder stops answering (SIGSTOP: its link to the bird
    /// stays, its connection to the broker goes silent). The broker declares
    /// it dead after 1.5 × its 30 s keep-alive and publishes its will; the
    /// garden takes the bird. Back (SIGCONT), the kitchen finds the garden's
    /// claim and lets its link go: two holders only while it was cut off.
    @Test func aHolderCutOffLosesItsBirdAndLetsItGoWhenItIsBack() async throws {
        let broker = try await MosquittoBroker()
        let rooms = try await Self.startRooms(["kitchen": -45, "garden": -60], on: broker)
        try await Self.heldByTheKitchen(rooms, [-45, -60], on: broker)
        rooms[0].gateway.signal(SIGSTOP)
        let takenOver = try await poll(within: .seconds(120), every: .milliseconds(500)) {
            try await Self.air(rooms, [Int.random(in: -47 ... -43), Int.random(in: -62 ... -58)])
            return try await Self.holder(broker) == "garden"
        }
        #expect(takenOver)
        let gardenLinked = try await poll(within: .seconds(20)) { try await rooms[1].connected() }
        #expect(gardenLinked)
        rooms[0].gateway.signal(SIGCONT)
        let kitchenLetGo = try await poll(within: .seconds(30), every: .milliseconds(200)) { try await !rooms[0].connected() }
        #expect(kitchenLetGo, "\(rooms[0].gateway.stderr)")
        #expect(try await Self.holder(broker) == "garden")
        for room in rooms { room.gateway.signal(SIGTERM) }
        for room in rooms { #expect(try await room.gateway.waitForExit() == 0) }
    }

    @Test func oneHolderThroughAWalkWithNoiseAndAnotherWhenItDies() async throws {
        let broker = try await MosquittoBroker()
        let holders = try await broker.subscribe(["house/fleet/+/holder"])
        // Every reading a gateway publishes, from the start (live, QoS 1).
        let published = try await broker.subscribe(["house/+/\(bird)/alpha"])
        let rooms = try await Self.startRooms(["kitchen": -45, "garden": -85, "hall": -85], on: broker)
        var random = SystemRandomNumberGenerator()
        func noisy(_ level: Int) -> Int { level + Int.random(in: -6...6, using: &random) }

        // The kitchen hears it best: it claims it (after 5 s of settling) and alone connects.
        let claimed = try await poll(within: .seconds(30), every: .milliseconds(200)) {
            try await Self.air(rooms, [noisy(-45), noisy(-85), noisy(-85)])
            return try await Self.holder(broker) == "kitchen"
        }
        #expect(claimed, "\(rooms.map(\.gateway.stderr))")
        _ = try await rooms[0].gateway.line(containing: "\"reading\"", within: .seconds(20))
        let kitchen = try await rooms[0].connected()
        #expect(kitchen)
        let others = try await [rooms[1].connected(), rooms[2].connected()]
        #expect(others == [false, false])

        // Noise around where it is: nothing moves (10 s, three dwell times).
        for _ in 0..<50 {
            try await Self.air(rooms, [noisy(-60), noisy(-62), noisy(-85)])
            try await Task.sleep(for: .milliseconds(200))
            #expect(try await Self.holder(broker) == "kitchen")
        }
        // It walks into the garden: one handover.
        let moved = try await poll(within: .seconds(30), every: .milliseconds(200)) {
            try await Self.air(rooms, [noisy(-80), noisy(-45), noisy(-85)])
            return try await Self.holder(broker) == "garden"
        }
        #expect(moved)
        _ = try await rooms[1].gateway.line(containing: "\"reading\"", within: .seconds(20))
        let released = try await poll(within: .seconds(10)) { try await !rooms[0].connected() }
        #expect(released, "the kitchen kept its link")
        let hall = try await rooms[2].connected()
        #expect(!hall)

        // The garden's gateway dies: its will, then the hall (heard best of those left) takes the bird.
        for _ in 0..<15 {  // it sits there for 3 s: every room's report has caught up
            try await Self.air(rooms, [noisy(-80), noisy(-45), noisy(-60)])
            try await Task.sleep(for: .milliseconds(200))
        }
        rooms[1].gateway.signal(SIGKILL)
        let takenOver = try await poll(within: .seconds(20), every: .milliseconds(200)) {
            try await Self.air(rooms, [noisy(-80), -127, noisy(-60)])
            return try await Self.holder(broker) == "hall"
        }
        #expect(takenOver)
        _ = try await rooms[2].gateway.line(containing: "\"reading\"", within: .seconds(20))
        try await rooms[2].fake.push("42")
        let subscriber = try await broker.subscribe(["house/hall/\(bird)/alpha"])
        _ = try await subscriber.messages(until: { $0.contains { $0.payload == "0.42" } })

        // A write from MQTT lands once, through the holder.
        let results = try await broker.subscribe(["house/fleet/\(bird)/+/result"])
        try await broker.publish("house/fleet/\(bird)/alpha/set", "33")
        let answered = try await results.messages(until: { !$0.isEmpty })
        let result = try parseJSON(try #require(answered.first?.payload))
        #expect(result["ok"] as? Bool == true && result["gateway"] as? String == "house/hall", "\(result)")
        for (room, writes) in zip(rooms, [0, 0, 1]) {
            #expect(try await room.fake.calls().filter { $0.hasPrefix("WriteValue ") }.count == writes, "\(room.name)")
        }

        // Home Assistant: one set of the bird's sensors, pointed at the holder; a
        // Gateway sensor; how loud each room hears it (diagnostic sensors).
        let configs = try await broker.retained("homeassistant/sensor/#")
        let alpha = try parseJSON(try #require(configs["homeassistant/sensor/birdctl_F00DB17D0001_alpha/config"]))
        #expect(alpha["state_topic"] as? String == "house/hall/\(bird)/alpha")
        #expect(configs.keys.filter { $0.hasSuffix("_alpha/config") }.count == 1, "\(configs.keys.sorted())")
        let gateway = try parseJSON(try #require(configs["homeassistant/sensor/birdctl_F00DB17D0001_holder/config"]))
        #expect(gateway["state_topic"] as? String == "house/fleet/\(bird)/holder")
        for room in ["kitchen", "hall"] {
            let rssi = try parseJSON(try #require(configs["homeassistant/sensor/birdctl_house_\(room)_F00DB17D0001_rssi/config"]))
            #expect(rssi["state_topic"] as? String == "house/fleet/\(bird)/heard/\(room)")
            #expect(rssi["unit_of_measurement"] as? String == "dBm")
        }

        // Every change of holder the broker saw: kitchen, garden, hall — no flapping.
        // No reading a surviving gateway received is lost on its way to the
        // broker: each printed one is there (the first printed was read above).
        for room in [rooms[0], rooms[2]] { room.gateway.signal(SIGTERM) }
        var printed: [String: Int] = [:]
        for room in [rooms[0], rooms[2]] {
            let finished = try await room.gateway.finish()
            #expect(finished.status == 0)
            printed[room.name] = 1 + finished.stdout.filter { $0.contains("\"reading\"") }.count
        }
        published.signal(SIGTERM)
        let onBroker = try await published.finish().stdout
        for (name, count) in printed {
            let arrived = onBroker.filter { $0.hasPrefix("house/\(name)/\(bird)/alpha ") }.count
            #expect(arrived >= count, "\(name): \(count) readings printed, \(arrived) on the broker")
        }
        holders.signal(SIGTERM)
        let changes = try await holders.finish().stdout.filter { !$0.contains("birdctl-test/ready") }
            .map { $0.split(separator: " ").last.map(String.init) ?? "" }
        // (A claim that won a race is sent again by its room: the same holder twice in a row.)
        let holdersInTurn = changes.filter { !$0.isEmpty }.reduce(into: [String]()) { if $0.last != $1 { $0.append($1) } }
        #expect(holdersInTurn == ["kitchen", "garden", "hall"], "\(changes)")
    }
}
