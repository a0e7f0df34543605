import Bird
import DBus
import Gateway
import MQTT
import Testing

@testable import BirdctlCLI

@Suite("MQTT gateway options")
struct GatewayOptionsTests {
    @Test(arguments: [
        ("mqtt://broker", GatewayOptions.Target(secure: false, host: "broker", port: 1883, prefix: nil)),
        ("mqtts://broker.lan:9883/home/birds", GatewayOptions.Target(secure: true, host: "broker.lan", port: 9883, prefix: "home/birds")),
        ("mqtt://[::1]:1884/x", GatewayOptions.Target(secure: false, host: "::1", port: 1884, prefix: "x")),
        ("mqtt://10.0.0.2/", nil),
        ("mqtt://h:0", nil),
        ("mqtt://h:99999", nil),
        ("mqtt://:1883", nil),
        ("mqtt://h/a//b", nil),
        ("mqtt://h/a/", nil),
        ("mqtt://h/a/+/b", nil),
        ("tcp://h", nil),
        ("mqtt://u:p@h", nil),
        ("mqtt://user:1883/secret@host", nil),  // a password with a '/' in it
        ("mqtt://h/$SYS/birds", nil),
        ("mqtt://h/$share/x", nil),
        ("mqtt://h/a$b", GatewayOptions.Target(secure: false, host: "h", port: 1883, prefix: "a$b")),
    ])
    func urls(_ url: String, _ expected: GatewayOptions.Target?) {
        let parsed = try? GatewayOptions.parse(url)
        #expect(parsed == expected, "\(url)")
    }

    @Test func credentialsFromTheEnvironmentNeedAUsername() throws {
        let (user, password) = try GatewayOptions.credentials(nil, ["BIRDCTL_MQTT_USERNAME": "u", "BIRDCTL_MQTT_PASSWORD": "p"])
        #expect(user == "u" && password == "p")
        #expect(throws: UsageError.self) { try GatewayOptions.credentials(nil, ["BIRDCTL_MQTT_PASSWORD": "p"]) }
        let (none, nothing) = try GatewayOptions.credentials(nil, [:])
        #expect(none == nil && nothing == nil)
    }

    @Test(arguments: [
        "mqtt://user:1883/s3cret@host", "http://user:s3cret@host", "s3cret", "foo://s3cret/x", "mqtt://h:s3cret",
        "mqtt://[::1:s3cret", "mqtt://[::1]s3cret", "mqtts://u:s3cret@[::1]:8883/p", "mqtt://user@s3cret:1883/x",
    ])
    func noErrorEchoesAPassword(_ url: String) {
        do {
            _ = try GatewayOptions.parse(url)
            Issue.record("\(url) was accepted")
        } catch {
            #expect(!error.message.contains("s3cret"), "\(error.message)")
        }
    }

    @Test(arguments: [
        ("mqtt://broker.lan", true), ("mqtt://10.0.0.2:1883/x", true),
        ("mqtt://127.0.0.1", false), ("mqtt://localhost", false), ("mqtt://[::1]", false),
    ])
    func aPasswordInPlainTextToAnotherHostIsWarnedOf(_ url: String, _ warned: Bool) throws {
        let arguments = try Arguments(["--mqtt", url], accepting: WatchCommand.command.options)
        let withPassword = try #require(try GatewayOptions(
            arguments, environment: ["BIRDCTL_MQTT_USERNAME": "u", "BIRDCTL_MQTT_PASSWORD": "p"]))
        #expect(withPassword.warnings.contains { $0.contains("plain text") } == warned, "\(withPassword.warnings)")
        #expect(withPassword.warnings.allSatisfy { !$0.contains("p)") })
        let anonymous = try #require(try GatewayOptions(arguments, environment: [:]))
        #expect(anonymous.warnings.isEmpty)
    }

    @Test func theBufferIsBoundedInMessagesAndBytes() throws {
        let parse = { (extra: [String]) in
            try GatewayOptions(try Arguments(["--mqtt", "mqtt://h"] + extra, accepting: WatchCommand.command.options), environment: [:])
        }
        let defaults = try #require(try parse([]))
        #expect(defaults.configuration.settings.bufferCapacity == 50_000 && defaults.configuration.settings.bufferByteCapacity == 16 << 20)
        let set = try #require(try parse(["--mqtt-buffer", "10", "--mqtt-buffer-bytes", "65536"]))
        #expect(set.configuration.settings.bufferCapacity == 10 && set.configuration.settings.bufferByteCapacity == 65536)
        #expect(throws: UsageError.self) { try parse(["--mqtt-buffer-bytes", "100"]) }
        #expect(throws: UsageError.self) {
            try GatewayOptions(try Arguments(["--mqtt-buffer-bytes", "65536"], accepting: WatchCommand.command.options), environment: [:])
        }
    }


    @Test func noWarningOverTLS() throws {
        let arguments = try Arguments(["--mqtt", "mqtts://broker.lan", "--mqtt-ca", "/etc/hostname"], accepting: WatchCommand.command.options)
        let options = try #require(try GatewayOptions(arguments, environment: ["BIRDCTL_MQTT_USERNAME": "u", "BIRDCTL_MQTT_PASSWORD": "p"]))
        #expect(options.warnings.isEmpty, "\(options.warnings)")
    }

    @Test(arguments: [
        (BirdctlCLI.ExitStatus.success, MQTTGateway.Outcome.delivered, BirdctlCLI.ExitStatus.success), (.success, .undelivered, .mqttFailed),
        (.interrupted, .undelivered, .mqttFailed), (.interrupted, .delivered, .interrupted), (.connectionFailed, .undelivered, .connectionFailed),
        (.connectionFailed, .failed, .mqttFailed), (.success, .failed, .mqttFailed),
    ])
    func readingsTheBrokerNeverGotFailTheRunUnlessBluetoothFailedFirst(
        _ status: BirdctlCLI.ExitStatus, _ gateway: MQTTGateway.Outcome, _ exit: BirdctlCLI.ExitStatus
    ) {
        #expect(BirdctlCLI.ExitStatus(status, gateway: gateway) == exit)
    }
}
