import Bird
import BlueZ
import SwiftProtobuf

/// Home Assistant's connections through the proxy: which client holds a
/// link to which device, where each link stands, the GATT requests out on
/// it, and the free slots each client is told of. A pure machine: the
/// server's Bluetooth side performs its actions and reports their outcomes.
///
/// The rules: a device is linked for one client at a time; a connect is
/// answered (BluetoothDeviceConnectionResponse) when its services are
/// resolved, or with the failure; a link lost, disconnected or given up is
/// said to its client at once and its slot is free again; a client gone
/// takes its links with it. A client has at most `maximumPending` GATT
/// requests out; more are answered with an error. Pairing, unpairing and
/// clearing the cache are asked of a device the client has linked (as
/// bleak-esphome asks them) and always answered.
public struct ProxiedLinks: Sendable {
    public typealias Client = Int

    /// A GATT operation on a linked device.
    public enum Operation: Equatable, Sendable {
        case services
        case read(handle: UInt32)
        case write(handle: UInt32, data: [UInt8], response: Bool)
        case readDescriptor(handle: UInt32)
        case writeDescriptor(handle: UInt32, data: [UInt8])
        case notify(handle: UInt32, enable: Bool)

        var handle: UInt32 {
            switch self {
            case .services: 0
            case .read(let handle), .write(let handle, _, _), .readDescriptor(let handle), .writeDescriptor(let handle, _),
                .notify(let handle, _):
                handle
            }
        }
    }

    /// What a client may change of a device it has linked.
    public enum DeviceChange: Equatable, Sendable {
        case pair
        case unpair
        case clearCache
    }

    /// What an operation gave: bytes read, services, or nothing (written, notifying).
    public enum Outcome: Equatable, Sendable {
        case done
        case bytes([UInt8])
        case services([BluetoothGATTService])
    }

    public enum Action: Equatable, Sendable {
        case send(Client, type: UInt32, payload: [UInt8])
        /// Connect the device (through the scheduler's gate, on the adapter that hears it best).
        case connect(BluetoothAddress, randomAddress: Bool?)
        case disconnect(BluetoothAddress)
        /// Carry out a GATT operation of `Client`'s on the linked device.
        case perform(Client, BluetoothAddress, Operation)
        /// Pair, unpair or clear the cache of `Client`'s linked device.
        case change(Client, BluetoothAddress, DeviceChange)
    }

    enum Phase: Equatable, Sendable {
        case connecting
        case up(mtu: UInt32)
        case disconnecting
    }

    struct Link: Equatable, Sendable {
        var client: Client
        var phase: Phase
        /// An unpairing is out: it ends the link (BlueZ forgets the device).
        var unpairing = false
    }

    public static let maximumPending = 16

    /// How the connects asked for ended, for the health page.
    public enum ConnectEnd: String, Sendable, CaseIterable {
        case linked, failed
        /// Refused at once: no slot was free.
        case noSlot = "no_slot"
    }
    public private(set) var connectsEnded: [ConnectEnd: Int] = [:]

    private(set) var links: [BluetoothAddress: Link] = [:]
    /// The end of a link that went while its unpairing was out, said after
    /// the unpairing's answer (aioesphomeapi fails an unpairing whose link
    /// ends before it is answered).
    private var endsAfterUnpairing: [BluetoothAddress: (client: Client, end: Action)] = [:]
    private var pending: [Client: Int] = [:]
    /// The slots last told to the clients that asked.
    private var told: (free: Int, limit: Int)?
    private var slotSubscribers: Set<Client> = []

    public init() {}

    /// The links up or being made, for the scheduler's count.
    public var linkCount: Int { links.count }

    /// The devices linked (or being linked) for clients.
    public var addresses: Set<BluetoothAddress> { Set(links.keys) }

    // MARK: Requests

