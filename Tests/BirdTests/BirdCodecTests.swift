import Bird
import DBus
import Testing

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

@Suite("Bird values decode strictly")
struct BirdCodecTests {
    static let valid: [(BirdField, [UInt8], BirdValue)] = [
        (.name, bytes("Robin"), .name("Robin")),
        (.name, bytes("Robin\0\0"), .name("Robin")),
        (.name, bytes("Rötkehlchen 🐦"), .name("Rötkehlchen 🐦")),
        (.name, bytes(String(repeating: "a", count: 512)), .name(String(repeating: "a", count: 512))),
        (.color, bytes("#FF8800"), .color(RGBColor(red: 255, green: 136, blue: 0))),
        (.color, bytes("ff8800"), .color(RGBColor(red: 255, green: 136, blue: 0))),
        (.color, bytes("  #aBcDeF\n"), .color(RGBColor(red: 0xAB, green: 0xCD, blue: 0xEF))),
        (.color, bytes("#FF880080"), .color(RGBColor(red: 255, green: 136, blue: 0, alpha: 0x80))),
        (.color, bytes("\t#000000\r\n"), .color(RGBColor(red: 0, green: 0, blue: 0))),
        (.alpha, bytes("0"), .alpha(percent: 0)),
        (.alpha, bytes("80"), .alpha(percent: 80)),
        (.alpha, bytes("100"), .alpha(percent: 100)),
        (.alpha, bytes("007"), .alpha(percent: 7)),
        (.alpha, bytes(" 42 "), .alpha(percent: 42)),
    ]

    @Test("valid values", arguments: valid.indices)
    func decodesValid(_ index: Int) throws {
        let (field, raw, expected) = Self.valid[index]
        #expect(try BirdCodec.decode(field, raw).get() == expected)
    }

    static let invalid: [(BirdField, [UInt8], String)] = [
        (.name, [], "empty name"),
        (.name, [0, 0], "empty name"),
        (.name, [0xC3, 0x28], "not valid UTF-8"),
        (.name, [0xFF, 0xFE, 0x41], "not valid UTF-8"),
        (.name, bytes("Ro\0bin"), "name contains control characters"),
        (.name, bytes("\u{1B}[31mRed"), "name contains control characters"),
        (.name, Array(repeating: 0x61, count: 513), "longer than 512 bytes"),
        (.color, [], "expected #RRGGBB or #RRGGBBAA"),
        (.color, bytes("#GGHHII"), "not a hex colour"),
        (.color, bytes("#FFF"), "expected #RRGGBB or #RRGGBBAA"),
        (.color, bytes("#FF88"), "expected #RRGGBB or #RRGGBBAA"),
        (.color, bytes("##FF8800"), "expected #RRGGBB or #RRGGBBAA"),
        (.color, bytes("#FF 8800"), "expected #RRGGBB or #RRGGBBAA"),
        (.color, bytes("#FF8800\0"), "expected #RRGGBB or #RRGGBBAA"),
        (.color, bytes("red"), "expected #RRGGBB or #RRGGBBAA"),
        (.color, [0xFF, 0xFF, 0xFF], "not valid UTF-8"),
        (.color, Array(repeating: 0x41, count: 512), "expected #RRGGBB or #RRGGBBAA"),
        (.alpha, [], "empty"),
        (.alpha, bytes("   "), "empty"),
        (.alpha, bytes("101"), "101 is above 100"),
        (.alpha, bytes("999"), "999 is above 100"),
        (.alpha, bytes("-1"), "expected an integer 0…100"),
        (.alpha, bytes("+5"), "expected an integer 0…100"),
        (.alpha, bytes("8.5"), "expected an integer 0…100"),
        (.alpha, bytes("0x10"), "expected an integer 0…100"),
        (.alpha, bytes("1000"), "expected an integer 0…100"),
        (.alpha, bytes("5\0"), "expected an integer 0…100"),
        (.alpha, bytes("٣"), "expected an integer 0…100"),
    ]

    @Test("invalid values are errors carrying the raw bytes", arguments: invalid.indices)
    func rejectsInvalid(_ index: Int) {
        let (field, raw, reason) = Self.invalid[index]
        switch BirdCodec.decode(field, raw) {
        case .success(let value):
            Issue.record("\(field) \(raw) decoded as \(value)")
        case .failure(let error):
            #expect(error.field == field)
            #expect(error.raw == raw)
            #expect(error.reason == reason)
        }
    }

    @Test func errorsShowRawBytesAsHex() {
        let error = BirdValueError(field: .alpha, raw: bytes("101"), reason: "101 is above 100")
        #expect(error.rawHex == "313031")
        #expect(error.description == "bad alpha value: 101 is above 100 (raw: 313031)")
        #expect(BirdValueError(field: .name, raw: [], reason: "empty name").description.hasSuffix("(raw: empty)"))
    }

    @Test func encodeThenDecodeIsIdentity() throws {
        let values: [BirdValue] = [
            .name("Wren"), .color(RGBColor(red: 1, green: 2, blue: 3)),
            .color(RGBColor(red: 1, green: 2, blue: 3, alpha: 4)), .alpha(percent: 0), .alpha(percent: 55),
            .alpha(percent: 100),
        ]
        for value in values {
            #expect(try BirdCodec.decode(value.field, BirdCodec.encode(value)).get() == value)
        }
        #expect(BirdCodec.encode(.color(RGBColor(red: 255, green: 136, blue: 0))) == bytes("#FF8800"))
    }

