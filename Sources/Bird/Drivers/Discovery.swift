import BlueZ
import DBus

/// Turns BlueZ discovery on (LE; Birds only, or every device) and off for one adapter,
/// remembering whether this client started it. Starts and stops run one after
/// the other: BlueZ refuses a StopDiscovery while its StartDiscovery is still
/// pending (InProgress). Loop-confined.
final class Discovery: @unchecked Sendable {
    private let client: BlueZClient
    private let everyDevice: Bool
    private(set) var adapter: ObjectPath?
    private var requested = false
    private var busy = false
    private var queue: [(@escaping @Sendable () -> Void) -> Void] = []

    /// `everyDevice`: every LE device and each change of its RSSI (the
    /// weakest RSSI there is as the filter's floor), not only Birds.
    init(client: BlueZClient, everyDevice: Bool = false) {
        self.client = client
        self.everyDevice = everyDevice
    }

    private var filter: (uuids: [String], rssi: Int16?) { everyDevice ? ([], -127) : ([BirdService.uuid], nil) }

    var isOn: Bool { requested }

    /// Starts discovery on `adapter`. On the loop, `onStarted` gets the devices
    /// BlueZ heard recently or holds connected (see `Sighting(heard:)`;
    /// `watch --all` orders them, `LinkScheduler.inTurn`), because BlueZ does not
    /// announce a known device again while its RSSI is unchanged; `onFailure`
    /// runs if BlueZ refuses.
    func start(
        on adapter: ObjectPath, onStarted: @escaping @Sendable ([Sighting]) -> Void,
        onFailure: @escaping @Sendable (BlueZError) -> Void
    ) {
        guard !requested || self.adapter != adapter else { return }
        self.adapter = adapter
        requested = true
        enqueue { [client, filter] finished in
            // Another client's discovery: BlueZ may not announce what it heard already.
            let othersDiscovering = client.tree.adapter(adapter)?.discovering == true
            client.perform(.setDiscoveryFilter(adapter: adapter, uuids: filter.uuids, rssi: filter.rssi)) { result in
                if case .failure(let error) = result {
                    finished()
                    onFailure(error)
                    return
                }
                client.perform(.startDiscovery(adapter: adapter)) { result in
                    finished()
                    // InProgress: this client's discovery is already running.
                    if case .failure(let error) = result, error.kind != .inProgress {
                        onFailure(error)
                        return
                    }
                    client.devicesInRange(on: adapter, othersDiscovering: othersDiscovering) { devices in
                        onStarted(devices.compactMap(Sighting.init(heard:)))
                    }
                }
            }
        }
    }

    /// Stops the discovery this client started; `done` runs when BlueZ answers.
    func stop(done: @escaping @Sendable () -> Void = {}) {
        guard requested, let adapter else {
            done()
            return
        }
        requested = false
        enqueue { [client] finished in
            client.perform(.stopDiscovery(adapter: adapter)) { _ in
                finished()
                done()
            }
        }
    }

    /// Runs `body` once the starts and stops asked for so far have been
    /// answered (at once when none is pending).
    func afterPending(_ body: @escaping () -> Void) {
        enqueue { finished in
            body()
            finished()
        }
    }

    /// bluetoothd or the adapter went away, and its discovery with it.
    func forget() {
        requested = false
        adapter = nil
    }

    private func enqueue(_ operation: @escaping (@escaping @Sendable () -> Void) -> Void) {
        queue.append(operation)
        runNext()
    }

    private func runNext() {
        guard !busy, !queue.isEmpty else { return }
        busy = true
        let operation = queue.removeFirst()
        operation { [self] in
            busy = false
            runNext()
        }
    }
}
