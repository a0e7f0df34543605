import Bird
import DBus
import Testing

@testable import Formats

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
        // Format characters (Cf): invisible, so "Ro\u{200B}bin" would pass for "Robin".
        ("\u{200B}", #"\u200b"#), ("\u{200D}", #"\u200d"#), ("\u{FEFF}", #"\ufeff"#), ("\u{00AD}", #"\u00ad"#),
        ("\u{2060}", #"\u2060"#), ("\u{2064}", #"\u2064"#), ("\u{180E}", #"\u180e"#),
        ("\u{E0001}", #"\u{e0001}"#), ("\u{E0041}", #"\u{e0041}"#), ("\u{E007F}", #"\u{e007f}"#),
    ])
    func eachUnsafeScalarIsEscaped(_ input: String, _ expected: String) {
        #expect(SafeText.escaped("a" + input + "b") == "a" + expected + "b")
    }

    @Test(arguments: ["Robin", "Zaunkönig", "🐦 Amsel", "❤️ Rotkehlchen", "#FF8800", "\u{A0}nbsp", "\u{202F}", ""])
    func safeTextIsUnchanged(_ text: String) {
        #expect(SafeText.escaped(text) == text)
    }

    /// A backslash from the peer is doubled, so a name that spells an
    /// escape never looks like one birdctl wrote.
    @Test func aPeersBackslashIsDoubled() {
        #expect(SafeText.escaped(#"a\x1b"#) == #"a\\x1b"#)
        #expect(SafeText.escaped("a\u{1B}") == #"a\x1b"#)
        #expect(SafeText.escaped(#"C:\birds"#) == #"C:\\birds"#)
        #expect(SafeText.escaped(#"\\"#) == #"\\\\"#)
    }

    /// Every escape can be read back: the text is the peer's, exactly.
    @Test(arguments: [
        hostileName, #"a\x1b"#, "\\\u{1B}\\x", "Ro\u{200B}bin\u{E0041}", "x\u{9B}y\u{202E}z\n\t\r", #"\u{e0041}"#, "",
    ])
    func escapingIsReversible(_ text: String) {
        let once = SafeText.escaped(text)
        #expect(!once.unicodeScalars.contains(where: SafeText.isUnsafe))
        #expect(SafeText.unescaped(once) == text)
    }

    @Test func jsonEscapesTheSameScalars() {
        #expect(JSONObject.quoted(Self.hostileName) == #""Ev\u001b[2J\u001b]0;pwned\u0007il""#)
        #expect(JSONObject.quoted("x\u{9B}y\u{202E}z\u{2069}") == #""x\u009by\u202ez\u2069""#)
        #expect(JSONObject.quoted("\"\\\n\t") == #""\"\\\n\t""#)
        // Format characters too; above U+FFFF as JSON must, a surrogate pair.
        #expect(JSONObject.quoted("Ro\u{200B}bin\u{FEFF}\u{E0041}") == #""Ro\u200bbin\ufeff\udb40\udc41""#)
        // A backslash is JSON's `\\` only: a parser gets the peer's text back.
        #expect(JSONObject.quoted(#"a\x1b"#) == #""a\\x1b""#)
    }

    @Test func eventsAndValuesOnATerminalAreEscaped() {
        let formatter = ReportFormatter(json: false, color: true)
        let peripheral = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01", address: "F0:0D:B1:7D:00:01", name: Self.hostileName)
        // Events go to stderr through Diagnostics, which escapes each message once.
        #expect(formatter.label(peripheral) == "\(Self.hostileName) (F0:0D:B1:7D:00:01)")
        let found = SafeText.escaped(formatter.eventText(.found(peripheral, rssi: -50)) ?? "")
        #expect(found == #"found Ev\x1b[2J\x1b]0;pwned\x07il (F0:0D:B1:7D:00:01) at -50 dBm"#)
        // A GATT name may carry a bidi override (it is not a control character).
        var line: [UInt8] = []
        formatter.appendReading(peripheral, .name("Rob\u{202E}in"), raw: [], notified: true, to: &line)
        #expect(String(decoding: line, as: UTF8.self).hasSuffix(#"Rob\u202ein"#))
        #expect(formatter.text(.name("Rob\u{202E}in")) == #"Rob\u202ein"#)
    }
}
