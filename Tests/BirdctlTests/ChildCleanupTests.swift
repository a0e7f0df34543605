import TestProcesses
import Foundation
import Glibc
import Testing

/// A test run that is killed leaves nothing running: the children the test
/// support started end with it (the run's watchdog kills its process group).
@Suite("Test support: children end with the run")
struct ChildCleanupTests {
    @Test func aRunKilledMidwayLeavesNoProcessBehind() async throws {
        let probe = try ChildProcess(
            BirdctlProcess.executable.deletingLastPathComponent().appendingPathComponent("test-support-probe").path, [],
            stdout: .pipe)
        defer { try? probe.stdout?.close() }
        let said = probe.stdout.flatMap { readLine(from: $0) }
        let descendants = RunningProcess.descendants(of: probe.pid)
        #expect(said == "ready")
        // The watchdog, dbus-daemon, the fake and birdctl at least.
        #expect(descendants.count >= 4, "\(descendants)")
        probe.kill()
        #expect(await probe.exited() == SIGKILL)
        let allGone = await poll(within: .seconds(10)) { descendants.allSatisfy { !$0.isRunning } }
        #expect(allGone, "left running: \(descendants.filter(\.isRunning))")
    }
}

/// A process as /proc shows it; its start time tells it from a later one with its pid.
struct RunningProcess: CustomStringConvertible {
    let pid: Int32
    let parent: Int32
    let started: String
    let command: String

    init?(pid: Int32) {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
        else { return nil }
        // After the command in parentheses: state, ppid, …, starttime (field 22).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, fields[0] != "Z", let parent = Int32(fields[1]) else { return nil }
        (self.pid, self.parent, started) = (pid, parent, String(fields[19]))
        command = String(stat[stat.index(after: open)..<close])
    }

    /// Still running (not a zombie, not another process with its pid).
    var isRunning: Bool { RunningProcess(pid: pid)?.started == started }

    var description: String { "\(pid) \(command)" }

    /// Every process below `root` now.
    static func descendants(of root: Int32) -> [RunningProcess] {
        let all = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [])
            .compactMap(Int32.init).compactMap(RunningProcess.init(pid:))
        var found: [RunningProcess] = []
        var parents: Set<Int32> = [root]
        while true {
            let next = all.filter { parents.contains($0.parent) && !found.map(\.pid).contains($0.pid) }
            if next.isEmpty { return found }
            found += next
            parents = Set(next.map(\.pid))
        }
    }
}
