/// The loop's timers in deadline order: a binary min-heap of (deadline, id).
///
/// A cancelled timer's entry is not searched for: it stays until it reaches
/// the top, where the loop drops it (its id no longer names a timer), or
/// until cancelled entries outnumber live ones and the loop rebuilds the heap
/// from the timers it has. So scheduling costs O(log n), cancelling O(1), and
/// a wake-up with nothing due one look at the top — however many birds keep
/// timers (a watchdog window each).
struct TimerQueue {
    struct Entry {
        let deadline: MonotonicInstant
        /// Ids grow with each timer scheduled: among equal deadlines the
        /// older fires first.
        let id: UInt64

        func precedes(_ other: Entry) -> Bool {
            deadline < other.deadline || (deadline == other.deadline && id < other.id)
        }
    }

    private var heap: [Entry] = []

    var count: Int { heap.count }
    var first: Entry? { heap.first }

    mutating func insert(_ entry: Entry) {
        heap.append(entry)
        siftUp(from: heap.count - 1)
    }

    @discardableResult
    mutating func removeFirst() -> Entry {
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(from: 0)
        }
        return top
    }

    /// Only `live` entries kept (after many cancellations), in O(n).
    mutating func rebuild(keeping live: (Entry) -> Bool) {
        heap.removeAll { !live($0) }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(from: index) }
    }

    mutating func removeAll() { heap.removeAll() }

    private mutating func siftUp(from start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1, right = left + 1
            var first = parent
            if left < heap.count && heap[left].precedes(heap[first]) { first = left }
            if right < heap.count && heap[right].precedes(heap[first]) { first = right }
            if first == parent { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}
