import Bird
import BlueZ
import FuzzSupport
import Proxy
import SwiftProtobuf

/// Up to three Home Assistant clients, each a ProxySession (greeted with a
/// HelloRequest first, unless the fuzzer says not), fed a fuzzer-chosen
/// sequence of messages (any type and bytes, or a request the fuzzer fills
/// in), with the sessions' `.device`, `.gatt` and `.sendSlots` actions fed to
/// one ProxiedLinks as the server feeds them, and the Bluetooth side's
/// outcomes chosen by the fuzzer: links up or failed or lost, operations
/// done or failed (with the outcome their operation gives, or another),
/// notifications, slot counts, clients gone.
///
/// What holds: every message sent decodes as its type; a session closes
/// (and its client goes) on anything before Hello and on what does not
/// decode, acts on nothing else before Hello, and answers unknown types
/// with nothing. ProxiedLinks agrees with a model of its rules: one client
/// per device; a connect only for a device no one holds, a disconnect
/// only for a device of the client's; a GATT operation performed only on the
/// client's link that is up, at most `maximumPending` (16) out per client
/// (the 17th refused as busy), otherwise an error; pairing, unpairing and
/// cache clearing asked of the client's link that is up, otherwise answered
/// with an error, and each answered once it ends; a link that ends while its
/// unpairing is out is said after the unpairing's answer (or before the
/// client's next request of that device), once; linked, unlinked and gone
/// answer only for the links they concern; messages go only to clients
/// still there; `linkCount` and `addresses` are the model's.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxySession(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(Array(UnsafeBufferPointer(start: data, count: size)))
    var world = World(greet: !input.bool())
    var steps = 0
    while !input.isEmpty, steps < 200 {
        steps += 1
        world.step(&input)
    }
    return 0
}

private let identity = ProxySession.Identity(
    name: "birdctl-fuzz", friendlyName: "birdctl fuzz", macAddress: BluetoothAddress(value: 0x00AA_0100_0001)!, birdctlVersion: "0.0.0")

/// The devices the fuzzer picks from (one of these, or any 64-bit value).
private let devices: [UInt64] = [0xF00D_B17D_0001, 0xF00D_B17D_0002, 0xC0FF_EE00_0003, 0x0000_0000_0000]

private struct World {
    let greet: Bool
    /// Each client slot's session and its client number (a new number when a client comes again).
    var sessions: [ProxySession]
    var clients: [ProxiedLinks.Client]
    var nextClient = 3
    var links = ProxiedLinks()

    // The model.
    enum Phase: Equatable { case connecting, up, disconnecting }
    var model: [BluetoothAddress: (client: ProxiedLinks.Client, phase: Phase, unpairing: Bool)] = [:]
    /// Changes asked and not yet ended, oldest first.
    var changes: [(client: ProxiedLinks.Client, address: BluetoothAddress, change: ProxiedLinks.DeviceChange)] = []
    /// Links that ended while their unpairing was out: the client to tell.
    var heldEnds: [BluetoothAddress: ProxiedLinks.Client] = [:]
    /// Operations performed and not yet ended, oldest first.
    var out: [(client: ProxiedLinks.Client, address: BluetoothAddress, operation: ProxiedLinks.Operation)] = []

    init(greet: Bool) {
        self.greet = greet
        sessions = []
        clients = [0, 1, 2]
        for _ in 0..<3 { sessions.append(fresh()) }
    }

    func fresh() -> ProxySession {
        var session = ProxySession(identity)
        if greet {
            let actions = session.received(type: HelloRequest.messageType, payload: [])
            require(actions.count == 1 && session.greeted, "Hello: \(actions)")
            checkSent(actions)
        }
        return session
    }

    func outstanding(_ client: ProxiedLinks.Client) -> Int { out.count(where: { $0.client == client }) }

