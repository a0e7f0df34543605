/// birdctl(1), in roff, from the same declarations as the parser and `--help`
/// (`birdctl --generate-manual`; `make install` writes it).
enum ManualPage {
    static func render() -> String {
        var page = Roff()
        page.line(".TH BIRDCTL 1 \(Roff.quoted(Version.date)) \(Roff.quoted("birdctl \(Version.number)")) \"User Commands\"")
        page.section("NAME")
        page.line("birdctl \\- a Bluetooth Low Energy central for Bird peripherals, over BlueZ")
        page.section("SYNOPSIS")
        for command in Birdctl.commands {
            page.line(".B birdctl \(command.name)")
            if !command.operands.isEmpty { page.text(command.operands) }
            page.line(".RI [ options ]")
            page.line(".br")
        }
        page.section("DESCRIPTION")
        page.paragraph(description)
        page.section("COMMANDS")
        for command in Birdctl.commands {
            page.line(".SS \(Roff.quoted("birdctl \(command.name) \(command.operands)".trimmingSpaces))")
            page.paragraph(command.details)
            for option in command.options {
                page.line(".TP")
                if let value = option.value {
                    page.line(".BI \(Roff.escaped(option.name)) \" \(Roff.escaped(value))\"")
                } else {
                    page.line(".B \(Roff.escaped(option.name))")
                }
                page.text(option.help)
            }
        }
        page.section("EXIT STATUS")
        for status in ExitStatus.allCases {
            page.line(".TP")
            page.line(".B \(status.rawValue)")
            page.text(status.meaning)
        }
        page.section("ENVIRONMENT")
        for (name, meaning) in environment {
            page.line(".TP")
            page.line(".B \(name)")
            page.text(meaning)
        }
        page.section("EXAMPLES")
        for (what, command) in examples {
            page.paragraph(what)
            page.line(".PP")
            page.line(".RS 4")
            page.line(".nf")
            page.text(command)
            page.line(".fi")
            page.line(".RE")
        }
        page.section("SEE ALSO")
        page.line(".BR bluetoothctl (1),")
        page.line(".BR btmon (1),")
        page.line(".BR bluetoothd (8)")
        return page.output
    }

    static let description = """
        birdctl drives bluetoothd over D-Bus. It finds peripherals that expose the Bird \
        Service, connects, reads and subscribes to their name, color and alpha \
        characteristics, and prints typed, decoded readings: text for people on a \
        terminal, JSON Lines (--json) for programs. Data goes to stdout, diagnostics \
        to stderr; colour only on a terminal. Everything a peer says (names, values, \
        errors) is printed with control characters, bidi overrides and other invisible \
        format characters escaped, and a backslash of its own doubled (\\\\). birdctl \
        needs the same permissions as bluetoothctl: root, or a user the D-Bus policy \
        lets talk to bluetoothd (the bluetooth group on Debian).
        """

    static let environment: [(String, String)] = [
        ("NO_COLOR", "if set, never colour the output (colour is used only on a terminal anyway)."),
        ("BIRDCTL_CALL_TIMEOUT", "seconds to wait for bluetoothd to answer one call (default 25); a call that times out is exit 9."),
        ("DBUS_SYSTEM_BUS_ADDRESS", "the system bus to use instead of the default socket."),
    ]

    static let examples: [(String, String)] = [
        ("List the Birds in range for five seconds:", "birdctl scan --timeout 5"),
        ("Read one value into a shell variable:", "color=$(birdctl read F0:0D:B1:7D:00:01 color)"),
        ("Stream alpha as JSON Lines and keep the values:", "birdctl watch alpha --json | jq -r .value"),
        ("Follow every Bird in range, stopping after 100 readings:", "birdctl watch --all --count 100"),
        ("Write a value (checked before any radio work):", "birdctl set alpha 55"),
        ("Be a Bird on a second adapter, animated:", "birdctl serve --adapter hci1 --name Finch --animate"),
    ]
}

/// roff output, a line at a time.
struct Roff {
    private(set) var output = ""

    mutating func line(_ raw: String) { output += raw + "\n" }
    mutating func section(_ name: String) { line(".SH \(name)") }
    /// Text lines, escaped (a line may not start with a control character).
    mutating func text(_ text: String) {
        for part in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let escaped = Roff.escaped(String(part))
            line(escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" + escaped : escaped)
        }
    }
    /// A paragraph: the lines of a help text joined, so roff fills them.
    mutating func paragraph(_ text: String) {
        line(".PP")
        self.text(text.split(separator: "\n").joined(separator: " "))
    }

    static func escaped(_ text: String) -> String {
        text.replacingAll("\\", with: "\\e").replacingAll("-", with: "\\-")
    }

    static func quoted(_ text: String) -> String { "\"" + escaped(text).replacingAll("\"", with: "\\(dq") + "\"" }
}

extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var out = ""
        for character in self { if character == target { out += replacement } else { out.append(character) } }
        return out
    }

    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
