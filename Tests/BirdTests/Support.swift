// What the Bird layer's tests share: a bird, its adapter and characteristics,
// and machines brought to a state through real events.
import Bird
import BlueZ
import DBus
import Testing

typealias Action = BirdCentral.Action

let adapter = AdapterChoice(path: "/org/bluez/hci0", name: "hci0", powered: true)
let device: ObjectPath = "/org/bluez/hci0/dev_F0_0D_B1_7D_00_01"
let robin = BirdCentral.Peripheral(path: device, address: "F0:0D:B1:7D:00:01", name: "Robin")
let birdSighting = Sighting(
    device: device, address: "F0:0D:B1:7D:00:01", name: "Robin", rssi: -50, uuids: [BirdService.uuid.uppercased()])
let characteristics: [BirdField: ObjectPath] = [
    .name: ObjectPath("\(device)/service000a/char000d"), .color: ObjectPath("\(device)/service000a/char000b"),
    .alpha: ObjectPath("\(device)/service000a/char000f"),
]
let transient = BlueZError(.failed, name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local")

/// Builds a machine in a given state through real events.
struct Machine {
    var central: BirdCentral

    init(_ mode: BirdCentral.Configuration.Mode = .read, fields: [BirdField] = BirdField.allCases,
         configure: (inout BirdCentral.Configuration) -> Void = { _ in }) {
        var configuration = BirdCentral.Configuration(mode: mode, fields: fields)
        configure(&configuration)
        central = BirdCentral(configuration)
    }

    func scanning() -> Machine {
        var m = self
        _ = m.central.bluetoothReady(adapter: adapter)
        return m
    }

    /// Connecting to Robin; without an address, once the listening window ends.
    func connecting() -> Machine {
        var m = scanning()
        _ = m.central.deviceSighted(birdSighting)
        if m.central.configuration.address == nil { _ = m.central.timerFired(.listen) }
        return m
    }

    func resolving() -> Machine {
        var m = connecting()
        _ = m.central.connectReplied(.success(()))
        return m
    }

    /// Services resolved: a read is reading, a watch subscribing.
    func resolved() -> Machine {
        var m = resolving()
        _ = m.central.servicesResolved(device: device, characteristics: characteristics)
        return m
    }

    /// Reading; a watch has subscribed first.
    func reading() -> Machine {
        var m = resolved()
        guard case .watch = m.central.configuration.mode else { return m }
        for field in m.central.configuration.fields { _ = m.central.notifyStarted(field, .success(())) }
        return m
    }

    func streaming() -> Machine {
        var m = reading()
        for field in m.central.configuration.fields { _ = m.central.readCompleted(field, .success(Array("80".utf8))) }
        return m
    }
}

extension BirdFleet {
    /// Machine `id`'s connect deadline passed with `up` connected on the
    /// adapter, and the Connect it gave up was answered, as bluetoothd answers
    /// one the deadline's Disconnect cancelled: the gate lets the next through.
    mutating func deadlinePassed(_ id: MachineID, up: [ObjectPath], adapter: String = "hci0") -> [Action] {
        connectDeadlinePassed(id, connectedDevices: up, adapter: adapter) + connectReplied(id, .failure(transient))
    }
}
