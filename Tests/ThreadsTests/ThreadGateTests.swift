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

    @Test func anOpenGateStaysOpen() {
        let gate = ThreadGate()
        gate.open()
        gate.wait()
        gate.wait()
    }
}
