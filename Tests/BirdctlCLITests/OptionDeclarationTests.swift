import Bird
import MQTT
import Testing

@testable import BirdctlCLI

/// One declaration per option drives the parser, `--help`, the man page and
/// the completions; the defaults are the Bird layer's (and MQTT's).
@Suite("Options declared once")
struct OptionDeclarationTests {
    static func command(_ name: String) -> Command { Birdctl.commands.first { $0.name == name }! }
    static func parse(_ command: String, _ arguments: String...) throws(UsageError) -> Arguments {
        try Arguments(arguments, accepting: Self.command(command).options)
    }
    static var allOptions: [(command: Command, option: Option)] {
        Birdctl.commands.flatMap { command in command.options.map { (command, $0) } }
    }

    @Test func eachDefaultAppearsInHelpAndTheManualFromTheDeclaration() {
        let page = ManualPage.render()
        var defaults = 0
        for (command, option) in Self.allOptions {
            guard let note = option.defaultNote else { continue }
            defaults += 1
            #expect(command.usage.contains(option.help), "\(command.name) \(option.name)")
            #expect(option.help.hasSuffix("(\(note))"), "\(option.name)")
            #expect(page.contains(Roff.escaped(option.help)), "\(command.name) \(option.name)")
        }
        #expect(defaults > 10)
    }

    /// The figures shown are the ones the machines get without the option.
    @Test func theDefaultsShownAreTheBirdLayersAndMQTTs() {
        let bird = BirdCentral.Configuration(mode: .read)
        let seconds = { (duration: Duration?) in Option.secondsText(duration!) }
        let read = Self.command("read").usage
        #expect(read.contains("seconds to look for a Bird (default \(seconds(bird.scanTimeout)) s; 0 = no limit)"))
        #expect(read.contains("deadline to connect, retries included (default \(seconds(bird.connectTimeout)) s)"))
        #expect(read.contains("(default \(seconds(bird.pairTimeout)) s)"))
        let watch = Self.command("watch").usage
        #expect(watch.contains("seconds to look for a Bird at first (default: no limit)"))
        #expect(watch.contains("again (default \(seconds(BirdFleet.defaultForgetAfter)) s)"))
        #expect(watch.contains("(default \(bird.notifyMethod.rawValue))"))
        #expect(watch.contains("(default \(MQTTSettings.defaultBufferCapacity))"))
        #expect(watch.contains("(default \(MQTTSettings.defaultBufferByteCapacity >> 20) MiB)"))
        #expect(Self.command("scan").usage.contains("seconds to scan (default \(seconds(bird.scanTimeout)) s; 0 = until Ctrl-C)"))
        #expect(Self.command("scan").usage.contains("(default \(seconds(ScanDriver.defaultForgetAfter)) s)"))
    }

    /// Without options, a command configures the machine exactly as the Bird layer's defaults do.
    @Test func noOptionsIsTheBirdLayersConfiguration() throws {
        for name in ["read", "set", "pair", "unpair"] {
            let common = try CommonOptions(Self.parse(name))
            #expect(common.configuration(.read, fields: BirdField.allCases, address: nil) == BirdCentral.Configuration(mode: .read), "\(name)")
        }
        let watch = try CommonOptions(Self.parse("watch"))
        var expected = BirdCentral.Configuration(mode: .read)
        expected.scanTimeout = nil  // watch looks until found
        #expect(watch.configuration(.read, fields: BirdField.allCases, address: nil) == expected)
        #expect(watch.forgetAfter == BirdFleet.defaultForgetAfter)
        let buffer = try #require(try GatewayOptions(Self.parse("watch", "--mqtt", "mqtt://h"), environment: [:]))
        let settings = MQTTSettings(host: "h", port: 1883, clientID: "x")
        #expect(buffer.configuration.settings.bufferCapacity == settings.bufferCapacity)
        #expect(buffer.configuration.settings.bufferByteCapacity == settings.bufferByteCapacity)
    }

