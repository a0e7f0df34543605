import BlueZTestSupport
import DBus
import Foundation
import Glibc
import Testing

extension FakeBlueZ {
    func requireSecurity(_ mode: String, address: String = bird) async throws {
        try await call("RequireSecurity", .string(address), .string(mode))
    }

    func pairings(address: String = bird) async throws -> UInt32 {
        try await call("Pairings", .string(address)).first?.integer.flatMap(UInt32.init(exactly:)) ?? 0
    }
}

/// Birds that allow reads only over an encrypted, paired link.
@Suite("Pairing")
struct PairingTests {
    @Test func aWatchPairsWhenTheBirdAsksAndTheBondSurvivesAReconnect() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("justworks")
        let watch = try fake.launch("watch", "alpha", "--json")
        _ = try await watch.line(containing: "\"pairing\"")
        _ = try await watch.line(containing: "\"paired\"")
        // Its own agent, not the system's default: NoInputNoOutput (Just Works).
        #expect(try await fake.call("Agents").first?.stringArray == ["NoInputNoOutput"])
        let first = try parseJSON(try await watch.line(containing: "\"reading\""))
        #expect(first["value"] as? Double == 0.8)
        try await fake.call("DropLink", .string(bird))
        _ = try await watch.line(containing: "\"connected\"")
        _ = try await watch.line(containing: "\"reading\"")  // read after reconnecting, no second pairing
        try await waitForNotifying(fake)
        try await fake.push("20")
        #expect(try parseJSON(try await watch.line(containing: "\"reading\""))["value"] as? Double == 0.2)
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        #expect(try await fake.pairings() == 1)
        #expect(try await fake.call("Agents").first?.stringArray == [], "the agent is unregistered on the way out")
    }

    @Test func aReadPairsThenReads() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("justworks")
        let read = try await fake.birdctl("read", bird, "--verbose")
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == ["name   Robin", "color  #FF8800", "alpha  0.8"])
        #expect(read.stderr.contains("pairing with Robin (\(bird))") && read.stderr.contains("paired with Robin"))
        #expect(try await fake.pairings() == 1)
    }

    /// bluetoothd 5.66 bonds, says Paired, and never answers Pair (seen with a
    /// Bumble bird in the VM tier): the pairing is over when Paired says so.
    @Test func aPairingBlueZNeverAnswersEndsWhenPairedTurnsTrue() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("lostreply")
        let read = try await fake.birdctl("read", bird, "--verbose", "--pair-timeout", "60")
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == ["name   Robin", "color  #FF8800", "alpha  0.8"])
        #expect(read.stderr.contains("paired with Robin"), "\(read.stderr)")
        #expect(try await fake.pairings() == 1)
        // And `birdctl pair` itself.
        let other = try FakeBlueZ()
        try await other.addBird()
        try await other.requireSecurity("lostreply")
        let pair = try await other.birdctl("pair", bird, "--pair-timeout", "60")
        #expect(pair.status == 0, "\(pair.stderr)")
        #expect(try await other.pairings() == 1)
    }

    @Test func noPairExitsTenAndSaysWhatToDo() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("justworks")
        let read = try await fake.birdctl("read", "--no-pair")
        #expect(read.status == 10, "\(read.stderr)")
        #expect(read.stderr.contains("requires pairing") && read.stderr.contains("birdctl pair"), "\(read.stderr)")
        #expect(try await fake.pairings() == 0)
    }

    @Test func aRefusedPairingExitsTen() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("refuse")
        let read = try await fake.birdctl("read", "alpha")
        #expect(read.status == 10, "\(read.stderr)")
        #expect(read.stderr.contains("pairing failed: AuthenticationFailed"), "\(read.stderr)")
    }

    @Test func aPasskeyToConfirmIsRefusedWithoutAPerson() async throws {
        // NoInputNoOutput cannot confirm a passkey: BlueZ fails the pairing.
        let fake = try FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("confirm")
        let set = try await fake.birdctl("set", "alpha", "55")
        #expect(set.status == 10, "\(set.stderr)")
        // And there is no terminal here to ask on.
        let asked = try await fake.birdctl("set", "alpha", "55", "--confirm-pairing")
        #expect(asked.status == 2 && asked.stderr.contains("needs a terminal"), "\(asked.stderr)")
    }

    /// `--confirm-pairing` on a terminal: `script` gives birdctl a pty whose
    /// input is our answer; the question goes to /dev/tty.
    @Test(arguments: [("y", Int32(0)), ("n", Int32(10))])
    func aPersonConfirmsThePasskeyOnTheTerminal(_ answer: String, _ status: Int32) async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("confirm")
        let command = [BirdctlProcess.executable.path, "read", bird, "alpha", "--confirm-pairing"].joined(separator: " ")
        let process = try ChildProcess(
            "/usr/bin/script", ["-qec", command, "/dev/null"], environment: fake.environment, stdin: .pipe, stdout: .pipe)
        let (input, output) = (try #require(process.stdin), try #require(process.stdout))
        // Answer once the question is on the terminal.
        var seen = Data()
        let deadline = ContinuousClock.now + .seconds(20)
        while !String(decoding: seen, as: UTF8.self).contains("passkey 123456?"), ContinuousClock.now < deadline {
            seen.append(output.nextChunk())
        }
        #expect(String(decoding: seen, as: UTF8.self).contains("does Robin (\(bird)) show the passkey 123456? [y/N]"))
        input.write(Data("\(answer)\n".utf8))
        seen.append(output.readToEndRetryingInterrupts())
        #expect(await process.exited() == status, "\(String(decoding: seen, as: UTF8.self))")
        #expect(try await fake.pairings() == (status == 0 ? 1 : 0))
    }

    @Test func aPairingThatNeverEndsIsCancelledAtItsDeadline() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("silent")
        let started = ContinuousClock.now
        let read = try await fake.birdctl("read", "alpha", "--pair-timeout", "1")
        #expect(read.status == 10, "\(read.stderr)")
        #expect(read.stderr.contains("pairing did not finish in time"), "\(read.stderr)")
        #expect(ContinuousClock.now - started < .seconds(10))  // not the 30 s default
        let calls = try await fake.calls()
        #expect(calls.contains { $0.hasPrefix("CancelPairing ") }, "\(calls)")
    }

    @Test func pairAndUnpairCommands() async throws {
        let fake = try FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("justworks")
        let pair = try await fake.birdctl("pair", bird)
        #expect(pair.status == 0, "\(pair.stderr)")
        #expect(pair.stderr.contains("paired with Robin"), "\(pair.stderr)")
        #expect(try await fake.pairings() == 1)
        // Already paired: success, no second pairing.
        #expect(try await fake.birdctl("pair", bird).status == 0)
        #expect(try await fake.pairings() == 1)
        // A read now needs no pairing.
        #expect(try await fake.birdctl("read", bird, "alpha", "--no-pair").stdout == ["0.8"])
        let unpair = try await fake.birdctl("unpair", bird)
        #expect(unpair.status == 0, "\(unpair.stderr)")
        #expect(try await fake.birdctl("unpair", bird).status == 6)
        #expect(try await fake.birdctl("pair").status == 2)
    }
}
