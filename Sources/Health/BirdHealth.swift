import Bird
import Loop

/// What an operator sees of each followed bird (`--metrics`), kept from the
/// reports: readings, links made, when it was last read, how loud it is
/// heard. A bird enters with its first link or reading and leaves when the
/// fleet forgets it (a `forgotten` report), so it is bounded as the fleet is;
/// past `limit` birds no new one enters. A value, no I/O.
public struct BirdHealth: Sendable {
    public struct Bird: Hashable, Sendable {
        public var readings = 0
        /// Links made (each poll of a polled bird is one).
        public var connections = 0
        public var lastReading: MonotonicInstant?
        public var rssi: Int16?
    }

    public static let defaultLimit = 1024
    public let limit: Int
    public private(set) var birds: [BluetoothAddress: Bird] = [:]

    public init(limit: Int = Self.defaultLimit) { self.limit = limit }

    public mutating func record(_ report: BirdCentral.Report, at now: MonotonicInstant) {
        switch report {
        case .reading(let peripheral, _, _, _):
            update(peripheral.address, entering: true) {
                $0.readings += 1
                $0.lastReading = now
            }
        case .connected(let peripheral):
            update(peripheral.address, entering: true) { $0.connections += 1 }
        case .found(let peripheral, let rssi?):
            update(peripheral.address, entering: false) { $0.rssi = rssi }
        case .forgotten(let address):
            birds[address] = nil
        default:
            break
        }
    }

    /// A followed bird heard at this RSSI.
    public mutating func heard(_ address: BluetoothAddress, rssi: Int16) {
        update(address, entering: false) { $0.rssi = rssi }
    }

    private mutating func update(_ address: BluetoothAddress, entering: Bool, _ change: (inout Bird) -> Void) {
        if birds[address] == nil {
            guard entering, birds.count < limit else { return }
            birds[address] = Bird()
        }
        change(&birds[address]!)
    }
}
