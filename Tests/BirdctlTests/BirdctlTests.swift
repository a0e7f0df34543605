import BlueZ
import FakeBlueZSupport
import DBus
import Foundation
import Testing

@Suite("birdctl scan")
struct ScanTests {
    @Test func listsTheBirdAndIgnoresOthersAndCachedOnes() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(rssi: -48)
        try await fake.addBird(address: "F0:0D:B1:7D:00:02", name: "Away", cached: true, visible: false)
        try await fake.addDevice(address: "11:22:33:44:55:66", name: "Thermometer")
        let result = try await fake.birdctl("scan", "--timeout", "0.5")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.count == 1)
        let line = try #require(result.stdout.first)
        #expect(line.contains(bird))
        #expect(line.contains("Robin"))
        #expect(line.contains("-48 dBm"))
    }

    @Test func jsonParsesLineByLine() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(rssi: -48)
        try await fake.addBird(address: "F0:0D:B1:7D:00:02", name: "Wren", rssi: -70)
        let result = try await fake.birdctl("scan", "--timeout", "0.5", "--json")
        #expect(result.status == 0)
        let objects = try result.stdout.map(parseJSON)
        let found = objects.filter { $0["event"] as? String == "found" }
        #expect(Set(found.compactMap { $0["address"] as? String }) == [bird, "F0:0D:B1:7D:00:02"])
        let done = try #require(objects.last)
        #expect(done["event"] as? String == "done")
        let birds = try #require(done["birds"] as? [[String: Any]])
        // Strongest first.
        #expect(birds.compactMap { $0["name"] as? String } == ["Robin", "Wren"])
        #expect(birds.first?["rssi"] as? Int == -48)
    }

    @Test func aBirdWithoutANameIsShownWithoutOneNotWithBlueZsMadeUpAlias() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(name: "", birdName: "Gatty")  // BlueZ's Alias: F0-0D-B1-7D-00-01
        let result = try await fake.birdctl("scan", "--timeout", "0.5", "--json")
        let found = try #require(try result.stdout.map(parseJSON).first { $0["event"] as? String == "found" })
        #expect(found["name"] == nil, "\(found)")
        #expect(try await fake.birdctl("read", bird, "name").stdout == ["Gatty"])
    }

    /// A scan loads the adapters, not BlueZ's cache (GetManagedObjects grows
    /// with it): a cached bird heard again is found with its name, after one
    /// GetAll of it; a cached device heard again without the Bird Service is not.
    @Test func aScanLoadsNoCacheAndFindsACachedBirdHeardAgainWithItsName() async throws {
        let fake = try await FakeBlueZ()
        try await fake.call("AddCachedDevices", .uint32(2_000))
        try await fake.addBird(rssi: -48, cached: true)
        let thermometer = try await fake.addDevice(address: "11:22:33:44:55:66", name: "Thermometer", cached: true)
        let result = try await fake.birdctl("scan", "--timeout", "0.5", "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let found = try result.stdout.map(parseJSON).filter { $0["event"] as? String == "found" }
        #expect(found.count == 1, "\(result.stdout)")
        #expect(found.first?["address"] as? String == bird)
        #expect(found.first?["name"] as? String == "Robin")
        #expect(found.first?["rssi"] as? Int == -48)
        let calls = try await fake.calls()
        #expect(!calls.contains { $0.hasPrefix("GetManagedObjects") }, "\(calls.filter { !$0.hasPrefix("GetAll") })")
        #expect(calls.filter { $0.hasPrefix("GetAll \(birdPath) ") } == ["GetAll \(birdPath) org.bluez.Device1"])
        #expect(calls.contains("GetAll \(thermometer) org.bluez.Device1"))  // heard, asked, not a Bird
        #expect(calls.filter { $0.hasPrefix("GetAll") }.count < 10, "\(calls.filter { $0.hasPrefix("GetAll") })")
    }

    /// Another client's discovery heard the bird before the scan started:
    /// BlueZ does not announce it again, so the scan asks BlueZ for what it heard.
    @Test func aScanFindsABirdWhileAnotherClientIsDiscovering() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let other = try ClientUnderTest(fake)
        try await other.ready()
        try await other.perform(.startDiscovery(adapter: "/org/bluez/hci0"))
        try await other.next { if case .deviceChanged(let d, _) = $0 { d.rssi != nil } else { false } }
        let result = try await fake.birdctl("scan", "--timeout", "0.5")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.count == 1 && result.stdout[0].contains("Robin"), "\(result.stdout)")
    }

    /// `--forget-after`: a bird unheard that long is forgotten (it leaves the
    /// list), and when it is heard again it is reported again as found.
    @Test func aBirdUnheardForForgetAfterIsForgottenAndFoundAgain() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(rssi: -48)
        let scan = try fake.launch("scan", "--timeout", "0", "--json", "--forget-after", "0.2")
        _ = try await scan.line(containing: "\"found\"")
        // Heard again after a second of silence, each second until it is
        // found again (a loaded machine may run birdctl's timer late).
        let hearing = Task {
            for attempt in 0..<30 {
                try await Task.sleep(for: .seconds(1))
                try await fake.call("SetRSSI", .string(bird), .int16(attempt % 2 == 0 ? -60 : -48))
            }
        }
        defer { hearing.cancel() }
        let again = try await scan.nextLine(within: .seconds(40))
        let line = try parseJSON(try #require(again, "not found again; stderr: \(scan.stderr)"))
        #expect(line["event"] as? String == "found")
        #expect(line["address"] as? String == bird)
        scan.signal(SIGINT)
        let finished = try await scan.finish()
        #expect(finished.status == 0, "\(finished.stderr)")
    }

    @Test func nothingFoundExitsSix() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addDevice(address: "11:22:33:44:55:66", name: "Thermometer")
        let result = try await fake.birdctl("scan", "--timeout", "0.3")
        #expect(result.status == 6)
        #expect(result.stderr.contains("no Bird found"))
    }
}

