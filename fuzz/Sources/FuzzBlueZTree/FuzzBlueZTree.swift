import Bird
import BlueZ
import DBus
import FuzzSupport

/// Any sequence of D-Bus messages as BlueZ's object tree and its signals:
/// each chunk (a 2-byte little-endian length, then that many bytes) that
/// libdbus accepts is applied as GetManagedObjects' reply, InterfacesAdded /
/// InterfacesRemoved or PropertiesChanged. The tree and the events it emits
/// must agree, and a `watch --all` fleet fed those events as the driver feeds
/// it must never act after it has finished.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBlueZTree(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var tree = ObjectTree()
    var fleet = BirdFleet(
        BirdCentral.Configuration(mode: .watch(reconnect: true), maximumReadings: 50, duration: .seconds(60)), all: true)
    let adapter = AdapterChoice(path: "/org/bluez/hci0", name: "hci0", powered: true)
    var finished = false
    func run(_ actions: [BirdFleet.Action]) {
        require(!finished || actions.isEmpty, "the fleet acted after it finished: \(actions)")
        if actions.contains(where: { if case .finish = $0 { true } else { false } }) { finished = true }
    }
    run(fleet.bluetoothReady(adapter: adapter, requested: nil))

    var slots = NotificationSlots()  // as BlueZClient keeps them across signals
    var offset = 0
    while offset + 2 <= bytes.count {
        let length = Int(bytes[offset]) | Int(bytes[offset + 1]) << 8
        offset += 2
        let chunk = Array(bytes[offset..<min(bytes.count, offset + length)])
        offset += length
        guard let message = try? Message.fromWire(chunk) else { continue }
        var events: [BlueZEvent] = []
        switch message.member {
        case "InterfacesAdded", "InterfacesRemoved": tree.applyObjectManagerSignal(message) { events.append($0) }
        case "PropertiesChanged":
            tree.applyPropertiesChanged(message, slots: &slots) { events.append($0) }
        default:
            if let value = try? message.arguments().first, let loaded = try? ObjectTree(managedObjects: value) {
                tree = loaded
            }
        }
        for case .valueChanged(let path, _) in events {
            require(path == message.path, "a notification of \(String(describing: message.path)) reported as from \(path)")
        }
        for event in events {
            check(event, against: tree)
            if let sighting = Sighting(event) { run(fleet.deviceSighted(sighting)) }
            switch event {
            case .deviceChanged(let device, let changed):
                if changed.contains(.connected), !device.connected { run(fleet.deviceDisconnected(device.path)) }
                if changed.contains(.servicesResolved), device.servicesResolved {
                    run(fleet.servicesResolved(device: device.path, characteristics: tree.birdCharacteristics(of: device.path)))
                }
                // The driver's Connect replies: a fleet machine connecting to this device hears "connected".
                if device.connected {
                    for id in 0..<8 where fleet.runs(id) { run(fleet.connectReplied(id, .success(()))) }
                }
            case .deviceRemoved(let path): run(fleet.deviceRemoved(path))
            case .characteristicRemoved(let path): run(fleet.characteristicRemoved(path))
            case .valueChanged(let path, let value): run(fleet.valueChanged(path, value))
            default: break
            }
        }
    }
    run(fleet.stopRequested())
    return 0
}

/// An event says what the tree now holds.
func check(_ event: BlueZEvent, against tree: ObjectTree) {
    switch event {
    case .adapterAdded(let adapter), .adapterChanged(let adapter, _):
        require(tree.adapter(adapter.path) == adapter, "adapter event disagrees with the tree at \(adapter.path)")
    case .deviceAdded(let device), .deviceChanged(let device, _):
        require(tree.device(device.path) == device, "device event disagrees with the tree at \(device.path)")
        for (_, path) in tree.birdCharacteristics(of: device.path) {
            require(path.isDescendant(of: device.path), "\(path) is not under \(device.path)")
        }
    case .serviceAdded(let service):
        require(tree.service(service.path) == service, "service event disagrees at \(service.path)")
    case .characteristicAdded(let characteristic), .characteristicChanged(let characteristic, _):
        require(tree.characteristic(characteristic.path) == characteristic, "characteristic event disagrees at \(characteristic.path)")
    case .adapterRemoved(let path): require(tree.adapter(path) == nil, "adapter \(path) removed but still there")
    case .deviceRemoved(let path): require(tree.device(path) == nil, "device \(path) removed but still there")
    case .serviceRemoved(let path): require(tree.service(path) == nil, "service \(path) removed but still there")
    case .characteristicRemoved(let path):
        require(tree.characteristic(path) == nil, "characteristic \(path) removed but still there")
    case .valueChanged(let path, let value):
        if let characteristic = tree.characteristic(path) {
            require(characteristic.value == value, "Value of \(path) is not what was notified")
        }
    case .ready, .unavailable:
        break
    }
}
