import Bird
import BlueZ
import DBus
import SwiftProtobuf
import Testing

@testable import Proxy

@Suite("Home Assistant's links through the proxy, through events")
struct ProxiedLinksTests {
    static let sensor: BluetoothAddress = "C0:FF:EE:00:00:01"
    static let other: BluetoothAddress = "C0:FF:EE:00:00:02"

    static func connect(_ address: BluetoothAddress, _ type: BluetoothDeviceRequestType = .connectV3WithoutCache) -> BluetoothDeviceRequest {
        var request = BluetoothDeviceRequest()
        request.address = address.value
        request.requestType = type
        request.hasAddressType_p = true
        request.addressType = 1
        return request
    }

    /// The messages sent to `client`, decoded as `T`.
    static func sent<T: ESPHomeMessage>(_ actions: [ProxiedLinks.Action], to client: ProxiedLinks.Client, as _: T.Type) throws -> [T] {
        try actions.compactMap { action in
            guard case .send(let to, let type, let payload) = action, to == client, type == T.messageType else { return nil }
            return try T(serializedBytes: payload)
        }
    }

    /// A link up for client 1.
    static func linked() -> ProxiedLinks {
        var links = ProxiedLinks()
        _ = links.requested(1, connect(sensor), free: true)
        _ = links.linked(sensor, mtu: 247)
        return links
    }

