import Foundation
import Synchronization
import Testing
import Threads

@Suite("Thread gate")
struct ThreadGateTests {
    /// The waiting thread sees what the opening thread wrote before opening.
    @Test func aWaitEndsWhenAnotherThreadOpensTheGate() {
        let gate = ThreadGate()
        let value = Atomic<Int>(0)
        Thread.detachNewThread {
            usleep(50_000)
            value.store(42, ordering: .relaxed)
            gate.open()
        }
        gate.wait()
        #expect(value.load(ordering: .relaxed) == 42)
    }

    /// Closed until opened; once open, every wait passes and it stays open.
    @Test func anOpenGateStaysOpen() {
        let gate = ThreadGate()
        #expect(!gate.isOpen)
        gate.open()
        gate.wait()
        gate.wait()
        #expect(gate.isOpen)
    }
}
