import Bird
import Testing

@testable import Proxy

@Suite("Advertisements rebuilt from what BlueZ keeps")
struct RebuiltAdvertisementTests {
    @Test func aSensorsNamePowerUUIDsAndDataAreOneStructureEach() {
        let thermometer = HeardDevice(
            address: "A4:C1:38:00:00:01", randomAddress: true, name: "ATC", rssi: -61, txPower: -4,
            uuids: ["0000fcd2-0000-1000-8000-00805f9b34fb", "c0b1d000-0000-4000-8000-00805f9b34fb"],
            manufacturerData: [0x0499: [0x05, 0x10]], serviceData: ["0000fcd2-0000-1000-8000-00805f9b34fb": [0x40, 0x02, 0xC4, 0x09]])
        let advertisement = RebuiltAdvertisement.of(thermometer)
        #expect(advertisement.address == 0xA4C1_3800_0001 && advertisement.rssi == -61 && advertisement.addressType == 1)
        let expected: [UInt8] = [4, 0x09] + Array("ATC".utf8) + [2, 0x0A, 0xFC]
            + [3, 0x03, 0xD2, 0xFC]
            + [17, 0x07] + [0xFB, 0x34, 0x9B, 0x5F, 0x80, 0x00, 0x00, 0x80, 0x00, 0x40, 0x00, 0x00, 0x00, 0xD0, 0xB1, 0xC0]
            + [5, 0xFF, 0x99, 0x04, 0x05, 0x10]
            + [7, 0x16, 0xD2, 0xFC, 0x40, 0x02, 0xC4, 0x09]
        #expect(Array(advertisement.data) == expected)
    }

    @Test func aDeviceWithoutRSSIIsTheWeakestAndPublicByDefault() {
        let quiet = RebuiltAdvertisement.of(HeardDevice(address: "00:11:22:33:44:55", rssi: nil))
        #expect(quiet.rssi == -127 && quiet.addressType == 0 && quiet.data.isEmpty)
    }

    /// A peer's data is bounded: a name over an AD structure is cut and
    /// marked shortened, and what does not fit in the bound is left out.
    @Test func whatAPeerSendsIsBounded() {
        let long = String(repeating: "n", count: 300)
        let data = Array(RebuiltAdvertisement.of(HeardDevice(address: "00:11:22:33:44:55", name: long, rssi: -50)).data)
        #expect(data.count == 250 && data[0] == 249 && data[1] == 0x08)
        var flood: [UInt16: [UInt8]] = [:]
        for company in 0..<40 { flood[UInt16(company)] = Array(repeating: 1, count: 40) }
        let many = RebuiltAdvertisement.of(HeardDevice(address: "00:11:22:33:44:55", rssi: -50, manufacturerData: flood))
        #expect(many.data.count <= RebuiltAdvertisement.maximumBytes && many.data.count > 400)
        #expect(RebuiltAdvertisement.uuidBytes("not a uuid") == nil)
    }

    /// UUIDs as BlueZ writes them (either case): 16-bit ones on the base
    /// UUID in two bytes, others in sixteen, little-endian; anything else none.
    @Test func uuidsAsADWritesThem() {
        #expect(RebuiltAdvertisement.uuidBytes("0000180F-0000-1000-8000-00805F9B34FB") == [0x0F, 0x18])
        #expect(RebuiltAdvertisement.uuidBytes("0001180f-0000-1000-8000-00805f9b34fb")?.count == 16)
        #expect(RebuiltAdvertisement.uuidBytes("0000180f-0000-1000-8000-00805f9b34fc")?.first == 0xFC)
        for bad in ["", "0000180f-0000-1000-8000-00805f9b34f", "0000180f-0000-1000-8000-00805f9b34fbb",
            "0000180g-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb00"]
        {
            #expect(RebuiltAdvertisement.uuidBytes(bad) == nil, "\(bad)")
        }
    }
}
