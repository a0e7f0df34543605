import Bird
import SwiftProtobuf

/// One Home Assistant client of the proxy, once its frames are open (after
/// the Noise handshake): its messages in, the answers and what it subscribed
/// to out. A pure machine: the connection's driver decodes frames into
/// `received` and sends or closes as told.
///
/// The order Home Assistant 2024.3 keeps: Hello, Connect (an empty password),
/// DeviceInfo and ListEntities, then its subscriptions (free connection
/// slots, advertisements); it pings after 20 s of silence and gives up after
/// 90 s. Anything before Hello ends the session.
public struct ProxySession {
    /// Who the proxy says it is (DeviceInfoResponse).
    public struct Identity: Sendable {
        /// Home Assistant's name of the device; stable across restarts.
        public var name: String
        public var friendlyName: String
        /// The proxy's id in Home Assistant (its config entry and scanner source).
        public var macAddress: BluetoothAddress
        public var birdctlVersion: String

        public init(name: String, friendlyName: String, macAddress: BluetoothAddress, birdctlVersion: String) {
            (self.name, self.friendlyName, self.macAddress, self.birdctlVersion) = (name, friendlyName, macAddress, birdctlVersion)
        }
    }

    public enum Action: Equatable, Sendable {
        /// A message to the client, encoded (its type number and protobuf bytes).
        case send(type: UInt32, payload: [UInt8])
        /// Drop the client (after what was sent before), for this reason.
        case close(String)
        /// The client said goodbye: end the connection once the answer is sent.
        case end
        /// The client subscribed to advertisements: send it what is heard
        /// now (BlueZ signals a device again only when what it heard changes).
        case sendDevicesHeard
        /// The client asked to be told the free connection slots.
        case sendSlots
        /// A connect, disconnect (or what is not offered) for `ProxiedLinks`.
        case device(BluetoothDeviceRequest)
        /// A GATT request on a linked device, for `ProxiedLinks`.
        case gatt(address: UInt64, ProxiedLinks.Operation)
    }

    /// What the proxy can do, as the API's feature flags: advertisements
    /// (raw), connections, remote caching (Home Assistant keeps a device's
    /// services and asks by handle on a new link without asking for them),
    /// pairing, cache clearing.
    // PASSIVE_SCAN, ACTIVE_CONNECTIONS, REMOTE_CACHING, PAIRING, CACHE_CLEARING, RAW_ADVERTISEMENTS
    public static let featureFlags: UInt32 = 1 | 2 | 4 | 8 | 16 | 32

    /// The API version answered (aioesphomeapi reads the feature flags from 1.9 on).
    static let apiVersion = (major: UInt32(1), minor: UInt32(9))

    /// The ESPHome version said in DeviceInfo: Home Assistant asks older
    /// proxies' owners to update (below 2023.8.0).
    static let esphomeVersion = "2024.3.0"

    public let identity: Identity
    public private(set) var greeted = false
    /// Advertisements are wanted (raw: as AD structures, the only form sent).
    public private(set) var advertisementsWanted = false
    /// Free connection slots are wanted.
    public private(set) var slotsWanted = false

    public init(_ identity: Identity) {
        self.identity = identity
    }

    /// A message from the client.
    public mutating func received(type: UInt32, payload: [UInt8]) -> [Action] {
        guard greeted || type == HelloRequest.messageType else {
            return [.close("a message of type \(type) before Hello")]
        }
        do {
            switch type {
            case HelloRequest.messageType:
                _ = try HelloRequest(serializedBytes: payload)
                greeted = true
                var hello = HelloResponse()
                (hello.apiVersionMajor, hello.apiVersionMinor) = Self.apiVersion
                hello.serverInfo = "birdctl \(identity.birdctlVersion)"
                hello.name = identity.name
                return [try Self.send(hello)]
            case ConnectRequest.messageType:
                _ = try ConnectRequest(serializedBytes: payload)
                // No password: the Noise key is the credential.
                return [try Self.send(ConnectResponse())]
            case DeviceInfoRequest.messageType:
                _ = try DeviceInfoRequest(serializedBytes: payload)
                return [try Self.send(deviceInfo)]
            case ListEntitiesRequest.messageType:
                _ = try ListEntitiesRequest(serializedBytes: payload)
                return [try Self.send(ListEntitiesDoneResponse())]
            case PingRequest.messageType:
                _ = try PingRequest(serializedBytes: payload)
                return [try Self.send(PingResponse())]
            case DisconnectRequest.messageType:
                _ = try DisconnectRequest(serializedBytes: payload)
                return [try Self.send(DisconnectResponse()), .end]
            case SubscribeBluetoothLEAdvertisementsRequest.messageType:
                let request = try SubscribeBluetoothLEAdvertisementsRequest(serializedBytes: payload)
                guard request.flags & 1 != 0 else {
                    return [.close("only raw advertisements are served (flags 1); the client asked for \(request.flags)")]
                }
                advertisementsWanted = true
                return [.sendDevicesHeard]
            case UnsubscribeBluetoothLEAdvertisementsRequest.messageType:
                _ = try UnsubscribeBluetoothLEAdvertisementsRequest(serializedBytes: payload)
                advertisementsWanted = false
                return []
            case SubscribeBluetoothConnectionsFreeRequest.messageType:
                _ = try SubscribeBluetoothConnectionsFreeRequest(serializedBytes: payload)
                slotsWanted = true
                return [.sendSlots]
            case BluetoothDeviceRequest.messageType:
                return [.device(try BluetoothDeviceRequest(serializedBytes: payload))]
            case BluetoothGATTGetServicesRequest.messageType:
                return [.gatt(address: try BluetoothGATTGetServicesRequest(serializedBytes: payload).address, .services)]
            case BluetoothGATTReadRequest.messageType:
                let request = try BluetoothGATTReadRequest(serializedBytes: payload)
                return [.gatt(address: request.address, .read(handle: request.handle))]
            case BluetoothGATTWriteRequest.messageType:
                let request = try BluetoothGATTWriteRequest(serializedBytes: payload)
                return [.gatt(address: request.address, .write(handle: request.handle, data: Array(request.data), response: request.response))]
            case BluetoothGATTReadDescriptorRequest.messageType:
                let request = try BluetoothGATTReadDescriptorRequest(serializedBytes: payload)
                return [.gatt(address: request.address, .readDescriptor(handle: request.handle))]
            case BluetoothGATTWriteDescriptorRequest.messageType:
                let request = try BluetoothGATTWriteDescriptorRequest(serializedBytes: payload)
                return [.gatt(address: request.address, .writeDescriptor(handle: request.handle, data: Array(request.data)))]
            case BluetoothGATTNotifyRequest.messageType:
                let request = try BluetoothGATTNotifyRequest(serializedBytes: payload)
                return [.gatt(address: request.address, .notify(handle: request.handle, enable: request.enable))]
            default:
                // States, services, Home Assistant's states, the time: a proxy has none to give or take.
                return []
            }
        } catch {
            return [.close("a message of type \(type) that does not decode")]
        }
    }

    var deviceInfo: DeviceInfoResponse {
        var info = DeviceInfoResponse()
        info.name = identity.name
        info.friendlyName = identity.friendlyName
        info.macAddress = identity.macAddress.description
        info.esphomeVersion = Self.esphomeVersion
        info.model = "birdctl \(identity.birdctlVersion)"
        info.manufacturer = "birdctl"
        info.bluetoothProxyFeatureFlags = Self.featureFlags
        return info
    }

    static func send(_ message: some ESPHomeMessage) throws -> Action {
        .send(type: type(of: message).messageType, payload: try message.serializedBytes())
    }
}
