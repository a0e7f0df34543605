import Bird
import FakeBlueZSupport
import Gateway
import MosquittoSupport
import DBus
import Foundation
import MQTT
import Testing

@testable import BirdctlCLI

/// The gateway in this process, fed reports on a real event loop, against a
/// real mosquitto: what forgetting a bird leaves on the broker.
@Suite("MQTT gateway: forgetting a bird")
struct GatewayForgetTests {
    static let robin = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01", address: BluetoothAddress(bird)!, name: "Robin")
    static let wren = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_02", address: "F0:0D:B1:7D:00:02", name: "Wren")

    @Test func aForgottenBirdLeavesNothingRetainedAndOthersStay() async throws {
        let broker = try await MosquittoBroker()
        let bus = try await PrivateBus.started()
        let connection = try bus.connect()
        let arguments = try Arguments(["--mqtt", broker.url(prefix: "gw")], accepting: WatchCommand.command.options)
        let gateway = MQTTGateway(try #require(try GatewayOptions(arguments, environment: [:])).configuration, loop: connection.loop)
        try await connection.loop.runAndWait {
            gateway.start()
            for bird in [Self.robin, Self.wren] {
                gateway.handle(.connected(bird))
                gateway.handle(.reading(bird, .alpha(percent: 80), raw: Array("80".utf8), notified: false))
                gateway.handle(.disconnected(bird))
            }
        }
        let subscriber = try await broker.subscribe(["gw/+/status", "homeassistant/sensor/+/config"])
        _ = try await subscriber.messages(until: { messages in
            Set(messages.filter { $0.payload == "offline" }.map(\.topic)) == ["gw/\(bird)/status", "gw/F0:0D:B1:7D:00:02/status"]
        })
        let before = try await broker.retained("#")
        #expect(before["gw/\(bird)/alpha"] == "0.8" && before["homeassistant/sensor/birdctl_gw_F00DB17D0001_alpha/config"] != nil)

        try await connection.loop.runAndWait { gateway.forget(address: BluetoothAddress(bird)!) }
        // The last of what it clears (mosquitto_sub shows an empty payload as "(null)").
        _ = try await subscriber.messages(until: {
            $0.topic == "homeassistant/sensor/birdctl_gw_F00DB17D0001_alpha/config" && $0.payload == "(null)"
        })
        // A reconnect re-sends the sticky messages (status, discovery): not the forgotten bird's.
        await broker.stop()
        try await broker.start()
        // The exit waits until the broker has taken everything.
        let delivered = await withCheckedContinuation { continuation in
            connection.loop.execute { gateway.close { continuation.resume(returning: $0) } }
        }
        #expect(delivered)
        let after = try await broker.retained("#")
        #expect(after.keys.filter { $0.contains(bird) || $0.contains("F00DB17D0001") }.isEmpty, "\(after.keys.sorted())")
        #expect(after["gw/F0:0D:B1:7D:00:02/alpha"] == "0.8" && after["gw/F0:0D:B1:7D:00:02/status"] == "offline")
        #expect(after["homeassistant/sensor/birdctl_gw_F00DB17D0002_alpha/config"] != nil)
        #expect(after["gw/status"] == "offline" && after["homeassistant/binary_sensor/birdctl_gw/config"] != nil)
    }
}
