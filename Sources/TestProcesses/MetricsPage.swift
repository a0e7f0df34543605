import Foundation

/// A health page (`--metrics`) as the tests fetch and check it.
public enum MetricsPage {
    /// An HTTP GET through Python's urllib: the status and the body.
    public static func get(_ url: String) async throws -> (status: Int, body: String) {
        let script = """
            import sys, urllib.request, urllib.error
            try:
                with urllib.request.urlopen(sys.argv[1], timeout=10) as r: print(r.status); sys.stdout.write(r.read().decode())
            except urllib.error.HTTPError as e: print(e.code)
            """
        let run = try await offThePool { try ChildProcess.run("/usr/bin/python3", ["-c", script, url]) }
        let status = Int(run.stdout.prefix { $0 != "\n" }) ?? 0
        return (status, String(run.stdout.drop { $0 != "\n" }.dropFirst()))
    }

    /// What `promtool check metrics` says of `page`: its exit status and output.
    public static func promtool(_ page: String) async throws -> (status: Int32, output: String) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: file) }
        try page.write(to: file, atomically: true, encoding: .utf8)
        let checked = try await offThePool { try ChildProcess.run("/bin/sh", ["-c", "promtool check metrics < '\(file.path)' 2>&1"]) }
        return (checked.status, checked.stdout)
    }

    /// The port a command said it serves metrics on (`serving metrics at 127.0.0.1:PORT`).
    public static func port(of command: BirdctlProcess) async -> Int? {
        let said = "serving metrics at 127.0.0.1:"
        guard await command.stderr(contains: said, within: .seconds(30)), let range = command.stderr.range(of: said) else { return nil }
        return Int(command.stderr[range.upperBound...].prefix { $0.isNumber })
    }
}
