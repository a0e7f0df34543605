import BlueZ
import FakeBlueZSupport
import DBus

// What several of this target's suites share: the fake's adapter and bird.

let hci0: ObjectPath = "/org/bluez/hci0"
let birdAddress = "F0:0D:B1:7D:00:01"
let birdPath: ObjectPath = "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01"

extension ClientUnderTest {
    /// Connects the bird and waits until its services are resolved.
    func connectBird() async throws {
        try await perform(.connect(device: birdPath))
        try await next { if case .deviceChanged(let d, _) = $0 { d.path == birdPath && d.servicesResolved } else { false } }
    }

    func characteristic(_ uuid: String) async -> GattCharacteristic? {
        await client.snapshot().characteristics(under: birdPath).first { $0.uuid == uuid }
    }
}
