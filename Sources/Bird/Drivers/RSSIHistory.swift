import DBus
import Glibc

/// The last signal-strength samples of one device and their recency-weighted
/// average: a sample's weight halves every `halfLife`, so a device that moved
/// closer shows it within a few seconds while single outliers are damped.
public struct RSSIHistory: Hashable, Sendable {
    public struct Sample: Hashable, Sendable {
        public var rssi: Int16
        public var time: MonotonicInstant
    }

    public static let capacity = 20
    public private(set) var samples: [Sample] = []
    public var halfLife: Duration

    public init(halfLife: Duration = .seconds(2)) {
        self.halfLife = halfLife
    }

    public mutating func add(_ rssi: Int16, at time: MonotonicInstant) {
        samples.append(Sample(rssi: rssi, time: time))
        if samples.count > Self.capacity { samples.removeFirst(samples.count - Self.capacity) }
    }

    /// The weighted average as of `now`, rounded to the nearest dBm; nil with no samples.
    public func smoothed(at now: MonotonicInstant) -> Int? {
        guard !samples.isEmpty else { return nil }
        let halfLifeSeconds = Self.seconds(halfLife)
        var total = 0.0
        var weights = 0.0
        for sample in samples {
            let age = max(0, Self.seconds(now - sample.time))
            let weight = exp2(-age / halfLifeSeconds)
            total += weight * Double(sample.rssi)
            weights += weight
        }
        // Samples far older than the half-life underflow to zero weight: then
        // every sample is equally stale, so fall back to the plain mean.
        guard weights > 0 else {
            return Int((Double(samples.map { Int($0.rssi) }.reduce(0, +)) / Double(samples.count)).rounded())
        }
        return Int((total / weights).rounded())
    }

    private static func seconds(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) + Double(atto) / 1e18
    }
}
