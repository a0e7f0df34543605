import FuzzSupport
import Proxy

/// Any bytes as an event off the kernel's Bluetooth management channel
/// (`KernelAdvertisement.parse`), or — where the first byte says so — a
/// Device Found event whose fields the fuzzer fills in, lengths right or
/// wrong: parsed exactly when an independent reading of the layout says it
/// is an LE device's Device Found whose lengths add up; then the address,
/// its type, the adapter and the RSSI are the event's, and the data is the
/// event's AD bytes whole if they fit in 512, else their longest run of whole
/// AD structures that does.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKernelAdvertisements(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(Array(UnsafeBufferPointer(start: data, count: size)))
    let event = input.bool() ? input.rest() : deviceFound(&input)
    let parsed = KernelAdvertisement.parse(event)
    guard let expected = expectation(event) else {
        require(parsed == nil, "parsed what is no LE Device Found: \(event)")
        return 0
    }
    guard let (adapter, advertisement) = parsed else {
        require(false, "refused an LE Device Found: \(event)")
        return 0
    }
    require(adapter == expected.adapter && advertisement.address == expected.address, "\(adapter) \(advertisement.address)")
    require(advertisement.addressType == expected.addressType && advertisement.rssi == expected.rssi)
    require(Array(advertisement.data) == expected.data, "data \(Array(advertisement.data)), expected \(expected.data)")
    return 0
}

/// A Device Found event from the fuzzer's fields; its two lengths right unless it says otherwise.
private func deviceFound(_ input: inout FuzzInput) -> [UInt8] {
    let code = input.bool() ? 0x0012 : UInt16(input.integer(2))
    let index = UInt16(input.integer(2))
    let fields = input.bytes(upTo: 6) + [input.pick([1, 2, 0], else: { $0.byte() })] + input.bytes(upTo: 5)
    let lengthsRight = input.byte() & 0x0F != 0
    let said = (header: lengthsRight ? nil : UInt16(input.integer(2)), data: lengthsRight ? nil : UInt16(input.integer(2)))
    let data = input.rest()
    let body = fields + word(said.data ?? UInt16(truncatingIfNeeded: data.count)) + data
    return word(code) + word(index) + word(said.header ?? UInt16(truncatingIfNeeded: body.count)) + body
}

private func word(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }

/// What the event must parse as, read from the layout (mgmt-api.txt's Device Found) without the parser.
private func expectation(_ event: [UInt8]) -> (adapter: UInt16, address: UInt64, addressType: UInt32, rssi: Int32, data: [UInt8])? {
    func at(_ offset: Int) -> Int { Int(event[offset]) | Int(event[offset + 1]) << 8 }
    guard event.count >= 20, at(0) == 0x12, at(4) == event.count - 6, event[12] == 1 || event[12] == 2,
        at(18) == event.count - 20
    else { return nil }
    var address: UInt64 = 0
    for byte in event[6..<12].reversed() { address = address << 8 | UInt64(byte) }
    let all = Array(event[20...])
    var kept = all
    if all.count > 512 {
        // Whole structures, each its length byte and that many more, while they fit.
        var end = 0
        while end < all.count, end + 1 + Int(all[end]) <= 512 { end += 1 + Int(all[end]) }
        kept = Array(all[..<end])
    }
    return (UInt16(at(2)), address, event[12] == 2 ? 1 : 0, Int32(Int8(bitPattern: event[13])), kept)
}
