import Bird
@testable import BirdctlCLI
import Testing

/// The state `watch --all` keeps across restarts: what is written is read
/// back; anything else is refused whole.
@Suite("Remembered state")
struct RememberedStateTests {
    @Test func whatIsWrittenIsReadBack() throws {
        let state = RememberedState(limits: ["00:1A:7D:DA:71:13": 3, "5C:F3:70:00:00:01": 7], birds: ["F0:0D:B1:7D:00:01": 1_795_000_000])
        #expect(state.text == "birdctl-state 1\nlimit 00:1A:7D:DA:71:13 3\nlimit 5C:F3:70:00:00:01 7\nbird F0:0D:B1:7D:00:01 1795000000\n")
        #expect(try RememberedState(parsing: state.text) == state)
        #expect(try RememberedState(parsing: "birdctl-state 1\nlimit 00:1a:7d:da:71:13 3").limits == ["00:1A:7D:DA:71:13": 3])
    }

    @Test(arguments: [
        "", "birdctl-state 2\n", "{\"limits\": {}}\n", "birdctl-state 1\nlimit 00:1A:7D:DA:71:13 0\n",
        "birdctl-state 1\nlimit 00:1A:7D:DA:71:13 65\n", "birdctl-state 1\nlimit hci0 3\n",
        "birdctl-state 1\nlimit 00:1A:7D:DA:71:13 3\nlimit 00:1A:7D:DA:71:13 4\n",
        "birdctl-state 1\nlimit 00:1A:7D:DA:71:13  3\n", "birdctl-state 1\n\nlimit 00:1A:7D:DA:71:13 3\n",
        "birdctl-state 1\nhold 00:1A:7D:DA:71:13 3\n", "birdctl-state 1\nbird F0:0D:B1:7D:00:01 -5\n",
        "birdctl-state 1\nbird F0:0D:B1:7D:00:01 1\nbird F0:0D:B1:7D:00:01 2\n",
    ])
    func anythingElseIsRefusedWhole(_ text: String) {
        #expect(throws: StateFileError.self) { try RememberedState(parsing: text) }
    }

    @Test func aFileNamingTooManyAdaptersIsRefused() {
        let lines = (0..<65).map { "limit 00:00:00:00:00:\(format2($0)) 2" }
        #expect(throws: StateFileError.self) { try RememberedState(parsing: (["birdctl-state 1"] + lines).joined(separator: "\n")) }
    }

    /// A limit learned is kept; one no longer known (bluetoothd restarted)
    /// or given changes nothing, and adapters not in use now keep theirs.
    @Test func updatedFromTheAdaptersAsTheyAre() {
        func adapter(_ address: BluetoothAddress?, limit: Int?, learned: Bool) -> AdapterHealth {
            var health = AdapterHealth(name: "hci0")
            (health.address, health.limit, health.limitLearned) = (address, limit, learned)
            return health
        }
        let before = RememberedState(limits: ["00:00:00:00:00:01": 3, "00:00:00:00:00:02": 4, "00:00:00:00:00:03": 5])
        let after = before.updated(with: [
            adapter("00:00:00:00:00:01", limit: nil, learned: false),
            adapter("00:00:00:00:00:02", limit: 9, learned: false),
            adapter("00:00:00:00:00:04", limit: 2, learned: true),
            adapter(nil, limit: 2, learned: true),
        ])
        #expect(after.limits == ["00:00:00:00:00:01": 3, "00:00:00:00:00:02": 4, "00:00:00:00:00:03": 5, "00:00:00:00:00:04": 2])
    }

    /// Birds read are kept, at most `maximumBirds`: a new one past it takes
    /// the place of the one read longest ago.
    @Test func birdsAreBoundedByTheLongestUnread() {
        var state = RememberedState()
        let first = state.read("f0:0d:b1:7d:00:01", at: 10)
        let again = state.read("F0:0D:B1:7D:00:01", at: 20)
        #expect(first && !again, "new, then known")
        #expect(state.birds == ["F0:0D:B1:7D:00:01": 20])
        for n in 0..<(RememberedState.maximumBirds - 1) { _ = state.read(BluetoothAddress(value: 0xC000_0000_0000 + UInt64(n))!, at: 100 + Int64(n)) }
        #expect(state.birds.count == RememberedState.maximumBirds)
        let past = state.read("F0:0D:B1:7D:00:02", at: 5000)
        #expect(past)
        #expect(state.birds.count == RememberedState.maximumBirds && state.birds["F0:0D:B1:7D:00:01"] == nil, "the longest unread went")
        let forgotten = state.forget("f0:0d:b1:7d:00:02")
        #expect(forgotten && state.birds["F0:0D:B1:7D:00:02"] == nil, "forgotten by the fleet: gone")
    }
}

private func format2(_ n: Int) -> String {
    let hex = String(n, radix: 16, uppercase: true)
    return hex.count == 1 ? "0" + hex : hex
}
