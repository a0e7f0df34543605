// A test run in miniature, for the test that kills one midway
// (ChildCleanupTests): starts a private bus, the fake BlueZ with a bird, and
// a `birdctl watch` of it, all through the test support; prints "ready" once
// birdctl streams, then waits to be killed.
import FakeBlueZSupport
import TestProcesses
import Foundation

let fake = try await FakeBlueZ()
try await fake.addBird()
let birdctl = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("birdctl")
let watch = try BirdctlProcess(["watch", "F0:0D:B1:7D:00:01", "alpha"], environment: fake.environment, executable: birdctl)
guard try await watch.nextLine(within: .seconds(30)) != nil else { fatalError("birdctl printed nothing") }
FileHandle.standardOutput.write(Data("ready\n".utf8))
while true { try await Task.sleep(for: .seconds(3600)) }
