import Bird
import SwiftProtobuf
import Testing

@testable import Proxy

@Suite("A proxy's session, through messages")
struct ProxySessionTests {
    static let identity = ProxySession.Identity(
        name: "birdctl-kitchen", friendlyName: "birdctl kitchen", macAddress: "00:AA:01:00:00:00", birdctlVersion: "0.2.0")

    static func message(_ message: some ESPHomeMessage) -> (UInt32, [UInt8]) {
        (type(of: message).messageType, try! message.serializedBytes())
    }

    /// The one message sent, decoded as `T`.
    static func sent<T: ESPHomeMessage>(_ actions: [ProxySession.Action], as _: T.Type) throws -> T {
        guard actions.count >= 1, case .send(let type, let payload) = actions[0], type == T.messageType else {
            throw Failure("expected a \(T.self), got \(actions)")
        }
        return try T(serializedBytes: payload)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func greeted() -> ProxySession {
        var session = ProxySession(identity)
        let (type, payload) = message(HelloRequest.with { $0.clientInfo = "Home Assistant 2024.3.3"; $0.apiVersionMajor = 1; $0.apiVersionMinor = 9 })
        _ = session.received(type: type, payload: payload)
        return session
    }

    @Test func helloIsAnsweredWithVersionOnePointNineAndTheName() throws {
        var session = ProxySession(Self.identity)
        let (type, payload) = Self.message(HelloRequest.with { $0.apiVersionMajor = 1; $0.apiVersionMinor = 9 })
        let hello = try Self.sent(session.received(type: type, payload: payload), as: HelloResponse.self)
        #expect(hello.apiVersionMajor == 1 && hello.apiVersionMinor == 9)
        #expect(hello.name == "birdctl-kitchen" && hello.serverInfo == "birdctl 0.2.0")
        #expect(session.greeted)
    }

    @Test func anythingBeforeHelloEndsTheSession() {
        var session = ProxySession(Self.identity)
        let (type, payload) = Self.message(DeviceInfoRequest())
        #expect(session.received(type: type, payload: payload) == [.close("a message of type 9 before Hello")])
    }

    @Test func deviceInfoSaysAProxyOfRawAdvertisements() throws {
        var session = Self.greeted()
        let (type, payload) = Self.message(DeviceInfoRequest())
        let info = try Self.sent(session.received(type: type, payload: payload), as: DeviceInfoResponse.self)
        #expect(info.name == "birdctl-kitchen" && info.friendlyName == "birdctl kitchen")
        #expect(info.macAddress == "00:AA:01:00:00:00" && info.esphomeVersion == "2024.3.0")
        #expect(info.bluetoothProxyFeatureFlags == 63)
        #expect(!info.usesPassword)
    }

    @Test func connectPingListAndDisconnectAreAnswered() throws {
        var session = Self.greeted()
        var (type, payload) = Self.message(ConnectRequest())
        #expect(try !Self.sent(session.received(type: type, payload: payload), as: ConnectResponse.self).invalidPassword)
        (type, payload) = Self.message(PingRequest())
        _ = try Self.sent(session.received(type: type, payload: payload), as: PingResponse.self)
        (type, payload) = Self.message(ListEntitiesRequest())
        _ = try Self.sent(session.received(type: type, payload: payload), as: ListEntitiesDoneResponse.self)
        (type, payload) = Self.message(SubscribeStatesRequest())
        #expect(session.received(type: type, payload: payload) == [])
        (type, payload) = Self.message(DisconnectRequest())
        let goodbye = session.received(type: type, payload: payload)
        _ = try Self.sent(goodbye, as: DisconnectResponse.self)
        #expect(goodbye.last == .end)
    }

    @Test func rawAdvertisementsAndSlotsAreSubscribedTo() throws {
        var session = Self.greeted()
        var (type, payload) = Self.message(SubscribeBluetoothLEAdvertisementsRequest.with { $0.flags = 1 })
        // What is heard now goes to it first (BlueZ signals a device again only when it changes).
        #expect(session.received(type: type, payload: payload) == [.sendDevicesHeard])
        #expect(session.advertisementsWanted)
        (type, payload) = Self.message(UnsubscribeBluetoothLEAdvertisementsRequest())
        _ = session.received(type: type, payload: payload)
        #expect(!session.advertisementsWanted)
        (type, payload) = Self.message(SubscribeBluetoothConnectionsFreeRequest())
        #expect(session.received(type: type, payload: payload) == [.sendSlots] && session.slotsWanted)
    }

    /// The legacy (parsed) advertisements were left out of ESPHome: a client
    /// asking for them is told why it gets nothing.
    @Test func legacyAdvertisementsAreRefused() {
        var session = Self.greeted()
        let (type, payload) = Self.message(SubscribeBluetoothLEAdvertisementsRequest())
        #expect(session.received(type: type, payload: payload).last?.isClose == true)
        #expect(!session.advertisementsWanted)
    }

    @Test func bytesThatDoNotDecodeEndTheSession() {
        var session = Self.greeted()
        #expect(session.received(type: DeviceInfoRequest.messageType, payload: [0xFF, 0xFF, 0xFF]).last?.isClose == true)
    }
}

extension ProxySession.Action {
    var isClose: Bool { if case .close = self { true } else { false } }
}
