import DBus
import FuzzSupport
import Glibc

/// A private dbus-daemon for the targets that need a `Connection` (one per
/// fuzzing process, started at the first input). It ends with the fuzzer
/// however that ends: a shell holds the daemon and kills it when its stdin,
/// a pipe only this process writes to, closes.
public enum FuzzBus {
    public static func connect() -> Connection {
        do {
            return try Connection.connect(address: address)
        } catch {
            fatalError("no connection to the fuzzing bus: \(error)")
        }
    }

    private static let address: String = start()

    private static func start() -> String {
        let config = fixturesDirectory + "/test-bus.conf"
        let script = "dbus-daemon --config-file='\(config)' --nofork --nopidfile --print-address=1 & read _; kill $!"
        var input: [Int32] = [0, 0]
        var output: [Int32] = [0, 0]
        guard pipe(&input) == 0, pipe(&output) == 0 else { fatalError("pipe: \(errno)") }
        for fd in input + output { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        var pid: pid_t = 0
        let arguments = ["/bin/sh", "-c", script]
        var argv = arguments.map { strdup($0) } + [nil]
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, nil, &argv, environ)
        argv.forEach { free($0) }
        posix_spawn_file_actions_destroy(&actions)
        guard spawned == 0 else { fatalError("could not start dbus-daemon: \(spawned)") }
        close(input[0])
        close(output[1])
        // input[1] stays open, unread, for the life of the process.
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(output[0], &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        let address = String(decoding: line, as: UTF8.self)
        guard address.hasPrefix("unix:") else { fatalError("dbus-daemon printed no address") }
        return address
    }

    /// The repository's fixtures/, found from this file.
    private static var fixturesDirectory: String {
        var path = #filePath
        for _ in 0..<4 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path + "/fixtures"
    }
}
