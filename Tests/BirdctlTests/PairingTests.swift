import FakeBlueZSupport
import TestProcesses
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

/// birdctl on a terminal of its own: `script` gives it a pty whose input is
/// what the test types; what it writes to /dev/tty comes back on script's output.
private final class Terminal: @unchecked Sendable {
    private let process: ChildProcess
    private var seen = Data()
    var text: String { String(decoding: seen, as: UTF8.self) }

    init(_ command: [String], environment: [String: String]) throws {
        process = try ChildProcess(
            "/usr/bin/script", ["-qec", command.joined(separator: " "), "/dev/null"], environment: environment,
            stdin: .pipe, stdout: .pipe)
    }

    /// Reads what the terminal shows until `wanted` appears; fails if the program ends first.
    func waitFor(_ wanted: String) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !text.contains(wanted) {
            let left = deadline - ContinuousClock.now
            let chunk = left <= .zero ? nil : try await offThePool { [process] () -> Data? in
                process.stdout.map { $0.nextChunk(within: left) } ?? Data()
            }
            guard let chunk, !chunk.isEmpty else {
                Issue.record("the terminal did not show \"\(wanted)\" \(chunk == nil ? "within 30 s" : "before it ended"); it showed: \(text)")
                return
            }
            seen.append(chunk)
        }
    }

    func type(_ keys: String) {
        process.stdin?.write(Data(keys.utf8))
    }

    /// Waits for the program to end; its exit status.
    func finish() async throws -> Int32 {
        let rest = try await offThePool { [process] () -> Data? in
            process.stdout.map { $0.readToEnd(within: .seconds(30)) } ?? Data()
        }
        guard let rest, let status = await process.exited() else {
            process.kill()
            throw TestSetupError("the terminal's program did not end within 30 s; it showed: \(text)")
        }
        seen.append(rest)
        return status
    }
}

