import Bird
import Formats
import Gateway
import MQTT

/// `birdctl retire`: clears what a gateway left on its broker — all of it,
/// or only some birds' — so that nothing retained outlives the truth and
/// Home Assistant drops the devices and entities. A command of its own, not
/// a flag of `watch`: it is a one-shot that needs no Bluetooth and no bus,
/// and a gateway that is running would publish it all again.
enum RetireCommand {
    static let command = Command(
        name: "retire", summary: "clear a gateway's (or some birds') retained MQTT topics and Home Assistant discovery",
        operands: "[ADDRESS ...]",
        details: """
            Given the --mqtt URL of a gateway (the broker and the PREFIX its
            watch --mqtt uses, with the same credentials and TLS options), clears
            what it left retained on the broker with empty retained messages:
            without ADDRESS, everything under PREFIX (the gateway's status, every
            bird's values, state and status) and its Home Assistant discovery
            configs, so that Home Assistant removes its devices and entities; with
            ADDRESSes, only those birds'. Prints each topic it cleared. Refused
            (exit 2) while the gateway is online (PREFIX/status): stop it first, or
            it would publish its status and discovery again. Needs no Bluetooth.
            """,
        options: [.retireMQTT, .mqttCredentials, .mqttCA, .mqttCertificate, .mqttKey, .help],
        run: run)

    /// How long each step (reading what is retained, clearing it) may take.
    static let deadline: Duration = .seconds(10)

    static func run(_ arguments: Arguments) throws(UsageError) -> ExitStatus {
        var birds: Set<BluetoothAddress> = []
        for word in arguments.positionals {
            guard let address = BluetoothAddress(word) else { throw UsageError("expected Bird addresses (AA:BB:CC:DD:EE:FF), got '\(word)'") }
            birds.insert(address)
        }
        guard let options = try GatewayOptions(arguments, environment: WatchCommand.gatewayEnvironment()) else {
            throw UsageError("retire needs --mqtt URL: the broker and the PREFIX of the gateway")
        }
        for warning in options.warnings { Diagnostics.say("warning: " + warning) }
        let prefix = options.configuration.prefix
        do throws(MQTTError) {
            switch try GatewayRetirement.retire(options.configuration, birds: birds.isEmpty ? nil : birds, deadline: deadline) {
            case .online(let statusTopic):
                Diagnostics.error("the gateway \(prefix) is online (\(statusTopic)): stop it first, or it publishes it all again")
                return .usage
            case .cleared(let topics):
                for topic in topics { Birdctl.printOut(SafeText.escaped(topic)) }
                let what = birds.isEmpty ? "the gateway \(prefix)" : "\(birds.count) bird(s) of \(prefix)"
                Diagnostics.say("cleared \(topics.count) retained topic(s) of \(what)")
                return .success
            }
        } catch {
            Diagnostics.error(error.description)
            return .mqttFailed
        }
    }
}