    @Test func textForms() {
        #expect(BirdValue.alpha(percent: 80).text == "0.8")
        #expect(BirdValue.alpha(percent: 5).text == "0.05")
        #expect(BirdValue.alpha(percent: 55).text == "0.55")
        #expect(BirdValue.alpha(percent: 0).text == "0")
        #expect(BirdValue.alpha(percent: 100).text == "1")
        #expect(BirdValue.alpha(percent: 80).fraction == 0.8)
        #expect(BirdValue.color(RGBColor(red: 0xAB, green: 0, blue: 0x0F)).text == "#AB000F")
    }

    @Test func fieldsByUUIDCaseInsensitively() {
        #expect(BirdField(uuid: "B7AC06DC-09FF-40ED-B03A-55D09B080001") == .color)
        #expect(BirdField(uuid: "b7ac06dc-09ff-40ed-b03a-55d09b080002") == .name)
        #expect(BirdField(uuid: "b7ac06dc-09ff-40ed-b03a-55d09b080003") == .alpha)
        #expect(BirdField(uuid: "00002a05-0000-1000-8000-00805f9b34fb") == nil)
    }
}

@Suite("RSSI smoothing")
struct RSSIHistoryTests {
    let start = MonotonicInstant.now

    @Test func emptyHasNoAverage() {
        #expect(RSSIHistory().smoothed(at: start) == nil)
    }

    @Test func equalAgesGiveThePlainMean() {
        var history = RSSIHistory()
        history.add(-40, at: start)
        history.add(-60, at: start)
        #expect(history.smoothed(at: start) == -50)
    }

    @Test func newerSamplesWeighMore() {
        var history = RSSIHistory(halfLife: .seconds(2))
        history.add(-90, at: start)
        history.add(-50, at: start + .seconds(4))  // two half-lives later: weight 4 to 1
        #expect(history.smoothed(at: start + .seconds(4)) == -58)
    }

    @Test func keepsTheLastTwenty() {
        var history = RSSIHistory()
        for i in 0..<25 { history.add(Int16(-100 + i), at: start + .milliseconds(i)) }
        #expect(history.samples.count == 20)
        #expect(history.samples.first?.rssi == -95)
    }

    @Test func veryOldSamplesFallBackToTheMean() {
        var history = RSSIHistory(halfLife: .milliseconds(1))
        history.add(-40, at: start)
        history.add(-60, at: start)
        #expect(history.smoothed(at: start + .seconds(3600)) == -50)
    }

    /// A scan's results forget a Bird unheard for `forgetAfter`, history and
    /// all; heard again, it is announced again.
    @Test func scanResultsForgetABirdUnheardForForgetAfter() {
        var results = ScanResults(forgetAfter: .seconds(10))
        #expect(results.heard(address: "F0:0D:B1:7D:00:01", name: "Robin", rssi: -50, at: start)?.rssi == -50)
        #expect(results.heard(address: "f0:0d:b1:7d:00:01", name: nil, rssi: -60, at: start + .seconds(5)) == nil)
        #expect(results.heard(address: "F0:0D:B1:7D:00:02", name: "Wren", rssi: -70, at: start + .seconds(9)) != nil)
        #expect(results.forgetUnheard(at: start + .seconds(15)) == 0)  // Robin heard 10 s ago: not yet
        #expect(results.list(at: start + .seconds(15)).map(\.name) == ["Robin", "Wren"])
        #expect(results.forgetUnheard(at: start + .seconds(16)) == 1)
        #expect(results.list(at: start + .seconds(16)).map(\.name) == ["Wren"])
        let again = results.heard(address: "F0:0D:B1:7D:00:01", name: nil, rssi: -40, at: start + .seconds(17))
        #expect(again?.rssi == -40 && again?.history.samples.count == 1)
        #expect(results.forgetUnheard(at: start + .seconds(60)) == 2)
        #expect(results.isEmpty)
    }

    @Test func scanResultsAnnounceOnlyBirdsHeardStronglyEnough() {
        var results = ScanResults(forgetAfter: .seconds(10), minimumRSSI: -55)
        #expect(results.heard(address: "F0:0D:B1:7D:00:01", name: "Robin", rssi: -70, at: start) == nil)
        #expect(results.list(at: start).isEmpty)
        #expect(results.heard(address: "F0:0D:B1:7D:00:01", name: nil, rssi: -30, at: start)?.name == "Robin")  // mean -50
        #expect(results.count == 1)
    }

    @Test func adapterChoice() {
        let off = AdapterChoice(path: "/org/bluez/hci0", name: "hci0", powered: false)
        let on = AdapterChoice(path: "/org/bluez/hci1", name: "hci1", powered: true)
        #expect(AdapterChoice.choose(from: [off, on], named: nil) == on)
        #expect(AdapterChoice.choose(from: [off], named: nil) == off)
        #expect(AdapterChoice.choose(from: [off, on], named: "hci0") == off)
        #expect(AdapterChoice.choose(from: [off, on], named: "hci7") == nil)
        #expect(AdapterChoice.choose(from: [], named: nil) == nil)
    }
}