    mutating func step(_ input: inout FuzzInput) {
        let choice = input.byte()
        switch choice % 8 {
        case 0, 1, 2: message(&input, slot: Int(choice >> 3) % 3)
        case 3: end(&input)
        case 4: linkEvent(&input)
        case 5: notify(&input)
        case 6: apply(links.slots(free: Int(input.byte() % 5), limit: Int(input.byte() % 5)))
        default:
            if choice >> 3 == 0 { gone(slot: Int(input.byte()) % 3) } else { message(&input, slot: Int(choice >> 3) % 3) }
        }
        require(links.linkCount == model.count, "\(links.linkCount) links, the model \(model.count)")
        require(links.addresses == Set(model.keys), "the links' addresses differ from the model's")
        for client in clients { require(outstanding(client) <= ProxiedLinks.maximumPending, "client \(client): \(outstanding(client)) out") }
    }

    // MARK: Clients

    mutating func message(_ input: inout FuzzInput, slot: Int) {
        let (type, payload) = Self.message(&input)
        let wasGreeted = sessions[slot].greeted
        let actions = sessions[slot].received(type: type, payload: payload)
        if !wasGreeted && type != HelloRequest.messageType {
            require(actions.count == 1, "before Hello: \(actions)")
            guard case .close = actions[0] else { fatalError("before Hello, not closed: \(actions)") }
        }
        for (index, action) in actions.enumerated() {
            if case .close(let reason) = action {
                require(index == actions.count - 1, "actions after close")
                require(!reason.isEmpty)
            }
            if case .end = action { require(index == actions.count - 1, "actions after the end") }
        }
        if !Self.known.contains(type), sessions[slot].greeted, wasGreeted {
            require(actions.isEmpty, "an unknown type \(type) answered: \(actions)")
        }
        checkSent(actions)
        let client = clients[slot]
        for action in actions {
            switch action {
            case .send: break
            case .close, .end: gone(slot: slot)
            case .sendDevicesHeard: require(sessions[slot].advertisementsWanted)
            case .sendSlots:
                require(sessions[slot].slotsWanted)
                let sent = links.slotsWanted(by: client, free: Int(input.byte() % 5), limit: Int(input.byte() % 5))
                require(sent.count == 1)
                apply(sent)
            case .device(let request): deviceRequest(client, request, free: input.bool())
            case .gatt(let address, let operation): gattRequest(client, address, operation)
            }
        }
    }

    mutating func gone(slot: Int) {
        let client = clients[slot]
        let theirs = model.filter { $0.value.client == client }.keys.sorted()
        let actions = links.gone(client)
        require(actions == theirs.map { .disconnect($0) }, "gone: \(actions), expected disconnects of \(theirs)")
        for address in theirs { model[address] = nil }
        heldEnds = heldEnds.filter { $0.value != client }
        clients[slot] = nextClient
        nextClient += 1
        sessions[slot] = fresh()
    }

    // MARK: ProxiedLinks

