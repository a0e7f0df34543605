import Formats
import Bird
import Glibc

/// The command line: picks the command, parses its options, runs it, and
/// returns the exit status. `main.swift` only prepares the process and exits.
public enum Birdctl {
    static let commands: [Command] = [
        ScanCommand.command, ReadCommand.command, WatchCommand.command, SetCommand.command, PairCommand.command,
        PairCommand.unpairCommand, ServeCommand.command, RetireCommand.command,
    ]

    static var usage: String {
        let width = commands.map(\.name.count).max() ?? 0
        let list = commands.map { "  " + $0.name + String(repeating: " ", count: width - $0.name.count + 2) + $0.summary }
        let codes = ExitStatus.allCases.map { "  " + String($0.rawValue).padding(3) + "  " + $0.meaning }
        return """
            usage: birdctl <command> [options]

            A Bluetooth Low Energy central for Bird peripherals, over BlueZ.

            commands:
            \(list.joined(separator: "\n"))

            Run 'birdctl <command> --help' for a command's options.

            exit codes:
            \(codes.joined(separator: "\n"))
            """
    }

    /// Runs the command line (without the program name) and returns the exit code.
    public static func run(_ arguments: [String]) -> Int32 {
        main(arguments).rawValue
    }

    static func main(_ arguments: [String]) -> ExitStatus {
        guard let name = arguments.first else {
            Diagnostics.raw(usage)
            return .usage
        }
        switch name {
        case "-h", "--help", "help":
            printOut(usage)
            return .success
        case "--version", "version":
            printOut(Version.text)
            return .success
        case "--generate-manual":
            printOut(ManualPage.render())
            return .success
        case "--generate-completion-script":
            guard arguments.count == 2, let shell = Completions.Shell(rawValue: arguments[1]) else {
                Diagnostics.error("--generate-completion-script expects \(Option.alternatives(Completions.Shell.allCases.map(\.rawValue)))")
                return .usage
            }
            printOut(Completions.script(for: shell))
            return .success
        default:
            break
        }
        guard let command = commands.first(where: { $0.name == name }) else {
            Diagnostics.error("unknown command '\(name)'")
            Diagnostics.raw(usage)
            return .usage
        }
        do {
            let parsed = try Arguments(Array(arguments.dropFirst()), accepting: command.options)
            if parsed.has(.help) {
                printOut(command.usage)
                return .success
            }
            return try command.run(parsed)
        } catch {
            Diagnostics.error(error.message)
            Diagnostics.raw(command.usage)
            return .usage
        }
    }

    static func printOut(_ text: String) {
        let bytes = Array((text + "\n").utf8)
        _ = write(1, bytes, bytes.count)
    }
}

extension String {
    /// Left-aligned in `width` columns (ASCII).
    func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
