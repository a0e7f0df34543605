import Bird

/// `serve`'s side of the health page: what centrals do with the Bird it
/// plays. Three fields at most are notified, so it is bounded.
public struct PeripheralHealth: Sendable {
    /// Whether the advertisement is registered.
    public var advertising = false
    /// Fields a central has notifications of now (BlueZ counts one per
    /// field, however many centrals subscribed).
    public var notifyingFields: Set<BirdField> = []
    /// Writes from centrals taken, and refused (a bad value).
    public var writes = 0
    public var refusedWrites = 0

    public init() {}

    public mutating func record(_ event: BirdPeripheral.Event) {
        switch event {
        case .advertising: advertising = true
        case .stoppedAdvertising: advertising = false
        case .valueChanged(_, let byCentral): if byCentral { writes += 1 }
        case .refusedWrite: refusedWrites += 1
        case .subscription(let field, let subscribed):
            if subscribed { notifyingFields.insert(field) } else { notifyingFields.remove(field) }
        }
    }
}
