import DBus
import Foundation
import TestProcesses

/// The fake `org.bluez` of fixtures/fake_bluez.py on a private bus: one per
/// test, so tests are isolated and can run in parallel.
public final class FakeBlueZ: @unchecked Sendable {
    public static let controlInterface = "org.birdctl.FakeBlueZ"
    public static let birdService = "b7ac06dc-09ff-40ed-b03a-55d09b08eb4a"
    public static let colorUUID = "b7ac06dc-09ff-40ed-b03a-55d09b080001"
    public static let nameUUID = "b7ac06dc-09ff-40ed-b03a-55d09b080002"
    public static let alphaUUID = "b7ac06dc-09ff-40ed-b03a-55d09b080003"

    public let bus: PrivateBus
    /// The tests' own connection, used for control calls.
    public let control: Connection
    /// The fake; its stdout (it printed "ready") stays open while it runs: it may print more.
    private var process: ChildProcess?
    private let parameters: String
    public let logFile: URL
    /// The fake's stderr (Python's tracebacks).
    public var stderrFile: URL { logFile.appendingPathExtension("stderr") }

    /// Starts a private bus and the fake on it. `adapters`: how many (hci0…);
    /// `powered`: their initial state; `busConfig`: the bus's configuration in fixtures/.
    /// Async, so that the starts (each waits for a child's first line) never
    /// hold a pool thread (see `offThePool`).
    public init(adapters: Int = 1, powered: Bool = true, busConfig: String = "test-bus.conf") async throws {
        bus = try await PrivateBus.started(config: busConfig)
        control = try bus.connect()
        parameters = "{\"adapters\": \(adapters), \"powered\": \(powered)}"
        logFile = FileManager.default.temporaryDirectory
            .appendingPathComponent("fake-bluez-\(UUID().uuidString).log")
        try await start()
    }

    deinit {
        kill()
        control.close()
        bus.stop()
        try? FileManager.default.removeItem(at: logFile)
        try? FileManager.default.removeItem(at: stderrFile)
    }

    /// The environment a birdctl process needs to talk to this fake.
    public var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": bus.address] }

    /// Starts the fake (again): a new bluetoothd with a new unique name.
    public func start() async throws {
        let process = try await offThePool { [parameters, logFile, stderrFile, bus] in
            try Self.launch(parameters: parameters, logFile: logFile, stderrFile: stderrFile, busAddress: bus.address)
        }
        self.process = process
    }

    /// Starts the fake's process and waits for its "ready".
    private static func launch(parameters: String, logFile: URL, stderrFile: URL, busAddress: String) throws -> ChildProcess {
        // stderr (Python's tracebacks) to a file, not the test process's
        // stderr: if the test process dies, `swift test` reads that pipe to
        // its end, which a fake still running would hold open for ever.
        let process = try ChildProcess(
            "/usr/bin/python3",
            [
                "-m", "dbusmock", "--system", "-t", fixturesDirectory.appendingPathComponent("fake_bluez.py").path,
                "-p", parameters, "-l", logFile.path,
            ],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress, "PYTHONDONTWRITEBYTECODE": "1"],
            stdout: .pipe, stderr: .file(stderrFile))
        guard process.stdout.flatMap({ readLine(from: $0) }) == "ready" else {
            process.kill()
            try? process.stdout?.close()
            let log = ((try? String(contentsOf: logFile, encoding: .utf8)) ?? "")
                + ((try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "")
            throw TestSetupError("the fake BlueZ did not say ready within 30 s\n\(log)")
        }
        return process
    }

    /// Kills the fake, as when bluetoothd dies, and returns once its name has
    /// left the bus (clients see NameOwnerChanged).
    public func stop() async throws {
        let (gone, continuation) = AsyncStream<Void>.makeStream()
        let subscription = control.subscribe(
            MatchRule(sender: "org.freedesktop.DBus", member: "NameOwnerChanged", arg0: "org.bluez")
        ) { message in
            if (try? message.arguments())?.last?.string == "" { continuation.yield() }
        }
        defer { control.unsubscribe(subscription) }
        // The AddMatch must be in place before the kill.
        _ = try await control.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetId")
        kill()
        let deadline = finishing(continuation, after: .seconds(10))
        defer { deadline.cancel() }
        for await _ in gone { return }
        throw TestSetupError("org.bluez did not leave the bus")
    }

    /// Kills the fake without waiting.
    public func kill() {
        guard let process else { return }
        process.kill()
        try? process.stdout?.close()
        self.process = nil
    }