    @Test func aConnectIsAnsweredOnceTheServicesAreResolved() throws {
        var links = ProxiedLinks()
        #expect(links.requested(1, Self.connect(Self.sensor), free: true) == [.connect(Self.sensor, randomAddress: true)])
        #expect(links.linkCount == 1)
        let answer = try Self.sent(links.linked(Self.sensor, mtu: 247), to: 1, as: BluetoothDeviceConnectionResponse.self)
        #expect(answer.map(\.connected) == [true] && answer.first?.mtu == 247 && answer.first?.error == 0)
        // Asked again: it is up.
        #expect(try Self.sent(links.requested(1, Self.connect(Self.sensor), free: false), to: 1, as: BluetoothDeviceConnectionResponse.self)
            .map(\.connected) == [true])
    }

    /// No slot: ESPHome's answer (not connected, no error), and nothing tried.
    @Test func noSlotMeansNoAttempt() throws {
        var links = ProxiedLinks()
        let actions = links.requested(1, Self.connect(Self.sensor), free: false)
        let answer = try Self.sent(actions, to: 1, as: BluetoothDeviceConnectionResponse.self)
        #expect(answer.map(\.connected) == [false] && answer.first?.error == 0 && actions.count == 1)
        #expect(links.linkCount == 0)
    }

    @Test func aFailedConnectSaysWhyAndFreesTheSlot() throws {
        var links = ProxiedLinks()
        _ = links.requested(1, Self.connect(Self.sensor), free: true)
        let answer = try Self.sent(
            links.unlinked(Self.sensor, failure: BlueZError(.failed, message: "le-connection-abort-by-local")), to: 1,
            as: BluetoothDeviceConnectionResponse.self)
        #expect(answer.map(\.connected) == [false] && answer.first?.error == 0x3E)
        #expect(links.linkCount == 0)
    }

    /// A device is one client's: another is refused, and cannot undo it.
    @Test func aLinkIsOneClients() throws {
        var links = Self.linked()
        let refused = try Self.sent(links.requested(2, Self.connect(Self.sensor), free: true), to: 2, as: BluetoothDeviceConnectionResponse.self)
        #expect(refused.first?.connected == false && refused.first?.error == ProxiedLinks.linkedElsewhere)
        let disconnect = Self.connect(Self.sensor, .disconnect)
        #expect(!links.requested(2, disconnect, free: true).contains(.disconnect(Self.sensor)))
        #expect(links.requested(1, disconnect, free: true) == [.disconnect(Self.sensor)])
        let down = try Self.sent(links.unlinked(Self.sensor), to: 1, as: BluetoothDeviceConnectionResponse.self)
        #expect(down.map(\.connected) == [false] && down.first?.error == 0)
    }

    @Test func aClientGoneTakesItsLinks() {
        var links = Self.linked()
        _ = links.requested(2, Self.connect(Self.other), free: true)
        #expect(links.gone(1) == [.disconnect(Self.sensor)])
        #expect(links.addresses == [Self.other])
        // The link's end, reported later, is nobody's to be told.
        #expect(links.unlinked(Self.sensor).isEmpty)
    }

    @Test func gattRequestsGoOnlyOnALinkUpOfTheClients() throws {
        var links = Self.linked()
        #expect(links.requested(1, Self.sensor.value, .read(handle: 42)) == [.perform(1, Self.sensor, .read(handle: 42))])
        let notLinked = try Self.sent(links.requested(2, Self.sensor.value, .read(handle: 42)), to: 2, as: BluetoothGATTErrorResponse.self)
        #expect(notLinked.first?.error == -1 && notLinked.first?.handle == 42)
        let read = try Self.sent(
            links.performed(1, Self.sensor, .read(handle: 42), .success(.bytes([57]))), to: 1, as: BluetoothGATTReadResponse.self)
        #expect(read.first?.handle == 42 && read.first?.data == .init([57]))
        _ = links.requested(1, Self.sensor.value, .write(handle: 42, data: [1], response: true))
        let refused = try Self.sent(
            links.performed(1, Self.sensor, .write(handle: 42, data: [1], response: true), .failure(BlueZError(.notPermitted))), to: 1,
            as: BluetoothGATTErrorResponse.self)
        #expect(refused.first?.error == 3)
    }

    /// A write without response is not answered; one with is.
    @Test func writesAreAnsweredOnlyWhenAsked() throws {
        var links = Self.linked()
        #expect(links.performed(1, Self.sensor, .write(handle: 7, data: [], response: false), .success(.done)).isEmpty)
        #expect(try Self.sent(links.performed(1, Self.sensor, .write(handle: 7, data: [], response: true), .success(.done)), to: 1,
            as: BluetoothGATTWriteResponse.self).count == 1)
    }

    /// Services go one per message, then done.
    @Test func servicesOnePerMessage() throws {
        var links = Self.linked()
        var first = BluetoothGATTService()
        first.handle = 1
        var second = BluetoothGATTService()
        second.handle = 10
        let actions = links.performed(1, Self.sensor, .services, .success(.services([first, second])))
        #expect(try Self.sent(actions, to: 1, as: BluetoothGATTGetServicesResponse.self).map { $0.services.map(\.handle) } == [[1], [10]])
        #expect(try Self.sent(actions, to: 1, as: BluetoothGATTGetServicesDoneResponse.self).count == 1)
    }

    @Test func pendingRequestsAreBounded() throws {
        var links = Self.linked()
        for n in 0..<ProxiedLinks.maximumPending {
            #expect(links.requested(1, Self.sensor.value, .read(handle: UInt32(n))) == [.perform(1, Self.sensor, .read(handle: UInt32(n)))])
        }
        let over = try Self.sent(links.requested(1, Self.sensor.value, .read(handle: 99)), to: 1, as: BluetoothGATTErrorResponse.self)
        #expect(over.first?.error == ProxiedLinks.busy)
        _ = links.performed(1, Self.sensor, .read(handle: 0), .success(.bytes([])))
        #expect(links.requested(1, Self.sensor.value, .read(handle: 99)) == [.perform(1, Self.sensor, .read(handle: 99))])
    }

    @Test func notificationsGoToTheLinksClient() throws {
        let links = Self.linked()
        let data = try Self.sent(links.notified(Self.sensor, handle: 42, [1, 2]), to: 1, as: BluetoothGATTNotifyDataResponse.self)
        #expect(data.first?.handle == 42 && data.first?.data == .init([1, 2]))
        #expect(links.notified(Self.other, handle: 42, [1]).isEmpty)
    }

    /// Slots are told to who asked, at once and at each change only.
    @Test func slotsAreToldWhenTheyChange() throws {
        var links = ProxiedLinks()
        let first = try Self.sent(links.slotsWanted(by: 1, free: 2, limit: 3), to: 1, as: BluetoothConnectionsFreeResponse.self)
        #expect(first.map { [$0.free, $0.limit] } == [[2, 3]])
        #expect(try Self.sent(links.slots(free: 1, limit: 3), to: 1, as: BluetoothConnectionsFreeResponse.self).map(\.free) == [1])
        #expect(links.slots(free: 1, limit: 3).isEmpty)
        _ = links.gone(1)
        #expect(links.slots(free: 0, limit: 3).isEmpty)
    }

    /// Pairing, unpairing and clearing the cache: of a device the client
    /// has linked, each answered with its own response.
    @Test func changesAreMadeOnTheClientsLinkAndAnswered() throws {
        var links = Self.linked()
        #expect(links.requested(1, Self.connect(Self.sensor, .pair), free: false) == [.change(1, Self.sensor, .pair)])
        let paired = try Self.sent(links.changed(1, Self.sensor, .pair, .success(())), to: 1, as: BluetoothDevicePairingResponse.self)
        #expect(paired.map(\.paired) == [true] && paired.first?.error == 0 && paired.first?.address == Self.sensor.value)
        let refused = try Self.sent(
            links.changed(1, Self.sensor, .pair, .failure(BlueZError(DBusError("org.bluez.Error.AuthenticationRejected")))), to: 1,
            as: BluetoothDevicePairingResponse.self)
        #expect(refused.map(\.paired) == [false] && refused.first?.error == 5)

        #expect(links.requested(1, Self.connect(Self.sensor, .clearCache), free: false) == [.change(1, Self.sensor, .clearCache)])
        let kept = try Self.sent(
            links.changed(1, Self.sensor, .clearCache, .failure(BlueZError(.notSupported))), to: 1, as: BluetoothDeviceClearCacheResponse.self)
        #expect(kept.map(\.success) == [false] && kept.first?.error == ProxiedLinks.notSupported)

        #expect(links.requested(1, Self.connect(Self.sensor, .unpair), free: false) == [.change(1, Self.sensor, .unpair)])
        // Unpairing undoes the link: its end is said after the answer, the slot free at once.
        #expect(links.unlinked(Self.sensor).isEmpty && links.linkCount == 0)
        let answered = links.changed(1, Self.sensor, .unpair, .success(()))
        #expect(answered.count == 2)
        #expect(try Self.sent(Array(answered.prefix(1)), to: 1, as: BluetoothDeviceUnpairingResponse.self).map(\.success) == [true])
        #expect(try Self.sent(Array(answered.suffix(1)), to: 1, as: BluetoothDeviceConnectionResponse.self).map(\.connected) == [false])
    }

    /// A request for the device while an end is held for the unpairing's
    /// answer: the end is said first, once.
    @Test func anEndHeldForAnUnpairingIsSaidOnce() throws {
        var links = Self.linked()
        _ = links.requested(1, Self.connect(Self.sensor, .unpair), free: false)
        _ = links.unlinked(Self.sensor)
        let disconnect = links.requested(1, Self.connect(Self.sensor, .disconnect), free: false)
        #expect(try Self.sent(disconnect, to: 1, as: BluetoothDeviceConnectionResponse.self).map(\.connected) == [false, false])
        let answered = links.changed(1, Self.sensor, .unpair, .success(()))
        #expect(answered.count == 1)
        #expect(try Self.sent(answered, to: 1, as: BluetoothDeviceUnpairingResponse.self).count == 1)
    }

    /// How connects ended, for the health page: linked, failed, no slot.
    @Test func connectsAreCountedByHowTheyEnded() {
        var links = Self.linked()
        _ = links.requested(2, Self.connect(Self.other), free: false)
        _ = links.requested(2, Self.connect(Self.other), free: true)
        _ = links.unlinked(Self.other, failure: BlueZError(.timeout))
        _ = links.unlinked(Self.sensor)
        #expect(links.connectsEnded == [.linked: 1, .failed: 1, .noSlot: 1])
    }

    /// Another client's device, or none: answered as not connected, nothing done.
    @Test func changesNeedTheClientsOwnLink() throws {
        var links = Self.linked()
        let theirs = links.requested(2, Self.connect(Self.sensor, .unpair), free: true)
        #expect(try Self.sent(theirs, to: 2, as: BluetoothDeviceUnpairingResponse.self).map(\.error) == [ProxiedLinks.notConnected])
        #expect(theirs.count == 1)
        let none = links.requested(1, Self.connect(Self.other, .pair), free: true)
        #expect(try Self.sent(none, to: 1, as: BluetoothDevicePairingResponse.self).map(\.paired) == [false])
        #expect(none.count == 1)
    }
}
