import Bird
import Glibc

/// The command line: picks the command, parses its options, runs it, and
/// returns the exit status. `main.swift` only prepares the process and exits.
public enum Birdctl {
    static let usage = """
        usage: birdctl <command> [options]

        A Bluetooth Low Energy central for Bird peripherals, over BlueZ.

        commands:
          scan    list Bird peripherals in range
          read    read a Bird's name, color and alpha once
          watch   stream a Bird's readings (or every Bird's, with --all)
          set     write a value to a Bird
          serve   be a Bird peripheral (through BlueZ)

        Run 'birdctl <command> --help' for a command's options. Exit codes:
        0 ok, 2 usage, 3 Bluetooth unavailable, 4 adapter off, 5 permission denied,
        6 no Bird found, 7 connection failed or lost, 8 bad value, 9 BlueZ operation
        failed, 130 interrupted.
        """

    typealias Command = (usage: String, spec: Arguments.Spec, run: (Arguments) throws(UsageError) -> ExitStatus)

    static func command(named name: String) -> Command? {
        let common = CommonOptions.valued
        let commonFlags = CommonOptions.flags
        switch name {
        case "scan":
            return (ScanCommand.usage, Arguments.Spec(valued: common, flags: commonFlags), ScanCommand.run)
        case "read":
            return (
                ReadCommand.usage, Arguments.Spec(valued: common.union(["--connect-timeout"]), flags: commonFlags),
                ReadCommand.run
            )
        case "serve":
            return (
                ServeCommand.usage,
                Arguments.Spec(
                    valued: ["--adapter", "--name", "--color", "--alpha"], flags: commonFlags.union(["--animate"])),
                ServeCommand.run
            )
        case "set":
            return (
                SetCommand.usage, Arguments.Spec(valued: common.union(["--connect-timeout"]), flags: commonFlags),
                SetCommand.run
            )
        case "watch":
            return (
                WatchCommand.usage,
                Arguments.Spec(
                    valued: common.union(["--connect-timeout", "--count", "--duration"]),
                    flags: commonFlags.union(["--all", "--no-reconnect"])),
                WatchCommand.run
            )
        default:
            return nil
        }
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
            printOut("birdctl 0.1.0")
            return .success
        default:
            break
        }
        guard let command = command(named: name) else {
            Diagnostics.error("unknown command '\(name)'")
            Diagnostics.raw(usage)
            return .usage
        }
        do {
            let parsed = try Arguments(Array(arguments.dropFirst()), spec: command.spec)
            if parsed.has("--help") {
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
