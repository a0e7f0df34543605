import Bird
import Foundation
import Testing

@testable import BirdctlCLI

@Suite("Parsing the command line")
struct ArgumentsTests {
    static func parse(_ command: String, _ arguments: String...) throws(UsageError) -> Arguments {
        try Arguments(arguments, accepting: Birdctl.commands.first { $0.name == command }!.options)
    }

    @Test func optionsFlagsAndOperands() throws {
        let parsed = try Self.parse("watch", "F0:0D:B1:7D:00:01", "alpha", "--count=3", "--duration", "2.5", "--json", "-h")
        #expect(parsed.value(.count) == "3")
        #expect(parsed.integer(.count) == 3)
        #expect(parsed.seconds(.duration) == .milliseconds(2500))
        #expect(parsed.has(.json) && parsed.has(.help) && !parsed.has(.all))
        let (address, fields) = try parsed.addressAndFields()
        #expect(address == "F0:0D:B1:7D:00:01" && fields == [.alpha])
    }

    @Test func negativeNumbersAndDoubleDashAreOperands() throws {
        let parsed = try Self.parse("set", "--min-rssi", "-70", "--", "name", "--weird--")
        #expect(parsed.integer(.minimumRSSI) == -70)
        #expect(parsed.positionals == ["name", "--weird--"])
    }

    @Test(arguments: [
        (["--bogus"], "unknown option --bogus"),
        (["--json"], "unknown option --json"),  // set prints nothing, so it has no --json
        (["--timeout"], "--timeout needs a value"),
        (["--verbose=yes"], "--verbose takes no value"),
    ])
    func mistakesSayWhat(_ arguments: [String], _ message: String) {
        #expect(throws: UsageError.self) { try Arguments(arguments, accepting: SetCommand.command.options) }
        do {
            _ = try Arguments(arguments, accepting: SetCommand.command.options)
        } catch {
            #expect(error.message == message)
        }
    }

    @Test func valuesAreChecked() throws {
        #expect(throws: UsageError.self) { try Self.parse("scan", "--timeout", "soon") }
        #expect(throws: UsageError.self) { try Self.parse("watch", "--count", "0") }
        #expect(throws: UsageError.self) { try CommonOptions(Self.parse("read", "--adapter", "wlan0")) }
        // Digits other than ASCII ones are not BlueZ's: the gateway puts the name into topics.
        #expect(throws: UsageError.self) { try CommonOptions(Self.parse("read", "--adapter", "hci\u{0663}")) }
        #expect(try CommonOptions(Self.parse("read", "--adapter", "hci12")).adapter == "hci12")
        #expect(try Self.parse("scan", "--timeout", "0").seconds(.timeout) == nil)
        #expect(throws: UsageError.self) { try Self.parse("read", "alpha", "F0:0D:B1:7D:00:01").addressAndFields() }
    }

    /// `--forget-after S`: default 600 s; forgetting what was just heard is refused.
    @Test func forgetAfter() throws {
        #expect(try CommonOptions(Self.parse("scan")).forgetAfter == .seconds(600))
        #expect(try CommonOptions(Self.parse("scan", "--forget-after", "1.5")).forgetAfter == .milliseconds(1500))
        #expect(throws: UsageError.self) { try CommonOptions(Self.parse("scan", "--forget-after", "0")) }
        #expect(throws: UsageError.self) { try CommonOptions(Self.parse("scan", "--forget-after", "soon")) }
    }
}

@Suite("Every option declared once")
struct DeclarationTests {
    @Test func noCommandDeclaresAnOptionTwice() {
        for command in Birdctl.commands {
            #expect(Set(command.options.map(\.name)).count == command.options.count, "\(command.name)")
            #expect(command.options.contains(.help), "\(command.name)")
        }
    }

    @Test func helpListsEveryOptionOfTheCommand() {
        for command in Birdctl.commands {
            let usage = command.usage
            #expect(usage.hasPrefix("usage: birdctl \(command.name)"))
            for option in command.options { #expect(usage.contains("  \(Command.label(option))  "), "\(command.name) \(option.name)") }
        }
    }

    @Test func theManualHasEveryCommandOptionAndExitCode() {
        let page = ManualPage.render()
        for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "EXAMPLES", "SEE ALSO"] {
            #expect(page.contains(".SH \(section)\n"), "\(section)")
        }
        for command in Birdctl.commands {
            #expect(page.contains(".SS \"birdctl \(command.name)"))
            for option in command.options { #expect(page.contains(Roff.escaped(option.name)), "\(option.name)") }
        }
        for status in ExitStatus.allCases { #expect(page.contains(".B \(status.rawValue)\n")) }
        #expect(page.contains(".BR bluetoothctl (1),") && page.contains(".BR btmon (1),"))
    }

    @Test func completionsOfferEveryCommandAndOption() {
        for shell in Completions.Shell.allCases {
            let script = Completions.script(for: shell)
            for command in Birdctl.commands {
                #expect(script.contains(command.name), "\(shell) \(command.name)")
                for option in command.options {
                    let spelled = shell == .fish ? "-l \(option.name.dropFirst(2))" : option.name
                    #expect(script.contains(spelled), "\(shell) \(command.name) \(option.name)")
                }
            }
        }
    }

    @Test func theTopLevelHelpListsCommandsAndExitCodes() {
        for command in Birdctl.commands { #expect(Birdctl.usage.contains("  \(command.name) ")) }
        for status in ExitStatus.allCases { #expect(Birdctl.usage.contains("  \(status.rawValue) ")) }
    }

    /// The user guide's exit-code table is documentation; `--help` and the
    /// man page come from `ExitStatus`. This keeps the two from drifting apart.
    @Test func theUserGuideDocumentsEveryExitCode() throws {
        let guide = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/guide.md")
        let text = try String(contentsOf: guide, encoding: .utf8)
        // The section from its heading to the next one: a code must be a row of that table.
        let start = try #require(text.range(of: "\n## Exit codes\n"))
        let end = text.range(of: "\n## ", range: start.upperBound..<text.endIndex)?.lowerBound ?? text.endIndex
        let table = text[start.upperBound..<end]
        for status in ExitStatus.allCases {
            #expect(table.contains("\n| \(status.rawValue) | "), "docs/guide.md's exit codes lack \(status.rawValue)")
        }
    }

    @Test func theVersionSaysWhichBuild() {
        #expect(Version.text.hasPrefix("birdctl \(Version.number) ("))
    }
}
