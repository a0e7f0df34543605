import FakeBlueZSupport
import TestProcesses
import Foundation
import Testing

// What several of this target's suites share: the fake's bird, running
// birdctl against the fake, waiting for its subscriptions.

let bird = "F0:0D:B1:7D:00:01"
let alphaUUID = FakeBlueZ.alphaUUID
let birdPath = "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01"

func parseJSON(_ line: String) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
    return try #require(object as? [String: Any], "not a JSON object: \(line)")
}

extension FakeBlueZ {
    func birdctl(_ arguments: String..., timeout: Duration = .seconds(30)) async throws -> BirdctlProcess.Finished {
        try await birdctl(arguments, timeout: timeout)
    }

    func birdctl(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> BirdctlProcess.Finished {
        try await BirdctlProcess.run(arguments, environment: environment, timeout: timeout)
    }

    func launch(_ arguments: String...) throws -> BirdctlProcess {
        try BirdctlProcess(arguments, environment: environment)
    }

    func push(_ value: String, to uuid: String = alphaUUID, address: String = bird) async throws {
        try await call("PushValue", .string(address), .string(uuid), .bytes(Array(value.utf8)))
    }
}

/// Waits until `count` characteristics with these UUIDs are notifying in the
/// fake (pushes before that are not notifications, as in BlueZ). A watch of
/// every field waits for `allFields`; `--all` with two birds for alpha twice.
func waitForNotifying(_ fake: FakeBlueZ, _ uuids: [String] = [FakeBlueZ.alphaUUID], count: Int? = nil) async throws {
    let needed = count ?? uuids.count
    let subscribed = try await poll {
        let tree = try await fake.managedObjects()
        let notifying = (tree.dictionaryEntries ?? []).filter { entry in
            let properties = entry.value.dictionaryEntries?
                .first { $0.key.string == "org.bluez.GattCharacteristic1" }?.value.propertyMap
            guard let uuid = properties?["UUID"]?.string else { return false }
            return uuids.contains(uuid) && properties?["Notifying"]?.bool == true
        }
        return notifying.count >= needed
    }
    if !subscribed { throw TestSetupError("birdctl never subscribed") }
}

let allFields = [FakeBlueZ.nameUUID, FakeBlueZ.colorUUID, FakeBlueZ.alphaUUID]