    mutating func deviceRequest(_ client: ProxiedLinks.Client, _ request: BluetoothDeviceRequest, free: Bool) {
        var actions = links.requested(client, request, free: free)
        let address = BluetoothAddress(value: request.address)
        if let address, heldEnds[address] == client {
            require(Self.connection(actions.first)?.connected == false, "the end held for an unpairing not said first: \(actions)")
            apply(Array(actions.prefix(1)))
            actions.removeFirst()
            heldEnds[address] = nil
        }
        let held = address.flatMap { model[$0] }
        switch request.requestType {
        case _ where address == nil:
            require(actions.count == 1 && Self.connection(actions[0]) != nil, "a request for no address: \(actions)")
        case .connect, .connectV3WithCache, .connectV3WithoutCache:
            if let held {
                if held.client == client && held.phase != .up { require(actions.isEmpty, "a connect while \(held.phase): \(actions)") } else {
                    let response = Self.connection(actions.first)
                    require(actions.count == 1 && response != nil, "a connect of a held device: \(actions)")
                    require(response!.connected == (held.client == client), "a connect of a device held elsewhere told connected")
                }
            } else if free {
                require(actions == [.connect(address!, randomAddress: request.hasAddressType_p ? request.addressType == 1 : nil)], "connect: \(actions)")
                model[address!] = (client, .connecting, false)
            } else {
                require(actions.count == 1 && Self.connection(actions[0])?.connected == false, "no slot: \(actions)")
            }
        case .disconnect:
            if let held, held.client == client {
                require(actions == [.disconnect(address!)], "disconnect: \(actions)")
                model[address!]?.phase = .disconnecting
            } else {
                require(actions.count == 1 && Self.connection(actions[0])?.connected == false, "a disconnect of another's: \(actions)")
            }
        case .pair, .unpair, .clearCache:
            let change: ProxiedLinks.DeviceChange = request.requestType == .pair ? .pair : request.requestType == .unpair ? .unpair : .clearCache
            if let held, held.client == client, held.phase == .up {
                require(actions == [.change(client, address!, change)], "\(change): \(actions)")
                changes.append((client, address!, change))
                if change == .unpair { model[address!]?.unpairing = true }
            } else {
                require(actions.count == 1 && Self.changeAnswer(actions[0], change)?.error != 0, "\(change) off the client's link: \(actions)")
            }
        case .UNRECOGNIZED:
            require(actions.count == 1 && Self.connection(actions[0])?.error != 0, "an unknown request: \(actions)")
        }
        apply(actions)
    }

    /// A change out ends (the fuzzer picks which and how): answered once,
    /// an end held for an unpairing said after its answer.
    mutating func endChange(_ input: inout FuzzInput) {
        let (client, address, change) = changes.remove(at: Int(input.byte()) % changes.count)
        let result: Result<Void, BlueZError> = input.bool() ? .success(()) : .failure(BlueZError(Self.kinds[Int(input.byte()) % Self.kinds.count]))
        let actions = links.changed(client, address, change, result)
        guard clients.contains(client) else {
            // Answered to a client gone (the server sends it nowhere); nothing else.
            for action in actions {
                guard case .send(let to, _, _) = action, to == client else { fatalError("a change of a client gone: \(actions)") }
            }
            return
        }
        let answer = actions.first.flatMap { Self.changeAnswer($0, change) }
        require(answer != nil && (answer!.error == 0) == ((try? result.get()) != nil), "\(change) answered with \(actions)")
        if change == .unpair {
            if model[address]?.client == client { model[address]?.unpairing = false }
            if heldEnds[address] == client {
                require(actions.count == 2 && Self.connection(actions[1])?.connected == false, "the end held not said after the answer: \(actions)")
                heldEnds[address] = nil
            } else {
                require(actions.count == 1, "unpaired: \(actions)")
            }
        } else {
            require(actions.count == 1, "\(change): \(actions)")
        }
        apply(actions)
    }

    mutating func gattRequest(_ client: ProxiedLinks.Client, _ raw: UInt64, _ operation: ProxiedLinks.Operation) {
        let actions = links.requested(client, raw, operation)
        require(actions.count == 1, "a GATT request: \(actions)")
        let address = BluetoothAddress(value: raw)
        let ours = address.flatMap { model[$0] }.map { $0.client == client && $0.phase == .up } ?? false
        if case .perform(let who, let device, let what) = actions[0] {
            require(ours && who == client && device == address && what == operation, "performed off a link of the client's: \(actions)")
            require(outstanding(client) < ProxiedLinks.maximumPending, "a 17th operation out")
            out.append((client, device, operation))
        } else {
            let error = Self.decoded(actions[0], as: BluetoothGATTErrorResponse.self)
            require(error != nil, "a GATT request answered with \(actions)")
            if ours { require(outstanding(client) == ProxiedLinks.maximumPending && error!.error == 0x107, "refused with \(error!.error)") }
            apply(actions)
        }
    }

