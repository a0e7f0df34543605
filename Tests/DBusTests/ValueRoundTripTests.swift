import DBus
import Glibc
import Testing

let sampleValues: [DBusValue] = [
    .byte(0), .byte(255), .bool(true), .bool(false),
    .int16(.min), .int16(.max), .uint16(.max), .int32(.min), .int32(.max), .uint32(.max),
    .int64(.min), .int64(.max), .uint64(.max), .double(-1.5), .double(.greatestFiniteMagnitude),
    .string(""), .string("Robin 🐦 ünïcode"), .objectPath("/"), .objectPath("/org/bluez/hci0/dev_AA_BB"),
    .signature("a{oa{sa{sv}}}"), .signature(""),
    .bytes([]), .bytes([0, 1, 2, 254, 255]), .bytes(Array(repeating: 0xAB, count: 40)),
    .strings([]), .strings(["a", "b"]),
    .array(element: "i", [.int32(1), .int32(-2)]),
    .array(element: "ay", [.bytes([1]), .bytes([])]),
    .array(element: "(sv)", [.structure([.string("k"), .variant(.uint16(7))])]),
    .propertyMap([:]),
    .propertyMap(["Name": .string("Robin"), "RSSI": .int16(-60), "UUIDs": .strings(["x"])]),
    .dictionary(key: "o", value: "a{sa{sv}}", [
        DictEntry(.objectPath("/org/bluez/hci0"), .dictionary(key: "s", value: "a{sv}", [
            DictEntry(.string("org.bluez.Adapter1"), .propertyMap(["Powered": .bool(true)]))
        ]))
    ]),
    .dictionary(key: "y", value: "ay", [DictEntry(.byte(1), .bytes([2, 3]))]),
    .dictionary(key: "q", value: "v", [DictEntry(.uint16(0x004C), .variant(.bytes([1, 2])))]),
    .structure([.int32(1), .string("two"), .structure([.double(3)])]),
    .variant(.variant(.string("nested"))),
    .variant(.structure([.bool(true), .strings(["x"])])),
]

@Suite("Values round-trip through a real bus")
struct ValueRoundTripTests {
    @Test("each value comes back equal", arguments: sampleValues)
    func roundTrip(_ value: DBusValue) async throws {
        let pair = try await EchoPair()
        let reply = try await pair.echo([value])
        #expect(reply == [value])
        #expect(reply.first?.signature == value.signature)
    }

    @Test func allValuesInOneMessage() async throws {
        let pair = try await EchoPair()
        #expect(try await pair.echo(sampleValues) == sampleValues)
    }

    @Test func emptyBody() async throws {
        let pair = try await EchoPair()
        #expect(try await pair.echo([]) == [])
    }

    @Test func unixFileDescriptorArrivesAsANewDescriptor() async throws {
        let pair = try await EchoPair()
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let reply = try await pair.echo([.unixFD(fds[1])])
        guard case .unixFD(let received) = reply.first else {
            Issue.record("expected a unix fd, got \(reply)")
            return
        }
        defer { close(received) }
        #expect(received != fds[1])
        // Writing to the received duplicate reaches the original pipe.
        var byte: UInt8 = 42
        #expect(write(received, &byte, 1) == 1)
        var back: UInt8 = 0
        #expect(read(fds[0], &back, 1) == 1)
        #expect(back == 42)
    }

    @Test("values libdbus would abort on are refused with an error", arguments: [
        DBusValue.string("nul\u{0}inside"),
        .objectPath("not/a/path"), .objectPath("/trailing/"), .objectPath("/double//slash"),
        .signature("a{"), .array(element: "s", [.int32(1)]),
        .dictionary(key: "s", value: "v", [DictEntry(.int32(1), .variant(.bool(true)))]),
        .dictionary(key: "v", value: "s", []), .structure([]),
    ])
    func invalidValuesThrow(_ value: DBusValue) async throws {
        #expect(value.invalidReason != nil)
        #expect(throws: DBusError.self) {
            try Message.methodCall(destination: "org.x", path: "/", interface: "org.x", member: "M", arguments: [value])
        }
    }

    @Test func invalidNamesThrowInsteadOfAborting() {
        #expect(throws: DBusError.self) {
            try Message.methodCall(destination: "org.x", path: "/", interface: "no dots", member: "M")
        }
        #expect(throws: DBusError.self) {
            try Message.methodCall(destination: "org.x", path: "/", interface: "org.x", member: "bad-member")
        }
        #expect(throws: DBusError.self) {
            try Message.signal(path: "//", interface: "org.x", member: "M")
        }
    }

    @Test func signatureSplitting() {
        #expect(Signature("sa{sv}as").completeTypes == ["s", "a{sv}", "as"])
        #expect(Signature("a{oa{sa{sv}}}(ia(yy))v").completeTypes == ["a{oa{sa{sv}}}", "(ia(yy))", "v"])
        #expect(Signature("a{vs}").completeTypes == nil)
        #expect(Signature("(").completeTypes == nil)
        #expect(Signature("a").completeTypes == nil)
        #expect(Signature("z").completeTypes == nil)
    }
}

@Suite("Messages in their wire form")
struct MessageWireTests {
    @Test func everySampleValueSurvivesMarshallingAndValidation() throws {
        let message = try Message.signal(path: "/wire", interface: "org.birdctl.Test", member: "All", arguments: sampleValues)
        let reread = try Message.fromWire(try message.wireBytes())
        #expect(reread.signature == message.signature)
        #expect(try reread.arguments() == sampleValues)
        #expect(reread.member == "All" && reread.path == "/wire")
    }

    @Test func bytesLibdbusRejectsAreAnErrorNotACrash() throws {
        let good = try Message.signal(path: "/wire", interface: "org.birdctl.Test", member: "One", arguments: [.string("x")])
            .wireBytes()
        var truncated = good
        truncated.removeLast(3)
        var badSignature = good
        // The body's string length now runs past the end of the message.
        badSignature[badSignature.count - 6] = 0x7F
        for bytes in [[], [0x6C], truncated, badSignature, Array(repeating: 0xFF, count: 64)] {
            #expect(throws: DBusError.self) { try Message.fromWire(bytes) }
        }
    }
}