    /// What help says is the default is what the parser makes of it, given.
    @Test func eachDefaultShownParsesToTheDefault() throws {
        for (command, option) in Self.allOptions {
            let given: String
            switch option.kind {
            case .seconds(let value?, _, _): given = Option.secondsText(value)
            case .integer(_, _, let value?, _): given = "\(value)"
            case .choice(_, let value), .birdValue(_, let value): given = value
            default: continue
            }
            #expect(option.kind.defaultValue != nil, "\(option.name)")
            #expect(try option.kind.value(of: given, for: option.name) == option.kind.defaultValue, "\(command.name) \(option.name)")
        }
    }

    /// A command reads the default it declared, whoever asks by name.
    @Test func eachCommandsOwnDefault() throws {
        #expect(try Self.parse("watch").seconds(.timeout) == nil)
        #expect(try Self.parse("read").seconds(.timeout) == BirdCentral.Configuration(mode: .read).scanTimeout)
        #expect(try Self.parse("scan", "--timeout", "0").seconds(.timeout) == nil)
        #expect(try Self.parse("watch", "--timeout", "2").seconds(.timeout) == .seconds(2))
        #expect(try Self.parse("serve").birdValue(.name) == .name("Robin"))
        #expect(try Self.parse("serve", "--alpha", "55").birdValue(.alpha) == .alpha(percent: 55))
    }

    @Test func choicesComeFromTheEnumAndReachCompletionsHelpAndTheManual() throws {
        let names = NotifyMethod.allCases.map(\.rawValue)
        let watch = Self.command("watch")
        #expect(Option.notifyMethod.value == names.joined(separator: "|"))
        #expect(watch.usage.contains("--notify-method \(names.joined(separator: "|"))  "))
        for name in names {
            #expect(watch.usage.contains("; \(name): ") || watch.usage.contains(". \(name): "), "\(name)")
            #expect(try Self.parse("watch", "--notify-method", name).choice(.notifyMethod, as: NotifyMethod.self).rawValue == name)
        }
        let words = names.joined(separator: " ")
        #expect(Completions.bash().contains("--notify-method) COMPREPLY=($(compgen -W \"\(words)\" -- \"$cur\")); return ;;"))
        #expect(Completions.zsh().contains(":\(names.joined(separator: "|")):(\(words))'"))
        #expect(Completions.fish().contains("-l notify-method -r -f -a '\(words)'"))
        #expect(ManualPage.render().contains(Roff.escaped(names.joined(separator: "|"))))
        do {
            _ = try Self.parse("watch", "--notify-method", "sometimes")
            Issue.record("a value that is no choice was taken")
        } catch {
            #expect(error.message == "--notify-method expects auto, acquire or start, got 'sometimes'")
        }
    }

    /// A default written by hand in prose drifts (scan's said 300 s while it was 600).
    @Test func noDefaultIsWrittenByHand() {
        for (command, option) in Self.allOptions {
            #expect(!option.summary.contains("default"), "\(command.name) \(option.name)")
        }
        for command in Birdctl.commands {
            let words = command.details.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "(" })
            for (word, next) in zip(words, words.dropFirst()) where word == "default" || word == "than" {
                #expect(!(next.first?.isNumber ?? false), "\(command.name): '\(word) \(next)'")
            }
        }
    }

    /// The fields' operands are spelled out (for start-up); they must be the fields.
    @Test func theFieldOperandsAreTheFields() {
        let fields = BirdField.allCases.map(\.rawValue)
        #expect(Arguments.addressAndFieldsOperands == "[ADDRESS] [\(fields.joined(separator: "|")) ...]")
        #expect(Completions.fields == fields.joined(separator: " "))
        #expect(Self.command("read").operands == Arguments.addressAndFieldsOperands)
        #expect(Self.command("watch").operands == Arguments.addressAndFieldsOperands)
    }

    @Test func helpWinsOverABadValue() throws {
        #expect(try Self.parse("read", "--timeout", "soon", "--help").has(.help))
        #expect(throws: UsageError.self) { try Self.parse("read", "--timeout", "soon") }
    }

    /// One name, one kind: the parser, help and completions treat a name alike in every command.
    @Test func oneKindPerName() {
        var labels: [String: String] = [:]
        for (command, option) in Self.allOptions {
            let label = option.value ?? "flag"
            #expect(labels[option.name, default: label] == label, "\(command.name) \(option.name)")
            labels[option.name] = label
        }
    }
}