    /// An operation out ends (the fuzzer picks which and how), or a change.
    mutating func end(_ input: inout FuzzInput) {
        if !changes.isEmpty && (out.isEmpty || input.bool()) { return endChange(&input) }
        guard !out.isEmpty else { return }
        let (client, address, operation) = out.remove(at: Int(input.byte()) % out.count)
        let result: Result<ProxiedLinks.Outcome, BlueZError>
        switch input.byte() % 5 {
        case 0: result = .failure(BlueZError(Self.kinds[Int(input.byte()) % Self.kinds.count], name: "org.bluez.Error.Failed", message: input.text()))
        case 1: result = .success(.done)
        case 2: result = .success(.bytes(input.bytes(upTo: 64)))
        case 3:
            var services: [BluetoothGATTService] = []
            for _ in 0..<Int(input.byte() % 4) {
                var service = BluetoothGATTService()
                service.uuid = [input.integer(8), input.integer(8)]
                service.handle = UInt32(input.byte())
                services.append(service)
            }
            result = .success(.services(services))
        default:
            // The outcome its operation gives.
            switch operation {
            case .services: result = .success(.services([]))
            case .read, .readDescriptor: result = .success(.bytes([1, 2, 3]))
            default: result = .success(.done)
            }
        }
        let actions = links.performed(client, address, operation, result)
        if model[address]?.client != client { require(actions.isEmpty, "told of an operation on a link no longer the client's: \(actions)") }
        if case .failure = result, model[address]?.client == client {
            require(actions.count == 1 && Self.decoded(actions[0], as: BluetoothGATTErrorResponse.self) != nil, "a failure: \(actions)")
        }
        for action in actions { if case .send(let to, _, _) = action { require(to == client) } }
        apply(actions)
    }

    mutating func linkEvent(_ input: inout FuzzInput) {
        let pick = input.byte()
        let address = BluetoothAddress(value: devices[Int(pick) % devices.count]) ?? BluetoothAddress(value: 1)!
        let held = model[address]
        if pick & 0x80 == 0 {
            let actions = links.linked(address, mtu: Int(input.integer(2)) - 10)
            if let held, held.phase == .connecting {
                require(actions.count == 1 && Self.connection(actions[0])?.connected == true, "linked: \(actions)")
                model[address]?.phase = .up
            } else {
                require(actions.isEmpty, "linked while \(String(describing: held?.phase)): \(actions)")
            }
            apply(actions)
        } else {
            let failure = input.bool() ? BlueZError(Self.kinds[Int(input.byte()) % Self.kinds.count]) : nil
            let actions = links.unlinked(address, failure: failure)
            if let held, held.unpairing {
                // Said after the unpairing's answer.
                require(actions.isEmpty, "unlinked while unpairing: \(actions)")
                model[address] = nil
                heldEnds[address] = held.client
            } else if let held {
                let told = Self.connection(actions.first)
                require(actions.count == 1 && told?.connected == false, "unlinked: \(actions)")
                require((told!.error != 0) == (held.phase == .connecting && failure != nil), "unlinked with error \(told!.error)")
                model[address] = nil
            } else {
                require(actions.isEmpty, "unlinked without a link: \(actions)")
            }
            apply(actions)
        }
    }

    mutating func notify(_ input: inout FuzzInput) {
        let address = BluetoothAddress(value: devices[Int(input.byte()) % devices.count]) ?? BluetoothAddress(value: 1)!
        let actions = links.notified(address, handle: UInt32(input.byte()), input.bytes(upTo: 64))
        if let held = model[address], held.phase == .up {
            require(actions.count == 1 && Self.decoded(actions[0], as: BluetoothGATTNotifyDataResponse.self) != nil, "notified: \(actions)")
        } else {
            require(actions.isEmpty, "a notification off a link up: \(actions)")
        }
        apply(actions)
    }