    /// Calls a method of the fake's control interface (see fake_bluez.py).
    @discardableResult
    public func call(_ method: String, _ arguments: DBusValue...) async throws -> [DBusValue] {
        try await control.call(
            destination: "org.bluez", path: "/", interface: Self.controlInterface, member: method,
            arguments: arguments)
    }

    /// Adds a Bird peripheral on hci0 with raw characteristic values.
    @discardableResult
    public func addBird(
        address: String = "F0:0D:B1:7D:00:01", name: String = "Robin", color: String = "#FF8800",
        birdName: String? = nil, birdNameBytes: [UInt8]? = nil, alpha: String = "80", rssi: Int16 = -50,
        cached: Bool = false, visible: Bool = true
    ) async throws -> ObjectPath {
        let reply = try await call(
            "AddBird", .string(address), .string(name), .bytes(Array(color.utf8)),
            .bytes(birdNameBytes ?? Array((birdName ?? name).utf8)), .bytes(Array(alpha.utf8)), .int16(rssi), .bool(cached),
            .bool(visible))
        return reply.first?.objectPath ?? "/"
    }

    /// Adds a Bird peripheral heard by another adapter (`hci1`): a device object of its own there.
    @discardableResult
    public func addBird(
        on adapter: String, address: String = "F0:0D:B1:7D:00:01", name: String = "Robin", alpha: String = "80",
        rssi: Int16 = -50
    ) async throws -> ObjectPath {
        let reply = try await call(
            "AddBirdOn", .string(adapter), .string(address), .string(name), .bytes(Array("#FF8800".utf8)),
            .bytes(Array(name.utf8)), .bytes(Array(alpha.utf8)), .int16(rssi), .bool(false), .bool(true))
        return reply.first?.objectPath ?? "/"
    }

    /// Adds a non-Bird device on hci0.
    @discardableResult
    public func addDevice(
        address: String, name: String, uuids: [String] = ["0000180f-0000-1000-8000-00805f9b34fb"],
        rssi: Int16 = -60, cached: Bool = false, visible: Bool = true
    ) async throws -> ObjectPath {
        let reply = try await call(
            "AddDevice", .string("hci0"), .string(address), .string(name), .strings(uuids), .int16(rssi),
            .bool(cached), .bool(visible))
        return reply.first?.objectPath ?? "/"
    }

    /// Adds a device that is not a Bird on `adapter`, in range, serving one
    /// primary service with these characteristics (lower-case UUIDs; BlueZ's
    /// flags, such as "read", "notify"); those that notify have their
    /// configuration descriptor.
    @discardableResult
    public func addGattDevice(
        on adapter: String = "hci0", address: String, name: String, service: String,
        characteristics: [(uuid: String, flags: [String], value: [UInt8])], rssi: Int16 = -60
    ) async throws -> ObjectPath {
        let entries = characteristics.map { DBusValue.structure([.string($0.uuid), .strings($0.flags), .bytes($0.value)]) }
        let reply = try await call(
            "AddGattDevice", .string(adapter), .string(address), .string(name), .string(service),
            .array(element: "(sasay)", entries), .int16(rssi))
        return reply.first?.objectPath ?? "/"
    }

    /// The next call of `method` fails with `error`.
    public func failNext(_ method: String, _ error: String, _ message: String = "") async throws {
        try await call("FailNext", .string(method), .string(error), .string(message))
    }

    /// The next call of `method` is answered after `seconds` (negative: never).
    public func delayNext(_ method: String, seconds: Double) async throws {
        try await call("DelayNext", .string(method), .double(seconds))
    }

    /// Every call of `method` fails with this error (an empty name ends it).
    public func failAlways(_ method: String, _ error: String, _ message: String = "") async throws {
        try await call("FailAlways", .string(method), .string(error), .string(message))
    }

    /// Every call of `method` is answered after `seconds` (< 0: never; 0 ends it).
    public func delayAlways(_ method: String, seconds: Double) async throws {
        try await call("DelayAlways", .string(method), .double(seconds))
    }

    /// BlueZ methods called so far, as "Method /path".
    public func calls() async throws -> [String] {
        try await call("Calls").first?.stringArray ?? []
    }

    /// The fake's whole tree, straight from its GetManagedObjects.
    public func managedObjects() async throws -> DBusValue {
        let reply = try await control.call(
            destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
            member: "GetManagedObjects")
        return reply.first ?? .dictionary(key: "o", value: "a{sa{sv}}", [])
    }
}
