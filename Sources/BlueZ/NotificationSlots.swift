import DBus

/// Where the `Value`s of the last few characteristics that notified live in
/// the tree, so that the next notification from one of them updates the
/// tree without hashing its path, interface and property name, the largest
/// items of birdctl's own share of a notification (see docs/performance.md,
/// 'The signal path'). A slot holds while the tree's keys are as they were
/// (`ObjectTree.structure`): dictionary indices stay valid until a key is
/// added or removed, in copies of the tree too.
public struct NotificationSlots {
    struct Slot {
        /// The tree's own key: later comparisons with it are identity checks.
        let path: ObjectPath
        let structure: Int
        let object: Dictionary<ObjectPath, [String: ObjectTree.Properties]>.Index
        let interface: Dictionary<String, ObjectTree.Properties>.Index
        /// Where its `Value` is; nil while it has none.
        let value: ObjectTree.Properties.Index?
    }

    /// A bird has three characteristics; a fleet of birds more.
    static let capacity = 8
    private var slots: [Slot] = []

    public init() {}

    /// The slot of the message's path, if it still holds.
    func slot(for message: Message, structure: Int) -> Slot? {
        for slot in slots where slot.structure == structure && message.hasPath(slot.path) { return slot }
        return nil
    }

    mutating func remember(_ slot: Slot) {
        slots.removeAll { $0.structure != slot.structure || $0.path == slot.path }
        if slots.count == Self.capacity { slots.removeLast() }
        slots.insert(slot, at: 0)
    }
}
