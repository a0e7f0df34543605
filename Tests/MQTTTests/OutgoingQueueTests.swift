import Testing

@testable import MQTT

@Suite("The MQTT outgoing queue")
struct OutgoingQueueTests {
    static func message(_ i: Int) -> MQTTMessage { MQTTMessage("t", String(i), retain: false) }

    @Test func keepsOrderAndHandsOverAWindowAtATime() {
        var queue = OutgoingQueue(capacity: 100, window: 3)
        for i in 0..<10 { queue.append(Self.message(i)) }
        var sent: [MQTTMessage] = []
        while let next = queue.nextToSend() { sent.append(next) }
        #expect(sent == (0..<3).map(Self.message) && queue.inFlight == 3 && queue.count == 7)
        queue.acknowledged()
        let fourth = queue.nextToSend()
        #expect(fourth == Self.message(3))
        sent.append(Self.message(3))
        #expect(queue.nextToSend() == nil)
        for _ in 0..<3 { queue.acknowledged() }
        while let next = queue.nextToSend() { sent.append(next) }
        #expect(sent.map { String(decoding: $0.payload, as: UTF8.self) } == (0..<7).map(String.init))
    }

    @Test func whenFullTheOldestGoAndAreCounted() {
        var queue = OutgoingQueue(capacity: 5, window: 100)
        var drops = 0
        for i in 0..<12 where queue.append(Self.message(i)) { drops += 1 }
        #expect(drops == 7 && queue.count == 5)
        #expect(queue.takeDropped() == 7 && queue.takeDropped() == 0)
        var kept: [MQTTMessage] = []
        while let next = queue.nextToSend() { kept.append(next) }
        #expect(kept == (7..<12).map(Self.message))
    }

    @Test func growsAndWrapsWithoutLosingOrder() {
        // Appends and sends interleaved so the ring wraps while it grows.
        var queue = OutgoingQueue(capacity: 1000, window: 1)
        var expected = 0
        var next = 0
        for round in 0..<200 {
            for _ in 0..<(round % 7 + 1) {
                queue.append(Self.message(next))
                next += 1
            }
            if let sent = queue.nextToSend() {
                #expect(sent == Self.message(expected))
                expected += 1
                queue.acknowledged()
            }
        }
        while let sent = queue.nextToSend() {
            #expect(sent == Self.message(expected))
            expected += 1
            queue.acknowledged()
        }
        #expect(expected == next && queue.isSettled)
    }

    @Test func aWaitingSnapshotIsReplacedByANewerOneInItsPlace() {
        var queue = OutgoingQueue(capacity: 4, window: 1)
        let state = { (i: Int) in MQTTMessage("bird", "state \(i)", retain: true, snapshot: true) }
        queue.append(Self.message(0))
        queue.append(state(0))
        queue.append(Self.message(1))
        queue.append(state(1))  // replaces state 0, which has not been handed over
        #expect(queue.count == 3)
        #expect(queue.nextToSend() == Self.message(0))
        queue.acknowledged()
        #expect(queue.nextToSend() == state(1))
        queue.acknowledged()
        queue.append(state(2))  // state 1 is gone: this one queues
        queue.append(Self.message(2))
        queue.append(Self.message(3))
        queue.append(Self.message(4))  // full: message 1 is dropped
        #expect(queue.takeDropped() == 1)
        queue.append(Self.message(5))  // full: state 2 is dropped ...
        queue.append(state(3))  // ... so this one queues instead of replacing it
        var rest: [MQTTMessage] = []
        while let next = queue.nextToSend() {
            rest.append(next)
            queue.acknowledged()
        }
        #expect(rest == [Self.message(3), Self.message(4), Self.message(5), state(3)])
    }

    @Test func stickyMessagesKeepTheLatestPerTopicInFirstSeenOrder() {
        var queue = OutgoingQueue(capacity: 10, window: 10)
        queue.setSticky(MQTTMessage("a/status", "online", retain: true))
        queue.setSticky(MQTTMessage("b/status", "online", retain: true))
        queue.setSticky(MQTTMessage("a/status", "offline", retain: true))
        #expect(queue.stickyMessages == [
            MQTTMessage("a/status", "offline", retain: true), MQTTMessage("b/status", "online", retain: true),
        ])
    }

    @Test func theBufferIsBoundedInBytesToo() {
        // 10 bytes of payload + 1 of topic + 64 of keeping = 75 a message.
        let big = { (i: Int) in MQTTMessage("t", String(repeating: String(i % 10), count: 10), retain: false) }
        var queue = OutgoingQueue(capacity: 1000, byteCapacity: 75 * 4, window: 100)
        var drops = 0
        for i in 0..<10 where queue.append(big(i)) { drops += 1 }
        #expect(queue.count == 4 && queue.bytes == 300 && drops == 6 && queue.takeDropped() == 6)
        var kept: [MQTTMessage] = []
        while let next = queue.nextToSend() { kept.append(next) }
        #expect(kept == (6..<10).map(big) && queue.bytes == 0)
        // One message larger than the whole bound is kept alone, not lost.
        let huge = MQTTMessage("t", String(repeating: "x", count: 1000), retain: false)
        #expect(queue.append(huge) == false && queue.count == 1)
    }

    @Test func aReconnectsStickyMessagesGoAWindowAtATimeBeforeTheQueue() {
        var queue = OutgoingQueue(capacity: 1000, window: 64)
        for bird in 0..<500 { queue.setSticky(MQTTMessage("b\(bird)/status", "offline", retain: true)) }
        queue.append(Self.message(0))
        var handed = 0
        while queue.nextToSend() != nil { handed += 1 }
        #expect(handed == 64 && queue.inFlight == 64 && queue.stickiesDue == 436)
        for _ in 0..<64 { queue.acknowledged() }
        // A reconnect: all due again, still 64 at a time, the queue after them.
        queue.makeAllStickiesDue()
        var sent: [String] = []
        while true {
            var round = 0
            while let next = queue.nextToSend() {
                sent.append(next.topic)
                round += 1
            }
            #expect(round <= 64)
            if round == 0 { break }
            for _ in 0..<round { queue.acknowledged() }
        }
        #expect(sent == (0..<500).map { "b\($0)/status" } + ["t"] && queue.isSettled)
    }

    @Test func aForgottenStickyMessageIsNeitherDueNorResent() {
        var queue = OutgoingQueue(capacity: 10, window: 10)
        queue.setSticky(MQTTMessage("a/status", "online", retain: true))
        queue.setSticky(MQTTMessage("b/status", "online", retain: true))
        queue.forgetSticky(["a/status"])
        #expect(queue.nextToSend()?.topic == "b/status" && queue.nextToSend() == nil)
        queue.acknowledged()
        queue.makeAllStickiesDue()
        #expect(queue.nextToSend()?.topic == "b/status" && queue.nextToSend() == nil)
        #expect(queue.stickyMessages.map(\.topic) == ["b/status"])
    }

    @Test func stickyMessagesSetAndSentForeverKeepNothingGrowing() {
        var queue = OutgoingQueue(capacity: 10, window: 10)
        for i in 0..<1000 {
            queue.setSticky(MQTTMessage("b\(i % 3)/status", i % 2 == 0 ? "online" : "offline", retain: true))
            #expect(queue.nextToSend() != nil)
            queue.acknowledged()
        }
        #expect(queue.dueListLength == 0 && queue.stickyMessages.count == 3 && queue.isSettled)
    }
}
