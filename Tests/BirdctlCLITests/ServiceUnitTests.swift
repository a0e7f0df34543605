import Foundation
import Testing

@testable import BirdctlCLI

/// The shipped systemd unit restarts birdctl on the exits a service meets
/// unattended: the broker not up yet (11) and the system bus gone (12).
@Suite("birdctl.service")
struct ServiceUnitTests {
    @Test func theUnitRestartsOnTheExitsOfALostDependency() throws {
        let unit = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("dist/birdctl.service.in")
        let settings = try String(contentsOf: unit, encoding: .utf8).split(separator: "\n")
            .filter { !$0.hasPrefix("#") && $0.contains("=") }
            .map { line in (String(line.prefix { $0 != "=" }), String(line.drop { $0 != "=" }.dropFirst())) }
        func values(_ key: String) -> [String] { settings.filter { $0.0 == key }.map(\.1) }
        // on-failure and always restart on an unclean exit code; the others do not.
        #expect(values("Restart").last.map { ["on-failure", "always"].contains($0) } == true, "\(values("Restart"))")
        for code in [ExitStatus.mqttFailed, .busLost].map({ String($0.rawValue) }) {
            for key in ["RestartPreventExitStatus", "SuccessExitStatus"] {
                #expect(!values(key).flatMap { $0.split(separator: " ").map(String.init) }.contains(code), "\(key) holds \(code)")
            }
        }
    }
}
