/// A subcommand, declared once: its name, what it does, its operands and its
/// options — for the parser, `--help`, the man page and the completions — and
/// how it runs.
struct Command: Sendable {
    let name: String
    /// One line, for the list of commands.
    let summary: String
    /// What follows the command besides options: `[ADDRESS] [name|color|alpha ...]`.
    let operands: String
    /// What `--help` and the man page say about it.
    let details: String
    let options: [Option]
    let run: @Sendable (Arguments) throws(UsageError) -> ExitStatus

    /// `birdctl read [ADDRESS] [name|color|alpha ...] [options]`
    var synopsis: String {
        ["birdctl", name, operands, "[options]"].filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// `--help`: the synopsis, the details, then one line per option.
    var usage: String {
        let labels = options.map(Command.label)
        let width = labels.map(\.count).max() ?? 0
        let lines = zip(labels, options).map { label, option in
            "  " + label + String(repeating: " ", count: width - label.count + 2) + option.help
        }
        return "usage: \(synopsis)\n\n\(details)\n\noptions:\n" + lines.joined(separator: "\n")
    }

    /// `--timeout S`, `--json`.
    static func label(_ option: Option) -> String {
        option.value.map { "\(option.name) \($0)" } ?? option.name
    }
}
