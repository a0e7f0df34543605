import Bird
import DBus
import Testing

@testable import BirdctlCLI

@Suite("Escaping what peers say")
struct SafeTextTests {
    /// The advertised name a stranger's phone used: clear the screen, set the
    /// window title, ring the bell.
    static let hostileName = "Ev\u{1B}[2J\u{1B}]0;pwned\u{07}il"

    @Test func controlSequencesAreShownNotObeyed() {
        #expect(SafeText.escaped(Self.hostileName) == #"Ev\x1b[2J\x1b]0;pwned\x07il"#)
    }

    @Test(arguments: [
        ("\u{00}", #"\x00"#), ("\t", #"\t"#), ("\n", #"\n"#), ("\r", #"\r"#), ("\u{7F}", #"\x7f"#),
        ("\u{80}", #"\u0080"#), ("\u{9B}", #"\u009b"#), ("\u{9F}", #"\u009f"#),
        ("\u{202A}", #"\u202a"#), ("\u{202E}", #"\u202e"#), ("\u{2066}", #"\u2066"#), ("\u{2069}", #"\u2069"#),
        ("\u{200F}", #"\u200f"#), ("\u{2028}", #"\u2028"#),
    ])
    func eachUnsafeScalarIsEscaped(_ input: String, _ expected: String) {
        #expect(SafeText.escaped("a" + input + "b") == "a" + expected + "b")
    }

    @Test(arguments: ["Robin", "Zaunkönig", "🐦 Amsel", "#FF8800", "a\\x1b stays", "\u{A0}nbsp", "\u{202F}", ""])
    func safeTextIsUnchanged(_ text: String) {
        #expect(SafeText.escaped(text) == text)
    }

    @Test func escapingTwiceChangesNothing() {
        let once = SafeText.escaped(Self.hostileName + "\u{9B}31m\u{202E}")
        #expect(SafeText.escaped(once) == once)
        #expect(!once.unicodeScalars.contains(where: SafeText.isUnsafe))
    }

    @Test func jsonEscapesTheSameScalars() {
        #expect(JSONObject.quoted(Self.hostileName) == #""Ev\u001b[2J\u001b]0;pwned\u0007il""#)
        #expect(JSONObject.quoted("x\u{9B}y\u{202E}z\u{2069}") == #""x\u009by\u202ez\u2069""#)
        #expect(JSONObject.quoted("\"\\\n\t") == #""\"\\\n\t""#)
    }

    @Test func eventsAndValuesOnATerminalAreEscaped() {
        let formatter = ReportFormatter(json: false, color: true)
        let peripheral = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01", address: "F0:0D:B1:7D:00:01", name: Self.hostileName)
        #expect(formatter.label(peripheral) == #"Ev\x1b[2J\x1b]0;pwned\x07il (F0:0D:B1:7D:00:01)"#)
        let found = formatter.eventText(.found(peripheral, rssi: -50)) ?? ""
        #expect(!found.unicodeScalars.contains(where: SafeText.isUnsafe))
        // A GATT name may carry a bidi override (it is not a control character).
        var line: [UInt8] = []
        formatter.appendReading(peripheral, .name("Rob\u{202E}in"), raw: [], notified: true, to: &line)
        #expect(String(decoding: line, as: UTF8.self).hasSuffix(#"Rob\u202ein"#))
        #expect(formatter.text(.name("Rob\u{202E}in")) == #"Rob\u202ein"#)
    }

    @Test func scanLinesAreEscaped() {
        let result = ScanResult(address: "F0:0D:B1:7D:00:01", name: Self.hostileName, rssi: -50, history: RSSIHistory())
        let text = ScanCommand.line(for: result, ReportFormatter(json: false, color: false))
        #expect(text == #"F0:0D:B1:7D:00:01  -50 dBm   Ev\x1b[2J\x1b]0;pwned\x07il"#)
        let json = ScanCommand.line(for: result, ReportFormatter(json: true, color: false))
        #expect(json.contains(#""name":"Ev\u001b[2J\u001b]0;pwned\u0007il""#))
    }
}
