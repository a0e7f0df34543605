/// `watch --all`: birds new to the fleet heard while another was being
/// connected to, in a short line (the last sighting of each). Past its end
/// a bird is not remembered (it will be heard again), so a crowd of
/// strangers advertising the Bird Service costs a few entries, not a
/// machine each. A value, no I/O: part of `BirdFleet`.
struct WaitingLine: Sendable {
    /// How many birds wait at most.
    static let limit = 64

    /// In turn: the first gets the next machine.
    private(set) var sightings: [Sighting] = []

    var isEmpty: Bool { sightings.isEmpty }
    var count: Int { sightings.count }

    /// A bird heard waits, its place kept if it waits already. A bird BlueZ
    /// holds connected already (an earlier run's link) goes first: adopted,
    /// its link counts before a new one is tried; it pushes the last out of
    /// a full line.
    mutating func heard(_ sighting: Sighting) {
        if let index = sightings.firstIndex(where: { $0.address == sighting.address }) {
            sightings.remove(at: index)
            sightings.insert(sighting, at: sighting.connected ? 0 : index)
        } else if sighting.connected {
            sightings.insert(sighting, at: 0)
            if sightings.count > Self.limit { sightings.removeLast() }
        } else if sightings.count < Self.limit {
            sightings.append(sighting)
        }
    }

    /// A bird to try again: last in line, if there is room.
    mutating func again(_ sighting: Sighting) {
        guard sightings.count < Self.limit else { return }
        sightings.append(sighting)
    }

    /// A bird that waits is heard again: its sighting is the latest, its
    /// place kept. False if it does not wait.
    mutating func update(_ sighting: Sighting) -> Bool {
        guard let index = sightings.firstIndex(where: { $0.address == sighting.address }) else { return false }
        sightings[index] = sighting
        return true
    }

    /// The first in line, out of it.
    mutating func next() -> Sighting? { sightings.isEmpty ? nil : sightings.removeFirst() }

    mutating func remove(_ address: BluetoothAddress) { sightings.removeAll { $0.address == address } }

    mutating func removeAll() { sightings.removeAll() }
}
