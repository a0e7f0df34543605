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
        var birds: Set<String> = []
        for word in arguments.positionals {
            guard Arguments.isAddress(word) else { throw UsageError("expected Bird addresses (AA:BB:CC:DD:EE:FF), got '\(word)'") }
            birds.insert(word.uppercased())
        }
        guard let options = try GatewayOptions(arguments, environment: WatchCommand.gatewayEnvironment()) else {
            throw UsageError("retire needs --mqtt URL: the broker and the PREFIX of the gateway")
        }
        for warning in options.warnings { Diagnostics.say("warning: " + warning) }
        let messages = GatewayMessages(prefix: options.prefix)
        var settings = options.settings
        // Never the gateway's own id (the broker would disconnect a running
        // gateway); a gateway id never holds a '/'.
        settings.clientID += "/retire"
        // A gateway of a fleet (prefix ROOT/ROOM) leaves its heard reports and
        // claims under ROOT/fleet: ours to clear too (docs/fleet.md).
        let fleet = options.prefix.lastIndex(of: "/").map {
            FleetTopics(root: String(options.prefix[..<$0]), room: String(options.prefix[options.prefix.index(after: $0)...]))
        }
        do throws(MQTTError) {
            let session = try MQTTRetainedSession(
                settings,
                filters: [options.prefix + "/#", messages.gatewayDiscoveryTopic] + GatewayMessages.birdDiscoveryFilters
                    + (fleet?.filters.dropFirst() ?? []),
                probeTopic: options.prefix + "/retire")
            let retained = try session.readRetained(deadline: deadline)
            if retained.contains(where: { $0.topic == messages.statusTopic && $0.payload.elementsEqual("online".utf8) }) {
                Diagnostics.error("the gateway \(options.prefix) is online (\(messages.statusTopic)): stop it first, or it publishes it all again")
                return .usage
            }
            let topics = messages.topicsToClear(retained.map(\.topic), onlyBirds: birds.isEmpty ? nil : birds)
                + (fleet.map { $0.leftBy(retained, onlyBirds: birds.isEmpty ? nil : birds) } ?? [])
            try session.publishAndClose(topics.map(GatewayMessages.clearing), deadline: deadline)
            for topic in topics { Birdctl.printOut(SafeText.escaped(topic)) }
            let what = birds.isEmpty ? "the gateway \(options.prefix)" : "\(birds.count) bird(s) of \(options.prefix)"
            Diagnostics.say("cleared \(topics.count) retained topic(s) of \(what)")
            return .success
        } catch {
            Diagnostics.error(error.description)
            return .mqttFailed
        }
    }
}