@Suite("birdctl read")
struct ReadTests {
    @Test func printsTheThreeDecodedValues() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let result = try await fake.birdctl("read")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == ["name   Robin", "color  #FF8800", "alpha  0.8"])
        let calls = try await fake.calls()
        #expect(calls.contains("Disconnect \(birdPath)"))
    }

    /// By address, birdctl loads the adapters and that bird, not every
    /// device BlueZ remembers (GetManagedObjects grows with the cache).
    @Test func aReadByAddressLoadsThatBirdNotBlueZsWholeCache() async throws {
        let fake = try await FakeBlueZ()
        try await fake.call("AddCachedDevices", .uint32(2_000))
        try await fake.addBird(cached: true)
        let result = try await fake.birdctl("read", bird.lowercased())
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == ["name   Robin", "color  #FF8800", "alpha  0.8"])
        let calls = try await fake.calls()
        #expect(!calls.contains { $0.hasPrefix("GetManagedObjects") }, "\(calls)")
        #expect(calls.contains("Introspect \(birdPath)"))
        #expect(calls.filter { $0.hasPrefix("Introspect") }.count < 10, "\(calls)")
    }

    @Test func aSingleFieldPrintsBare() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(color: "ff8800")
        #expect(try await fake.birdctl("read", "color").stdout == ["#FF8800"])
        #expect(try await fake.birdctl("read", bird, "name").stdout == ["Robin"])
        #expect(try await fake.birdctl("read", "alpha", "--timeout", "5").stdout == ["0.8"])
    }

    @Test func jsonObject() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let result = try await fake.birdctl("read", "--json")
        #expect(result.status == 0)
        let object = try parseJSON(try #require(result.stdout.first))
        #expect(object["address"] as? String == bird)
        #expect(object["name"] as? String == "Robin")
        #expect(object["color"] as? String == "#FF8800")
        #expect(object["alpha"] as? Double == 0.8)
        #expect((object["raw"] as? [String: String])?["alpha"] == "3830")
    }

    @Test func aBadValueExitsEightAndShowsTheRawBytes() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(alpha: "101")
        let result = try await fake.birdctl("read")
        #expect(result.status == 8)
        #expect(result.stdout == ["name   Robin", "color  #FF8800"])
        #expect(result.stderr.contains("bad alpha value: 101 is above 100 (raw: 313031)"))

        let json = try await fake.birdctl("read", "--json")
        #expect(json.status == 8)
        let object = try parseJSON(try #require(json.stdout.first))
        #expect((object["errors"] as? [String: String])?["alpha"] == "101 is above 100")
        #expect((object["raw"] as? [String: String])?["alpha"] == "313031")
        #expect(object["alpha"] == nil)
    }

    @Test func findsABirdWhileAnotherClientIsDiscovering() async throws {
        // BlueZ does not announce a device again for a second discovery
        // client; birdctl takes the devices BlueZ heard recently (with an RSSI).
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let other = try ClientUnderTest(fake)
        try await other.ready()
        try await other.perform(.startDiscovery(adapter: "/org/bluez/hci0"))
        try await other.next { if case .deviceAdded = $0 { true } else { false } }
        let result = try await fake.birdctl("read", "name", "--timeout", "2")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == ["Robin"])
    }

    @Test func aCachedBirdAskedForByAddressIsConnectedWithoutDiscovery() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true)
        let result = try await fake.birdctl("read", bird, "name")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == ["Robin"])
        let calls = try await fake.calls()
        #expect(!calls.contains { $0.hasPrefix("StartDiscovery") }, "\(calls)")
        #expect(calls.contains("Connect \(birdPath)"))
    }

    @Test func aCachedBirdOutOfRangeIsLookedForAndNotFound() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(cached: true, visible: false)
        let result = try await fake.birdctl("read", bird, "name", "--timeout", "1")
        #expect(result.status == 6, "\(result.stderr)")
        let calls = try await fake.calls()
        // One direct attempt, then discovery: not retried as a heard bird would be.
        #expect(calls.filter { $0.hasPrefix("Connect") }.count == 1, "\(calls)")
        #expect(calls.contains("StartDiscovery /org/bluez/hci0"))
    }

    @Test func theAddressSelectsTheBird() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.addBird(address: "F0:0D:B1:7D:00:02", name: "Wren")
        #expect(try await fake.birdctl("read", "f0:0d:b1:7d:00:02", "name").stdout == ["Wren"])
    }

    @Test func withoutAnAddressTheNearestBirdHeardIsReadNotTheFirst() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(name: "Far", rssi: -80)  // announced first
        try await fake.addBird(address: "F0:0D:B1:7D:00:02", name: "Near", rssi: -45)
        let result = try await fake.birdctl("read", "name", "--verbose")
        #expect(result.stdout == ["Near"], "\(result.stderr)")
    }
}