/// Birds that allow reads only over an encrypted, paired link.
@Suite("Pairing")
struct PairingTests {
    @Test func aWatchPairsWhenTheBirdAsksAndTheBondSurvivesAReconnect() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("justworks")
        let watch = try fake.launch("watch", bird, "alpha", "--json")
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
        let fake = try await FakeBlueZ()
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
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("lostreply")
        let read = try await fake.birdctl("read", bird, "--verbose", "--pair-timeout", "60")
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == ["name   Robin", "color  #FF8800", "alpha  0.8"])
        #expect(read.stderr.contains("paired with Robin"), "\(read.stderr)")
        #expect(try await fake.pairings() == 1)
        // And `birdctl pair` itself.
        let other = try await FakeBlueZ()
        try await other.addBird()
        try await other.requireSecurity("lostreply")
        let pair = try await other.birdctl("pair", bird, "--pair-timeout", "60")
        #expect(pair.status == 0, "\(pair.stderr)")
        #expect(try await other.pairings() == 1)
    }

    @Test func noPairExitsTenAndSaysWhatToDo() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("justworks")
        let read = try await fake.birdctl("read", "--no-pair")
        #expect(read.status == 10, "\(read.stderr)")
        #expect(read.stderr.contains("requires pairing") && read.stderr.contains("birdctl pair"), "\(read.stderr)")
        #expect(try await fake.pairings() == 0)
    }

    @Test func aRefusedPairingExitsTen() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("refuse")
        let read = try await fake.birdctl("read", bird, "alpha")
        #expect(read.status == 10, "\(read.stderr)")
        #expect(read.stderr.contains("pairing failed: AuthenticationFailed"), "\(read.stderr)")
    }

    @Test func aPasskeyToConfirmIsRefusedWithoutAPerson() async throws {
        // NoInputNoOutput cannot confirm a passkey: BlueZ fails the pairing.
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("confirm")
        let set = try await fake.birdctl("set", bird, "alpha", "55")
        #expect(set.status == 10, "\(set.stderr)")
        // And there is no terminal here to ask on.
        let asked = try await fake.birdctl("set", "alpha", "55", "--confirm-pairing")
        #expect(asked.status == 2 && asked.stderr.contains("needs a terminal"), "\(asked.stderr)")
    }

    /// `--confirm-pairing` on a terminal: the question goes to /dev/tty.
    @Test(arguments: [("y", Int32(0)), ("n", Int32(10))])
    func aPersonConfirmsThePasskeyOnTheTerminal(_ answer: String, _ status: Int32) async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("confirm")
        let terminal = try Terminal(
            [BirdctlProcess.executable.path, "read", bird, "alpha", "--confirm-pairing"], environment: fake.environment)
        try await terminal.waitFor("does Robin (\(bird)) show the passkey 123456? [y/N]")
        terminal.type("\(answer)\n")
        #expect(try await terminal.finish() == status, "\(terminal.text)")
        #expect(try await fake.pairings() == (status == 0 ? 1 : 0))
    }

    @Test func aPairingThatNeverEndsIsCancelledAtItsDeadline() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("silent")
        let started = ContinuousClock.now
        let read = try await fake.birdctl("read", bird, "alpha", "--pair-timeout", "1")
        #expect(read.status == 10, "\(read.stderr)")
        #expect(read.stderr.contains("pairing did not finish in time"), "\(read.stderr)")
        #expect(ContinuousClock.now - started < .seconds(25))  // not the 30 s default
        let calls = try await fake.calls()
        #expect(calls.contains { $0.hasPrefix("CancelPairing ") }, "\(calls)")
    }

    @Test func pairAndUnpairCommands() async throws {
        let fake = try await FakeBlueZ()
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

    /// The nearest bird, not named, asks for pairing: birdctl does not bond
    /// with it and says how to.
    @Test func aBirdNobodyNamedIsNotBondedWith() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.requireSecurity("justworks")
        let read = try await fake.birdctl("read", "alpha")
        #expect(read.status == 10, "\(read.stderr)")
        #expect(read.stderr.contains("\(bird) asks for pairing") && read.stderr.contains("birdctl pair \(bird)"), "\(read.stderr)")
        #expect(try await fake.pairings() == 0)
        // Named with --pair-with, it is.
        let named = try await fake.birdctl("read", "alpha", "--pair-with", bird.lowercased())
        #expect(named.status == 0 && named.stdout == ["0.8"], "\(named.stderr)")
        #expect(try await fake.pairings() == 1)
    }

    /// Under `watch --all`: two named birds asking for pairing at once both
    /// pair and stream; a stranger asking too is declined (an event saying
    /// what to do), never bonded with, not connected to again, and blocks nobody.
    @Test func underAllEachNamedBirdPairsOnItsOwnAndAStrangerIsDeclined() async throws {
        let fake = try await FakeBlueZ()
        let wren = "F0:0D:B1:7D:00:02"
        let stranger = "F0:0D:B1:7D:00:03"
        try await fake.addBird()
        try await fake.addBird(address: wren, name: "Wren", alpha: "30", rssi: -60)
        try await fake.addBird(address: stranger, name: "Robin", alpha: "10", rssi: -40)
        for address in [bird, wren, stranger] { try await fake.requireSecurity("justworks", address: address) }
        let watch = try fake.launch("watch", "--all", "alpha", "--json", "--pair-with", "\(bird),\(wren)")
        var paired: Set<String> = []
        var readings: Set<String> = []
        var declined: [String: Any]?
        while paired.count < 2 || readings.count < 2 || declined == nil {
            let event = try parseJSON(try await watch.line(containing: "\"event\""))
            let address = event["address"] as? String ?? ""
            switch event["event"] as? String {
            case "paired": paired.insert(address)
            case "reading": readings.insert(address)
            case "pairing-declined": declined = event
            default: break
            }
        }
        #expect(paired == [bird, wren] && readings == [bird, wren])
        #expect(declined?["address"] as? String == stranger)
        #expect((declined?["message"] as? String)?.contains("birdctl pair \(stranger)") == true, "\(declined ?? [:])")
        // Both named birds stream on.
        for (address, value) in [(bird, "21"), (wren, "32")] {
            try await waitForNotifying(fake, count: 2)
            try await fake.push(value, address: address)
            let line = try parseJSON(try await watch.line(containing: "\"value\":0.\(value)"))
            #expect(line["address"] as? String == address)
        }
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
        #expect(try await fake.pairings(address: bird) == 1)
        #expect(try await fake.pairings(address: wren) == 1)
        #expect(try await fake.pairings(address: stranger) == 0)
        let strangerPath = "/org/bluez/hci0/dev_" + stranger.replacingOccurrences(of: ":", with: "_")
        #expect(try await fake.calls().filter { $0 == "Connect \(strangerPath)" }.count == 1, "declined: not connected to again")
    }

    /// `--confirm-pairing` under `--all` on a terminal: each question names
    /// the bird bluetoothd asks about, with its own passkey; a passkey to type
    /// is shown; a question bluetoothd withdraws is closed.
    @Test func thePromptNamesTheBirdBlueZAsksAbout() async throws {
        let fake = try await FakeBlueZ()
        let wren = "F0:0D:B1:7D:00:02"
        let finch = "F0:0D:B1:7D:00:03"
        try await fake.addBird()
        try await fake.addBird(address: wren, name: "Wren", alpha: "30", rssi: -60)
        try await fake.addBird(address: finch, name: "Finch", alpha: "10", rssi: -70)
        for (address, mode, passkey) in [(bird, "confirm", 111111), (wren, "display", 222222), (finch, "withdrawn", 333333)] {
            try await fake.requireSecurity(mode, address: address)
            try await fake.call("SetPasskey", .string(address), .uint32(UInt32(passkey)))
        }
        let terminal = try Terminal(
            [BirdctlProcess.executable.path, "watch", "--all", "alpha", "--confirm-pairing", "--duration", "8",
             "--pair-with", "\(bird),\(wren),\(finch)"],
            environment: fake.environment)
        try await terminal.waitFor("does Robin (\(bird)) show the passkey 111111? [y/N]")
        terminal.type("y\n")
        try await terminal.waitFor("type 222222 on Wren (\(wren)) to pair with it")
        try await terminal.waitFor("does Finch (\(finch)) show the passkey 333333? [y/N]")
        try await terminal.waitFor("the question was withdrawn")
        #expect(try await terminal.finish() == 0, "\(terminal.text)")
        #expect(try await fake.pairings(address: bird) == 1)
        #expect(try await fake.pairings(address: wren) == 1)
        #expect(try await fake.pairings(address: finch) == 0)
    }
}