    /// A client's BluetoothDeviceRequest. `free`: whether the scheduler has
    /// a slot for one more link now.
    public mutating func requested(_ client: Client, _ request: BluetoothDeviceRequest, free: Bool) -> [Action] {
        guard let address = BluetoothAddress(value: request.address) else {
            return [Self.connection(client, request.address, connected: false, error: Self.invalidArgument)]
        }
        // An end held for an unpairing's answer is said before anything new of the device.
        guard let held = endsAfterUnpairing[address], held.client == client else { return answer(client, request, address, free: free) }
        endsAfterUnpairing[address] = nil
        return [held.end] + answer(client, request, address, free: free)
    }

    private mutating func answer(_ client: Client, _ request: BluetoothDeviceRequest, _ address: BluetoothAddress, free: Bool) -> [Action] {
        switch request.requestType {
        case .connect, .connectV3WithCache, .connectV3WithoutCache:
            if let link = links[address] {
                guard link.client == client else {
                    return [Self.connection(client, request.address, connected: false, error: Self.linkedElsewhere)]
                }
                if case .up(let mtu) = link.phase { return [Self.connection(client, request.address, connected: true, mtu: mtu)] }
                return []
            }
            // ESPHome's answer when it has no slot: not connected, no error.
            guard free else {
                connectsEnded[.noSlot, default: 0] += 1
                return [Self.connection(client, request.address, connected: false)]
            }
            links[address] = Link(client: client, phase: .connecting)
            return [.connect(address, randomAddress: request.hasAddressType_p ? request.addressType == 1 : nil)]
        case .disconnect:
            guard let link = links[address], link.client == client else {
                return [Self.connection(client, request.address, connected: false)]
            }
            links[address]?.phase = .disconnecting
            return [.disconnect(address)]
        case .pair, .unpair, .clearCache:
            let change: DeviceChange = request.requestType == .pair ? .pair : request.requestType == .unpair ? .unpair : .clearCache
            guard let link = links[address], link.client == client, case .up = link.phase else {
                return [Self.changed(client, request.address, change, error: Self.notConnected)]
            }
            if change == .unpair { links[address]?.unpairing = true }
            return [.change(client, address, change)]
        case .UNRECOGNIZED:
            return [Self.connection(client, request.address, connected: false, error: Self.notSupported)]
        }
    }

    /// A change of `client`'s asked for was made, or could not be. It is
    /// answered even when the link went meanwhile (unpairing undoes it).
    public mutating func changed(
        _ client: Client, _ address: BluetoothAddress, _ change: DeviceChange, _ result: Result<Void, BlueZError>
    ) -> [Action] {
        let error: Int32
        switch result {
        case .success: error = 0
        case .failure(let failure): error = Self.changeCode(failure)
        }
        var actions = [Self.changed(client, address.value, change, error: error)]
        if change == .unpair {
            if links[address]?.client == client { links[address]?.unpairing = false }
            if let ended = endsAfterUnpairing[address], ended.client == client {
                endsAfterUnpairing[address] = nil
                actions.append(ended.end)
            }
        }
        return actions
    }

    /// A client's GATT request on a device it linked.
    public mutating func requested(_ client: Client, _ address: UInt64, _ operation: Operation) -> [Action] {
        guard let device = BluetoothAddress(value: address), let link = links[device], link.client == client,
            case .up = link.phase
        else { return [Self.error(client, address, operation.handle, Self.notConnected)] }
        guard pending[client, default: 0] < Self.maximumPending else {
            return [Self.error(client, address, operation.handle, Self.busy)]
        }
        pending[client, default: 0] += 1
        return [.perform(client, device, operation)]
    }

