import Bird
import DBus
import Glibc
import Testing

@testable import Formats

@Suite("Formatting readings and events")
struct FormattingTests {
    static let robin = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01", address: "F0:0D:B1:7D:00:01", name: "Robin")
    static let text = ReportFormatter(json: false, color: false)
    static let json = ReportFormatter(json: true, color: false)

    /// The line without its leading time.
    static func untimed(_ line: String) -> Substring { line.drop { $0 != " " } }

    @Test func aReadingAsText() {
        let line = Self.text.reading(Self.robin, .alpha(percent: 80), raw: Array("80".utf8), notified: true)
        #expect(Self.untimed(line) == "  F0:0D:B1:7D:00:01  alpha  0.8")
    }

    @Test func aReadingAsJSON() {
        let line = Self.json.reading(Self.robin, .color(RGBColor(red: 255, green: 136, blue: 0)), raw: Array("#FF8800".utf8), notified: false)
        #expect(line.hasPrefix(#"{"time":""#))
        #expect(line.hasSuffix(##","event":"reading","address":"F0:0D:B1:7D:00:01","field":"color","value":"#FF8800","raw":"23464638383030","source":"read"}"##))
    }

    @Test(arguments: ["Zaunkönig", "🐦 Amsel", "plain ASCII", ""])
    func jsonKeepsUTF8AsItIs(_ name: String) {
        #expect(JSONObject.quoted(name) == "\"" + name + "\"")
    }

    /// The date-time part is made once a second: it must follow the clock
    /// across a second's change, in UTC for JSON and local time for people.
    @Test func timestampsFollowTheClock() async throws {
        for _ in 0..<2 {
            let before = time(nil)
            let iso = Timestamp.iso8601()
            let clock = Timestamp.clock()
            let after = time(nil)
            #expect(iso.utf8.count == 24 && iso.hasSuffix("Z"))
            #expect(clock.utf8.count == 12)
            let utc = Set([before, after].map { Self.formatted($0, "%Y-%m-%dT%H:%M:%S.", gmtime_r) })
            let local = Set([before, after].map { Self.formatted($0, "%H:%M:%S.", localtime_r) })
            #expect(utc.contains(String(iso.prefix(20))))
            #expect(local.contains(String(clock.prefix(9))))
            try await Task.sleep(for: .milliseconds(1100))
        }
    }

    static func formatted(_ seconds: time_t, _ format: String, _ split: (UnsafePointer<time_t>, UnsafeMutablePointer<tm>) -> UnsafeMutablePointer<tm>?) -> String {
        var seconds = seconds
        var parts = tm()
        _ = split(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, format, &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    @Test func alphaIsANumberInJSON() {
        #expect(Self.json.reading(Self.robin, .alpha(percent: 5), raw: [], notified: true).contains(#""value":0.05,"#))
    }

    @Test func aBadValueAsJSONAndText() {
        let error = BirdValueError(field: .alpha, raw: Array("101".utf8), reason: "101 is above 100")
        #expect(Self.json.badValueLine(Self.robin, error).hasSuffix(
            #""event":"bad_value","address":"F0:0D:B1:7D:00:01","field":"alpha","error":"101 is above 100","raw":"313031"}"#))
        #expect(Self.text.badValueText(Self.robin, error) == "bad alpha value: 101 is above 100 (raw: 313031) from F0:0D:B1:7D:00:01")
    }

    @Test func eventsGoToJSONOrToStderrText() {
        #expect(Self.json.eventLine(.found(Self.robin, rssi: -50))?.hasSuffix(
            #""event":"found","address":"F0:0D:B1:7D:00:01","name":"Robin","rssi":-50}"#) == true)
        #expect(Self.text.eventLine(.found(Self.robin, rssi: -50)) == nil)
        #expect(Self.text.eventText(.found(Self.robin, rssi: -50)) == "found Robin (F0:0D:B1:7D:00:01) at -50 dBm")
        #expect(Self.text.eventText(.disconnected(Self.robin)) == "disconnected from Robin (F0:0D:B1:7D:00:01)")
    }

    /// One bird given up in `watch --all` is named; the command's own failure is not a bird's.
    @Test func aBirdGivenUpIsNamed() {
        #expect(Self.json.eventLine(.gaveUp(.connectionLost, bird: Self.robin))?.hasSuffix(
            #""event":"error","address":"F0:0D:B1:7D:00:01","message":"the connection was lost"}"#) == true)
        #expect(Self.text.eventText(.gaveUp(.connectionLost, bird: Self.robin)) == "F0:0D:B1:7D:00:01: the connection was lost")
        #expect(Self.json.eventLine(.gaveUp(.connectionLost))?.hasSuffix(
            #""event":"error","message":"the connection was lost"}"#) == true)
    }

    /// A link limit learned, and one forgotten (null: not known), in both forms.
    @Test func linksEventsSayALimitOrNone() {
        #expect(Self.json.eventLine(.links(adapter: "hci0", used: 2, limit: 2, learned: true))?.hasSuffix(
            #""event":"links","adapter":"hci0","used":2,"limit":2,"limit_learned":true}"#) == true)
        #expect(Self.json.eventLine(.links(adapter: "hci0", used: 4, limit: nil, learned: false))?.hasSuffix(
            #""event":"links","adapter":"hci0","used":4,"limit":null,"limit_learned":false}"#) == true)
        #expect(Self.text.eventText(.links(adapter: "hci0", used: 4, limit: nil, learned: false))
            == "hci0 holds 4 links; its limit is not known (the one learned no longer holds)")
        #expect(Self.json.eventLine(.held(Self.robin))?.hasSuffix(
            #""event":"held","address":"F0:0D:B1:7D:00:01"}"#) == true)
    }

    /// The discovery watchdog's event: a restart, and a stall that powers the adapter off and on.
    @Test func discoveryDeafEventsSayWhatIsDone() {
        #expect(Self.json.eventLine(.discoveryDeaf(adapter: "hci0", silentFor: .seconds(60), stalled: false, powerCycle: false))?.hasSuffix(
            #""event":"discovery-deaf","adapter":"hci0","silent_s":60,"stalled":false,"action":"restart"}"#) == true)
        #expect(Self.text.eventText(.discoveryDeaf(adapter: "hci1", silentFor: .seconds(120), stalled: true, powerCycle: true))
            == "hci1 heard no Bird for 120 s while one is looked for, restarting its discovery did not help: powering it off and on")
    }

    @Test func colourOnlyWhenAskedFor() {
        let plain = Self.text.styled(.color(RGBColor(red: 1, green: 2, blue: 3)))
        #expect(plain == "#010203")
        let coloured = ReportFormatter(json: false, color: true).styled(.color(RGBColor(red: 1, green: 2, blue: 3)))
        #expect(coloured.hasPrefix("\u{1B}[38;2;1;2;3m") && coloured.hasSuffix(" #010203"))
    }
}

extension ReportFormatter {
    /// One `watch` line as text: what `appendReading` adds to the output buffer.
    func reading(_ peripheral: Peripheral, _ value: BirdValue, raw: [UInt8], notified: Bool) -> String {
        var line: [UInt8] = []
        appendReading(peripheral, value, raw: raw, notified: notified, to: &line)
        return String(decoding: line, as: UTF8.self)
    }
}
