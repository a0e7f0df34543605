import FakeBlueZSupport
import MosquittoSupport
import Foundation
import Testing

/// Writes from MQTT: `PREFIX/ADDRESS/FIELD/set` (docs/mqtt.md, "Writes").
@Suite("Writes from MQTT")
struct MQTTWriteTests {
    @Test func aWriteLandsOnceWithItsResultAndABadValueIsRefusedWithTheReason() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let watch = try fake.launch("watch", "--json", "--mqtt", broker.url(prefix: "w"))
        _ = try await watch.line(containing: "\"reading\"")
        let results = try await broker.subscribe(["w/\(bird)/+/result"])
        try await broker.publish("w/\(bird)/alpha/set", "33")
        let done = try await results.messages(until: { !$0.isEmpty })
        #expect(done.first?.topic == "w/\(bird)/alpha/result")
        let result = try parseJSON(try #require(done.first?.payload))
        #expect(result["ok"] as? Bool == true && result["value"] as? Double == 0.33, "\(result)")
        #expect(try await fake.calls().filter { $0.hasPrefix("WriteValue ") }.count == 1)
        // The bird notifies the new value: the gateway streams it like any other.
        _ = try await watch.line(containing: "0.33")

        try await broker.publish("w/\(bird)/color/set", "purple")
        let refused = try await results.messages(until: { !$0.isEmpty })
        let reason = try parseJSON(try #require(refused.first?.payload))
        #expect(reason["ok"] as? Bool == false)
        #expect((reason["message"] as? String)?.contains("not a hex colour") == true, "\(reason)")
        #expect(try await fake.calls().filter { $0.hasPrefix("WriteValue ") }.count == 1)
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func aWriteForABirdAwayFailsAfterItsTimeToLive() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(visible: false)
        let broker = try await MosquittoBroker()
        let watch = try fake.launch("watch", "--all", "--json", "--mqtt", broker.url(prefix: "w"), "--mqtt-write-ttl", "1")
        #expect(await watch.stderr(contains: "connected to the MQTT broker"))
        let results = try await broker.subscribe(["w/\(bird)/+/result"])
        try await broker.publish("w/\(bird)/name/set", "Wren")
        let failed = try await results.messages(until: { !$0.isEmpty })
        let result = try parseJSON(try #require(failed.first?.payload))
        #expect(result["message"] as? String == "the bird was not connected in time", "\(result)")
        #expect(try await fake.calls().filter { $0.hasPrefix("WriteValue ") }.isEmpty)
        watch.signal(SIGTERM)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func homeAssistantGetsAControlPerField() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let broker = try await MosquittoBroker()
        let finished = try await fake.birdctl("watch", "alpha", "--count", "1", "--quiet", "--mqtt", broker.url(prefix: "w"))
        #expect(finished.status == 0, "\(finished.stderr)")
        let number = try parseJSON(try #require(try await broker.retained("homeassistant/number/#").values.first))
        #expect(number["command_topic"] as? String == "w/\(bird)/alpha/set")
        #expect(number["unit_of_measurement"] as? String == "%" && number["max"] as? Int == 100)
        let texts = try await broker.retained("homeassistant/text/#")
        #expect(Set(texts.values.compactMap { try? parseJSON($0)["command_topic"] as? String })
            == ["w/\(bird)/name/set", "w/\(bird)/color/set"])
    }
}