    /// An operation of `client`'s ended.
    public mutating func performed(
        _ client: Client, _ address: BluetoothAddress, _ operation: Operation, _ result: Result<Outcome, BlueZError>
    ) -> [Action] {
        if let count = pending[client] { pending[client] = count > 1 ? count - 1 : nil }
        // The client was told the link is gone: it expects nothing more of it.
        guard links[address]?.client == client else { return [] }
        let raw = address.value
        switch (operation, result) {
        case (_, .failure(let error)):
            return [Self.error(client, raw, operation.handle, Self.code(error, operation))]
        case (.services, .success(.services(let services))):
            var actions: [Action] = services.map { service in
                var message = BluetoothGATTGetServicesResponse()
                message.address = raw
                message.services = [service]
                return Self.send(client, message)
            }
            var done = BluetoothGATTGetServicesDoneResponse()
            done.address = raw
            actions.append(Self.send(client, done))
            return actions
        case (.read(let handle), .success(.bytes(let bytes))), (.readDescriptor(let handle), .success(.bytes(let bytes))):
            var message = BluetoothGATTReadResponse()
            (message.address, message.handle, message.data) = (raw, handle, .init(bytes))
            return [Self.send(client, message)]
        case (.write(let handle, _, let response), .success):
            guard response else { return [] }
            var message = BluetoothGATTWriteResponse()
            (message.address, message.handle) = (raw, handle)
            return [Self.send(client, message)]
        case (.writeDescriptor(let handle, _), .success):
            var message = BluetoothGATTWriteResponse()
            (message.address, message.handle) = (raw, handle)
            return [Self.send(client, message)]
        case (.notify(let handle, true), .success):
            var message = BluetoothGATTNotifyResponse()
            (message.address, message.handle) = (raw, handle)
            return [Self.send(client, message)]
        default:
            return []
        }
    }

    /// A notification (or indication) from a linked device's characteristic.
    public func notified(_ address: BluetoothAddress, handle: UInt32, _ bytes: [UInt8]) -> [Action] {
        guard let link = links[address], case .up = link.phase else { return [] }
        var message = BluetoothGATTNotifyDataResponse()
        (message.address, message.handle, message.data) = (address.value, handle, .init(bytes))
        return [Self.send(link.client, message)]
    }

    // MARK: Links

    /// The link is up and its services resolved: the client is told, with the ATT MTU.
    public mutating func linked(_ address: BluetoothAddress, mtu: Int) -> [Action] {
        guard let link = links[address], link.phase == .connecting else { return [] }
        let mtu = UInt32(clamping: mtu)
        links[address]?.phase = .up(mtu: mtu)
        connectsEnded[.linked, default: 0] += 1
        return [Self.connection(link.client, address.value, connected: true, mtu: mtu)]
    }

    /// The link could not be made, went down, or was disconnected: its
    /// client is told (with the error, for a connect that failed) and the
    /// slot is free.
    public mutating func unlinked(_ address: BluetoothAddress, failure: BlueZError? = nil) -> [Action] {
        guard let link = links.removeValue(forKey: address) else { return [] }
        if link.phase == .connecting { connectsEnded[.failed, default: 0] += 1 }
        let error = failure.map { Self.connectCode($0) } ?? 0
        let end = Self.connection(link.client, address.value, connected: false, error: link.phase == .connecting ? error : 0)
        guard !link.unpairing else {
            endsAfterUnpairing[address] = (link.client, end)
            return []
        }
        return [end]
    }

    /// A client went: its links are undone, its subscriptions dropped.
    public mutating func gone(_ client: Client) -> [Action] {
        slotSubscribers.remove(client)
        pending[client] = nil
        endsAfterUnpairing = endsAfterUnpairing.filter { $0.value.client != client }
        let theirs = links.filter { $0.value.client == client }.keys.sorted()
        for address in theirs { links[address] = nil }
        return theirs.map { .disconnect($0) }
    }

    // MARK: Slots

    /// A client asked to be told the free slots: it is, now and at each change.
    public mutating func slotsWanted(by client: Client, free: Int, limit: Int) -> [Action] {
        slotSubscribers.insert(client)
        return [Self.send(client, Self.slots(free: free, limit: limit))]
    }

    /// The scheduler's slots now: the clients that asked are told if they changed.
    public mutating func slots(free: Int, limit: Int) -> [Action] {
        guard told.map({ $0 != (free, limit) }) ?? true else { return [] }
        told = (free, limit)
        return slotSubscribers.sorted().map { Self.send($0, Self.slots(free: free, limit: limit)) }
    }

