import Bird
import DBus
import Glibc

// Signals are received through a signalfd on the event loop; block them before
// any thread exists so no other thread takes them. A closed stdout must give
// EPIPE, not kill us.
EventLoop.blockSignals([SIGINT, SIGTERM])
signal(SIGPIPE, SIG_IGN)

let topUsage = """
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

func printOut(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    _ = write(1, bytes, bytes.count)
}

func main(_ arguments: [String]) -> ExitStatus {
    guard let command = arguments.first else {
        Diagnostics.raw(topUsage)
        return .usage
    }
    let rest = Array(arguments.dropFirst())
    let common = CommonOptions.valued
    let commonFlags = CommonOptions.flags
    let commands: [String: (usage: String, spec: Arguments.Spec, run: (Arguments) throws(UsageError) -> ExitStatus)] = [
        "scan": (ScanCommand.usage, Arguments.Spec(valued: common, flags: commonFlags), ScanCommand.run),
        "read": (
            ReadCommand.usage, Arguments.Spec(valued: common.union(["--connect-timeout"]), flags: commonFlags),
            ReadCommand.run
        ),
        "serve": (
            ServeCommand.usage,
            Arguments.Spec(valued: ["--adapter", "--name", "--color", "--alpha"], flags: commonFlags.union(["--animate"])),
            ServeCommand.run
        ),
        "set": (
            SetCommand.usage, Arguments.Spec(valued: common.union(["--connect-timeout"]), flags: commonFlags),
            SetCommand.run
        ),
        "watch": (
            WatchCommand.usage,
            Arguments.Spec(
                valued: common.union(["--connect-timeout", "--count", "--duration"]),
                flags: commonFlags.union(["--all", "--no-reconnect"])),
            WatchCommand.run
        ),
    ]
    switch command {
    case "-h", "--help", "help":
        printOut(topUsage)
        return .success
    case "--version", "version":
        printOut("birdctl 0.1.0")
        return .success
    default:
        break
    }
    guard let entry = commands[command] else {
        Diagnostics.error("unknown command '\(command)'")
        Diagnostics.raw(topUsage)
        return .usage
    }
    do {
        let parsed = try Arguments(rest, spec: entry.spec)
        if parsed.has("--help") {
            printOut(entry.usage)
            return .success
        }
        return try entry.run(parsed)
    } catch {
        Diagnostics.error(error.message)
        Diagnostics.raw(entry.usage)
        return .usage
    }
}

exit(main(Array(CommandLine.arguments.dropFirst())).rawValue)
