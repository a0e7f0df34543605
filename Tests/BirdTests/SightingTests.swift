import Bird
import Testing

/// A device's name enters the Bird layer through `Sighting`, capped at what
/// BLE carries.
@Suite("Sighting names")
struct SightingTests {
    @Test func aNameOfUpTo248BytesIsKeptWhole() {
        let name = String(repeating: "a", count: 248)
        #expect(Sighting.capped(name) == name)
        #expect(Sighting.capped("Robin") == "Robin")
    }

    @Test func aLongerNameIsCutOnAScalarBoundaryAndMarked() {
        #expect(Sighting.capped(String(repeating: "a", count: 249)) == String(repeating: "a", count: 248) + "…")
        // 247 bytes, then a 4-byte scalar that does not fit: cut before it.
        let name = String(repeating: "a", count: 247) + "🐦🐦"
        #expect(Sighting.capped(name) == String(repeating: "a", count: 247) + "…")
        let cut = Sighting(device: "/org/bluez/hci0/dev_X", address: "F0:0D:B1:7D:00:01", name: String(repeating: "ö", count: 50_000), rssi: nil, uuids: [])
        #expect(cut.name == String(repeating: "ö", count: 124) + "…")
    }
}