    // MARK: Messages

    /// ESPHome's and Home Assistant's codes: below 0 the link is gone
    /// (bleak-esphome then marks it down), 1 to 17 ATT errors, others the stack's.
    static let notConnected: Int32 = -1
    static let invalidArgument: Int32 = 0x102
    static let linkedElsewhere: Int32 = 0x103
    static let notSupported: Int32 = 0x106
    static let busy: Int32 = 0x107
    /// ATT: Read Not Permitted, Write Not Permitted, Insufficient Authentication,
    /// Insufficient Authorization, Request Not Supported, Invalid Attribute
    /// Value Length, Unlikely Error.
    static let att = (readNotPermitted: Int32(2), writeNotPermitted: Int32(3), authentication: Int32(5),
        authorization: Int32(8), notSupported: Int32(6), length: Int32(0x0D), unlikely: Int32(0x0E))

    /// A failed GATT operation's code.
    static func code(_ error: BlueZError, _ operation: Operation) -> Int32 {
        switch error.kind {
        case .notConnected, .doesNotExist, .notFound: notConnected
        case .notPermitted:
            switch operation {
            case .write, .writeDescriptor: att.writeNotPermitted
            default: att.readNotPermitted
            }
        case .notAuthorized: att.authorization
        case .authenticationFailed: att.authentication
        case .notSupported: att.notSupported
        case .invalidValueLength: att.length
        default: att.unlikely
        }
    }

    /// A failed change's code: the link gone, the ATT errors of security,
    /// not supported, or the stack's own failure.
    static func changeCode(_ error: BlueZError) -> Int32 {
        switch error.kind {
        case .notConnected, .doesNotExist, .notFound: notConnected
        // AuthenticationFailed, Rejected, Canceled and Timeout are one kind.
        case .authenticationFailed, .notAuthorized: att.authentication
        case .notSupported: notSupported
        case .timeout: 0x08
        default: 0x3E
        }
    }

    /// A failed connect's code: ESP-IDF's "connection failed to be
    /// established" unless BlueZ's error says a timeout.
    static func connectCode(_ error: BlueZError) -> Int32 {
        error.kind == .timeout ? 0x08 : 0x3E
    }

    static func send(_ client: Client, _ message: some ESPHomeMessage) -> Action {
        .send(client, type: type(of: message).messageType, payload: (try? message.serializedBytes()) ?? [])
    }

    static func connection(_ client: Client, _ address: UInt64, connected: Bool, mtu: UInt32 = 0, error: Int32 = 0) -> Action {
        var message = BluetoothDeviceConnectionResponse()
        (message.address, message.connected, message.mtu, message.error) = (address, connected, mtu, error)
        return send(client, message)
    }

    /// The answer to a change: the pairing, unpairing or cache-clearing response.
    static func changed(_ client: Client, _ address: UInt64, _ change: DeviceChange, error: Int32) -> Action {
        switch change {
        case .pair:
            var message = BluetoothDevicePairingResponse()
            (message.address, message.paired, message.error) = (address, error == 0, error)
            return send(client, message)
        case .unpair:
            var message = BluetoothDeviceUnpairingResponse()
            (message.address, message.success, message.error) = (address, error == 0, error)
            return send(client, message)
        case .clearCache:
            var message = BluetoothDeviceClearCacheResponse()
            (message.address, message.success, message.error) = (address, error == 0, error)
            return send(client, message)
        }
    }

    static func error(_ client: Client, _ address: UInt64, _ handle: UInt32, _ code: Int32) -> Action {
        var message = BluetoothGATTErrorResponse()
        (message.address, message.handle, message.error) = (address, handle, code)
        return send(client, message)
    }

    static func slots(free: Int, limit: Int) -> BluetoothConnectionsFreeResponse {
        var slots = BluetoothConnectionsFreeResponse()
        slots.free = UInt32(clamping: free)
        slots.limit = UInt32(clamping: limit)
        return slots
    }
}
