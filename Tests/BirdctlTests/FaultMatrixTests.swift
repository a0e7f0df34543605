import FakeBlueZSupport
import TestProcesses
import DBus
import Foundation
import Testing

/// The user guide's fault matrix (docs/guide.md): what BlueZ, the radio or
/// the terminal can do to a read or a watch, and the documented outcome of
/// each. Rows already covered elsewhere name their test in the guide.
@Suite("Fault matrix")
struct FaultMatrixTests {
    /// Waits until the fake has seen a call of `method`.
    func waitForCall(_ fake: FakeBlueZ, _ method: String) async throws {
        let called = try await poll {
            try await fake.calls().contains { $0.hasPrefix(method + " ") }
        }
        if !called { throw TestSetupError("birdctl never called \(method)") }
    }

    // MARK: bluetoothd

    @Test func bluetoothdAbsentAtStartExitsThreeForWatchToo() async throws {
        let fake = try await FakeBlueZ()
        try await fake.stop()
        let watch = try await fake.birdctl("watch")
        #expect(watch.status == 3)
        #expect(watch.stderr.contains("bluetoothd is not running"))
    }

    @Test func bluetoothdDyingMidReadExitsThree() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.delayNext("ReadValue", seconds: -1)
        let read = try fake.launch("read")
        try await waitForCall(fake, "ReadValue")
        try await fake.stop()
        #expect(try await read.waitForExit(within: .seconds(5)) == 3)
        #expect(read.stderr.contains("bluetoothd"))
    }

    // MARK: The adapter

    /// The link drops before the adapter goes (as in bluetoothd), so a read
    /// ends as a lost connection.
    @Test func adapterRemovedMidReadExitsSeven() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.delayNext("ReadValue", seconds: -1)
        let read = try fake.launch("read")
        try await waitForCall(fake, "ReadValue")
        try await fake.call("RemoveAdapter", .string("hci0"))
        #expect(try await read.waitForExit(within: .seconds(5)) == 7)
        #expect(read.stderr.contains("connection was lost"))
    }

    @Test func adapterRemovedAndReturningWatchWaitsAndResumes() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "alpha", "--json")
        _ = try await watch.line(containing: "\"reading\"")
        try await fake.call("RemoveAdapter", .string("hci0"))
        #expect(try await watch.line(containing: "\"waiting\"").contains("removed"))
        try await fake.call("AddAdapter", .string("hci0"), .string("00:AA:01:00:00:00"))
        try await fake.addBird()
        _ = try await watch.line(containing: "\"connected\"")
        _ = try await watch.line(containing: "\"reading\"")
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func adapterPoweredOffMidReadExitsSeven() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.delayNext("ReadValue", seconds: -1)
        let read = try fake.launch("read")
        try await waitForCall(fake, "ReadValue")
        try await fake.call("SetPowered", .string("hci0"), .bool(false))
        #expect(try await read.waitForExit(within: .seconds(5)) == 7)
        #expect(read.stderr.contains("connection was lost"))
    }

    // MARK: The device

    @Test(arguments: [["read"], ["watch"]])
    func deviceRemovedWhileConnectingExitsSeven(_ command: [String]) async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.delayNext("Connect", seconds: -1)
        // A deadline far off, so that on a loaded machine it cannot come before the removal.
        let process = try fake.launch(command[0], "--connect-timeout", "60")
        try await waitForCall(fake, "Connect")
        _ = try await fake.control.call(
            destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.Adapter1",
            member: "RemoveDevice", arguments: [.objectPath(ObjectPath(birdPath))])
        #expect(try await process.waitForExit(within: .seconds(5)) == 7)
        #expect(process.stderr.contains("connection was lost"), "\(process.stderr)")
    }

    // MARK: Errors and silence from every call

    static let errors = [
        "org.bluez.Error.Failed", "org.bluez.Error.InProgress", "org.bluez.Error.NotReady",
        "org.bluez.Error.NotPermitted", "org.bluez.Error.NotAuthorized", "org.bluez.Error.InvalidArguments",
        "org.bluez.Error.NotSupported", "org.bluez.Error.DoesNotExist", "org.bluez.Error.NotConnected",
        "org.freedesktop.DBus.Error.AccessDenied", "org.freedesktop.DBus.Error.UnknownObject",
        "org.freedesktop.DBus.Error.NoReply",
    ]

    /// The exit code of `read` when `method` fails once with `error`.
    static func expectedExit(_ method: String, _ error: String) -> Int32 {
        if error.hasSuffix("AccessDenied") { return 5 }
        if error.hasSuffix("NotConnected") { return 7 }
        switch method {
        case "SetDiscoveryFilter", "StartDiscovery":
            // NotReady means "powering off": the adapter's power decides. InProgress
            // from StartDiscovery means ours is running. Either way the find deadline ends it.
            return error.hasSuffix("NotReady") || (method == "StartDiscovery" && error.hasSuffix("InProgress")) ? 6 : 9
        case "Connect":
            // Transient refusals are retried (and the retry succeeds here).
            return error.hasSuffix("InProgress") ? 0 : 7
        default:
            return 9
        }
    }

    @Test(arguments: ["SetDiscoveryFilter", "StartDiscovery", "Connect", "ReadValue"])
    func everyErrorFromEveryCallOfARead(_ method: String) async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        for (index, error) in Self.errors.enumerated() {
            let message = "injected failure \(index)"
            try await fake.failNext(method, error, message)
            let result = try await fake.birdctl("read", "--timeout", "1")
            let expected = Self.expectedExit(method, error)
            #expect(result.status == expected, "\(method) \(error): \(result.stderr)")
            if expected != 0 && expected != 6 {
                #expect(result.stderr.contains(message), "\(method) \(error): \(result.stderr)")
            }
        }
    }

    @Test func everyErrorFromStartNotifyIsReportedAndTheOtherFieldsStream() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        for (index, error) in Self.errors.enumerated() {
            try await fake.failNext("StartNotify", error, "injected failure \(index)")
            let watch = try fake.launch("watch", "--json", "--notify-method", "start")
            let reported = try parseJSON(try await watch.line(containing: "injected failure \(index)"))
            #expect(reported["event"] as? String == "error", "\(error)")
            // Another field than the one refused streams on.
            let refusedName = (reported["message"] as? String ?? "").contains("subscribe to name")
            try await waitForNotifying(fake, allFields, count: 2)
            try await fake.push(refusedName ? "41" : "Robin II", to: refusedName ? alphaUUID : FakeBlueZ.nameUUID)
            #expect(try await watch.line(containing: refusedName ? "0.41" : "Robin II").contains("\"reading\""))
            watch.signal(SIGINT)
            #expect(try await watch.waitForExit() == 0)
        }
    }

    @Test func aReplyThatNeverComesTimesOut() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        try await fake.delayNext("ReadValue", seconds: -1)
        let result = try await BirdctlProcess.run(
            ["read", "name"], environment: fake.environment.merging(["BIRDCTL_CALL_TIMEOUT": "1"]) { $1 })
        #expect(result.status == 9, "\(result.stderr)")
        #expect(result.stderr.contains("did not answer"), "\(result.stderr)")
        #expect(result.stderr.contains("pair it first with 'birdctl pair ADDRESS'"), "\(result.stderr)")
    }

    // MARK: The peripheral

    @Test func aCharacteristicDisappearingWhileSubscribedIsReportedAndFoundAgain() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird()
        let watch = try fake.launch("watch", "alpha", "--json")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        try await fake.call("RemoveCharacteristic", .string(bird), .string(FakeBlueZ.alphaUUID))
        #expect(try await watch.line(containing: "\"error\"").contains("alpha"))
        // Reconnects to resolve the services again, and streams on.
        _ = try await watch.line(containing: "\"connected\"")
        _ = try await watch.line(containing: "\"reading\"")
        try await waitForNotifying(fake)
        try await fake.push("33")
        #expect(try parseJSON(try await watch.line(containing: "\"reading\""))["value"] as? Double == 0.33)
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    @Test func largestAndEmptyValues() async throws {
        let fake = try await FakeBlueZ()
        let longest = String(repeating: "R", count: 512)
        try await fake.addBird(birdName: longest, alpha: "")
        let read = try await fake.birdctl("read")
        #expect(read.status == 8)
        #expect(read.stdout.first == "name   \(longest)")
        #expect(read.stderr.contains("bad alpha value: empty (raw: empty)"))

        let watch = try fake.launch("watch", "--json")
        _ = try await watch.line(containing: "\"bad_value\"")
        try await waitForNotifying(fake, allFields)
        try await fake.push(longest + "R", to: FakeBlueZ.nameUUID)
        #expect(try await watch.line(containing: "\"bad_value\"").contains("longer than 512 bytes"))
        try await fake.push("", to: FakeBlueZ.colorUUID)
        #expect(try await watch.line(containing: "\"bad_value\"").contains("\"field\":\"color\""))
        try await fake.push("Wren", to: FakeBlueZ.nameUUID)
        #expect(try await watch.line(containing: "\"reading\"").contains("Wren"))
        watch.signal(SIGINT)
        #expect(try await watch.waitForExit() == 0)
    }

    // MARK: The terminal

    @Test func aSlowStdoutLosesNothing() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addBird(alpha: "080")  // 0.8, in bytes no burst value has (none is taken for the read's echo)
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("slow-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        // The reader sleeps while birdctl fills the pipe (64 KiB) and blocks.
        // A reading lost would leave birdctl waiting for its 5001st for ever:
        // timeout ends it, and with it the pipeline, after 90 s.
        // The first read's reply is held until the whole burst is out: every
        // notification comes before it (the notification socket does not go
        // through dbus-daemon, and under load overtakes the reply anyway).
        try await fake.call("DeferNextReply", .string("ReadValue"))
        let shell = try ChildProcess(
            "/bin/bash",
            ["-c", "set -o pipefail; timeout -s KILL 90 \"$0\" watch alpha --count 5001 | (sleep 2; cat > \"$1\")",
             BirdctlProcess.executable.path, output.path],
            environment: fake.environment)
        try await waitForNotifying(fake)
        try await waitForCall(fake, "ReadValue")
        try await fake.call("Burst", .string(bird), .string(FakeBlueZ.alphaUUID), .uint32(5000), .uint32(101))
        try await fake.call("ReleaseDeferredReplies")
        let status = await shell.exited(within: .seconds(120))
        #expect(status == 0, "birdctl | reader: \(status.map { $0 == 137 ? "birdctl killed after 90 s" : "status \($0)" } ?? "still running")")
        let lines = try String(contentsOf: output, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 5001)
        let values = lines.dropFirst().compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        let expected = (0..<5000).map { Double($0 % 101) / 100 }
        let firstWrong = zip(values, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(values.count, expected.count)
        #expect(values == expected, "notifications lost or reordered from the \(firstWrong)th on: \(values[firstWrong...].prefix(5))")
    }
}
