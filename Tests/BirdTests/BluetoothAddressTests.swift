import Bird
import Testing

@Suite("Bluetooth addresses, parsed once")
struct BluetoothAddressTests {
    @Test func eitherCaseReadsAsOneAddressWrittenInUpperCase() throws {
        let text = "c0:b1:2d:00:0a:Ff"
        let address = try #require(BluetoothAddress(text))
        #expect(address.description == "C0:B1:2D:00:0A:FF")
        #expect(address.value == 0xC0B1_2D00_0AFF)
        #expect(address.hexDigits == "C0B12D000AFF")
        #expect(BluetoothAddress(text.uppercased()) == address)
        let literal: BluetoothAddress = "C0:B1:2D:00:0A:FF"
        #expect(literal == address)
        #expect(BluetoothAddress(value: 0xC0B1_2D00_0AFF) == address)
        var line = Array("at ".utf8)
        address.append(to: &line)
        #expect(String(decoding: line, as: UTF8.self) == "at C0:B1:2D:00:0A:FF")
    }

    @Test(arguments: [
        "", "C0:B1:2D:00:0A", "C0:B1:2D:00:0A:FF:", "C0-B1-2D-00-0A-FF", "C0:B1:2D:00:0A:FG", "C0:B1:2D:00:0A:F",
        "C0:B1:2D:00:0AF:F", " C0:B1:2D:00:0A:F", "C0:B1:2D:00:0A:Ｆ", "C0:B1:2D:00:0A:+F",
    ])
    func anythingElseIsNoAddress(_ text: String) {
        #expect(BluetoothAddress(text) == nil)
    }

    @Test func aNumberOverFortyEightBitsIsNoAddress() {
        #expect(BluetoothAddress(value: 1 << 48) == nil)
        #expect(BluetoothAddress(value: (1 << 48) - 1)?.description == "FF:FF:FF:FF:FF:FF")
        #expect(BluetoothAddress(value: 0)?.description == "00:00:00:00:00:00")
    }

    @Test func theyOrderAsNumbers() {
        let low: BluetoothAddress = "00:00:00:00:00:FF"
        let high: BluetoothAddress = "00:00:00:00:01:00"
        #expect(low < high)
    }
}