    /// ProxiedLinks' actions: messages decode and go to clients still here;
    /// connects, disconnects and operations only where the model has them.
    func apply(_ actions: [ProxiedLinks.Action]) {
        for action in actions {
            switch action {
            case .send(let client, let type, let payload):
                require(clients.contains(client), "a message to client \(client), gone")
                require(Self.decodes(type, payload), "a message of type \(type) that does not decode")
            case .connect(let address, _): require(model[address]?.phase == .connecting)
            case .disconnect(let address): require(model[address].map { $0.phase == .disconnecting } ?? true)
            case .perform: fatalError("an operation performed unasked: \(action)")
            case .change(let client, let address, _):
                require(model[address].map { $0.client == client && $0.phase == .up } ?? false, "a change off the client's link: \(action)")
            }
        }
    }

    // MARK: Messages

    func checkSent(_ actions: [ProxySession.Action]) {
        for case .send(let type, let payload) in actions { require(Self.decodes(type, payload), "the session sent type \(type) that does not decode") }
    }

    static let known: Set<UInt32> = [1, 3, 5, 7, 9, 11, 66, 68, 70, 73, 75, 76, 77, 78, 80, 87]

    static let decoders: [UInt32: @Sendable ([UInt8]) -> Bool] = [
        HelloResponse.messageType: { (try? HelloResponse(serializedBytes: $0)) != nil },
        ConnectResponse.messageType: { (try? ConnectResponse(serializedBytes: $0)) != nil },
        DisconnectResponse.messageType: { (try? DisconnectResponse(serializedBytes: $0)) != nil },
        PingResponse.messageType: { (try? PingResponse(serializedBytes: $0)) != nil },
        DeviceInfoResponse.messageType: { (try? DeviceInfoResponse(serializedBytes: $0)) != nil },
        ListEntitiesDoneResponse.messageType: { (try? ListEntitiesDoneResponse(serializedBytes: $0)) != nil },
        BluetoothDeviceConnectionResponse.messageType: { (try? BluetoothDeviceConnectionResponse(serializedBytes: $0)) != nil },
        BluetoothGATTGetServicesResponse.messageType: { (try? BluetoothGATTGetServicesResponse(serializedBytes: $0)) != nil },
        BluetoothGATTGetServicesDoneResponse.messageType: { (try? BluetoothGATTGetServicesDoneResponse(serializedBytes: $0)) != nil },
        BluetoothGATTReadResponse.messageType: { (try? BluetoothGATTReadResponse(serializedBytes: $0)) != nil },
        BluetoothGATTWriteResponse.messageType: { (try? BluetoothGATTWriteResponse(serializedBytes: $0)) != nil },
        BluetoothGATTNotifyResponse.messageType: { (try? BluetoothGATTNotifyResponse(serializedBytes: $0)) != nil },
        BluetoothGATTNotifyDataResponse.messageType: { (try? BluetoothGATTNotifyDataResponse(serializedBytes: $0)) != nil },
        BluetoothGATTErrorResponse.messageType: { (try? BluetoothGATTErrorResponse(serializedBytes: $0)) != nil },
        BluetoothConnectionsFreeResponse.messageType: { (try? BluetoothConnectionsFreeResponse(serializedBytes: $0)) != nil },
        BluetoothDevicePairingResponse.messageType: { (try? BluetoothDevicePairingResponse(serializedBytes: $0)) != nil },
        BluetoothDeviceUnpairingResponse.messageType: { (try? BluetoothDeviceUnpairingResponse(serializedBytes: $0)) != nil },
        BluetoothDeviceClearCacheResponse.messageType: { (try? BluetoothDeviceClearCacheResponse(serializedBytes: $0)) != nil },
    ]

    static func decodes(_ type: UInt32, _ payload: [UInt8]) -> Bool { decoders[type]?(payload) ?? false }

    static func decoded<M: ESPHomeMessage>(_ action: ProxiedLinks.Action, as _: M.Type) -> M? {
        guard case .send(_, let type, let payload) = action, type == M.messageType else { return nil }
        return try? M(serializedBytes: payload)
    }

