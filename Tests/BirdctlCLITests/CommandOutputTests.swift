import Bird
import Formats
import Testing

@testable import BirdctlCLI

@Suite("read's and scan's output")
struct CommandOutputTests {
    static let robin = BirdCentral.Peripheral(path: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01", address: "F0:0D:B1:7D:00:01", name: "Robin")
    static let text = ReportFormatter(json: false, color: false)
    static let json = ReportFormatter(json: true, color: false)

    @Test func readPrintsInFieldOrderBareOrJSON() {
        let results = ReadCommand.ReadResults()
        results.peripheral = Self.robin
        results.values[.alpha] = (.alpha(percent: 80), Array("80".utf8))
        results.values[.name] = (.name("Robin"), Array("Robin".utf8))
        #expect(ReadCommand.lines(results, fields: [.alpha], bare: true, Self.text) == ["0.8"])
        #expect(ReadCommand.lines(results, fields: [.name, .alpha], bare: false, Self.text) == ["name   Robin", "alpha  0.8"])
        results.errors[.color] = BirdValueError(field: .color, raw: [0x7A], reason: "expected #RRGGBB or #RRGGBBAA")
        #expect(ReadCommand.lines(results, fields: BirdField.allCases, bare: false, Self.json) == [
            ##"{"address":"F0:0D:B1:7D:00:01","name":"Robin","alpha":0.8,"raw":{"name":"526f62696e","color":"7a","alpha":"3830"},"errors":{"color":"expected #RRGGBB or #RRGGBBAA"}}"##
        ])
    }

    @Test func scanLinesAreEscaped() {
        let result = ScanResult(address: "F0:0D:B1:7D:00:01", name: Self.hostileName, rssi: -50, history: RSSIHistory())
        let text = ScanCommand.line(for: result, ReportFormatter(json: false, color: false))
        #expect(text == #"F0:0D:B1:7D:00:01  -50 dBm   Ev\x1b[2J\x1b]0;pwned\x07il"#)
        let json = ScanCommand.line(for: result, ReportFormatter(json: true, color: false))
        #expect(json.contains(#""name":"Ev\u001b[2J\u001b]0;pwned\u0007il""#))
    }

    static let hostileName = "Ev\u{1B}[2J\u{1B}]0;pwned\u{07}il"
}