    static func connection(_ action: ProxiedLinks.Action?) -> BluetoothDeviceConnectionResponse? {
        action.flatMap { decoded($0, as: BluetoothDeviceConnectionResponse.self) }
    }

    /// The answer to a change, as its response says it: whether it was made, and the error.
    static func changeAnswer(_ action: ProxiedLinks.Action, _ change: ProxiedLinks.DeviceChange) -> (done: Bool, error: Int32)? {
        switch change {
        case .pair: decoded(action, as: BluetoothDevicePairingResponse.self).map { ($0.paired, $0.error) }
        case .unpair: decoded(action, as: BluetoothDeviceUnpairingResponse.self).map { ($0.success, $0.error) }
        case .clearCache: decoded(action, as: BluetoothDeviceClearCacheResponse.self).map { ($0.success, $0.error) }
        }
    }

    static let kinds: [BlueZError.Kind] = [
        .inProgress, .failed, .notReady, .notPermitted, .notAuthorized, .notSupported, .invalidValueLength, .invalidOffset,
        .invalidArguments, .doesNotExist, .alreadyConnected, .alreadyExists, .notConnected, .notAvailable, .authenticationFailed,
        .permissionDenied, .timeout, .bluetoothdNotRunning, .notFound, .busDisconnected, .unexpectedReply, .other,
    ]

    /// A message from a client: any type and bytes, or one of the requests filled in by the fuzzer.
    static func message(_ input: inout FuzzInput) -> (UInt32, [UInt8]) {
        let kind = input.byte()
        func address(_ input: inout FuzzInput) -> UInt64 { input.pick(devices) { $0.integer(8) } }
        func serialized(_ message: some ESPHomeMessage) -> (UInt32, [UInt8]) {
            (type(of: message).messageType, try! message.serializedBytes())
        }
        switch kind % 16 {
        case 0:
            return (UInt32(input.integer(2)) % 128, input.bytes(upTo: 255))
        case 1:
            var request = BluetoothDeviceRequest()
            request.address = address(&input)
            request.requestType = BluetoothDeviceRequestType(rawValue: Int(input.byte() % 8)) ?? .connect
            if input.bool() { request.addressType = UInt32(input.byte() % 3) }
            return serialized(request)
        case 2:
            var request = BluetoothGATTGetServicesRequest()
            request.address = address(&input)
            return serialized(request)
        case 3:
            var request = BluetoothGATTReadRequest()
            (request.address, request.handle) = (address(&input), UInt32(input.byte()))
            return serialized(request)
        case 4:
            var request = BluetoothGATTWriteRequest()
            (request.address, request.handle, request.response) = (address(&input), UInt32(input.byte()), input.bool())
            request.data = .init(input.bytes(upTo: 32))
            return serialized(request)
        case 5:
            var request = BluetoothGATTReadDescriptorRequest()
            (request.address, request.handle) = (address(&input), UInt32(input.byte()))
            return serialized(request)
        case 6:
            var request = BluetoothGATTWriteDescriptorRequest()
            (request.address, request.handle) = (address(&input), UInt32(input.byte()))
            request.data = .init(input.bytes(upTo: 32))
            return serialized(request)
        case 7:
            var request = BluetoothGATTNotifyRequest()
            (request.address, request.handle, request.enable) = (address(&input), UInt32(input.byte()), input.bool())
            return serialized(request)
        case 8:
            var request = SubscribeBluetoothLEAdvertisementsRequest()
            request.flags = Int32(input.byte() % 4)
            return serialized(request)
        case 9:
            return (input.pick([1, 3, 5, 7, 9, 11, 80, 87, 20, 34, 36, 38]) { UInt32($0.byte()) }, [])
        default:
            // A known type with any bytes (most do not decode).
            return (input.pick(Array(known).sorted()) { UInt32($0.integer(2)) }, input.bytes(upTo: 64))
        }
    }
}
