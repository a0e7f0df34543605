@testable import Loop
import Glibc
import Testing

/// AcquireNotify's socket as bluetoothd hands it over: SOCK_SEQPACKET, one
/// notification per datagram, taken in batches by recvmmsg, where a length
/// of 0 is an empty datagram or the end.
@Suite("Datagram reader: batches, empty datagrams, the end")
struct DatagramReaderTests {
    @Test func emptyDatagramsAmongOthersAndLastAreDelivered() async throws {
        let sent: [[UInt8]] = [[1], [], [2, 3], [], []]
        let outcome = try await read(sent, thenClose: false, expecting: sent.count)
        #expect(outcome.received == sent)
        #expect(!outcome.ended)
    }

    @Test func moreThanABatchArriveInOrderAtFullSize() async throws {
        let sent = (0..<(DatagramReader.batchSize * 3 + 5)).map { index in
            [UInt8](repeating: UInt8(index), count: index % 3 == 0 ? 64 : index % 5)
        }
        let outcome = try await read(sent, maximumSize: 64, thenClose: false, expecting: sent.count)
        #expect(outcome.received == sent)
        #expect(!outcome.ended)
    }

    /// A batch full of 0s from an open socket: datagrams, not the end.
    @Test func aFullBatchOfEmptyDatagramsIsNotTheEnd() async throws {
        let sent = [[UInt8]](repeating: [], count: DatagramReader.batchSize + 3)
        let outcome = try await read(sent, thenClose: false, expecting: sent.count)
        #expect(outcome.received == sent)
        #expect(!outcome.ended)
    }

    @Test func whatWasQueuedBeforeTheOtherEndClosedIsDeliveredThenItEnds() async throws {
        let sent: [[UInt8]] = [[7], [], [8, 9]]
        let outcome = try await read(sent, thenClose: true, expecting: sent.count)
        #expect(outcome.received == sent)
        #expect(outcome.ended)
    }

    /// Found by FuzzDatagramReader: a batch full of empty datagrams, with
    /// more (and data) queued behind it, on a socket whose other end has
    /// closed. Every datagram arrives; only then the end.
    @Test func emptyDatagramsFillingABatchBeforeTheEndAreNotTheEnd() async throws {
        let sent: [[UInt8]] = [[1]] + [[UInt8]](repeating: [], count: DatagramReader.batchSize + 10) + [[2], []]
        let outcome = try await read(sent, thenClose: true, expecting: sent.count)
        #expect(outcome.received == sent)
        #expect(outcome.ended)
    }

    @Test func theEndAloneEndsIt() async throws {
        let outcome = try await read([], thenClose: true, expecting: 0)
        #expect(outcome.received.isEmpty)
        #expect(outcome.ended)
    }

    struct Outcome {
        var received: [[UInt8]] = []
        var ended = false
    }

    /// Queues `datagrams` on one end of a socket pair (and closes it if
    /// told), reads the other end with a DatagramReader until `expecting`
    /// have arrived (and the end, when closed), then gives the loop 50 ms
    /// more to deliver anything it should not.
    private func read(
        _ datagrams: [[UInt8]], maximumSize: Int = 23, thenClose: Bool, expecting count: Int
    ) async throws -> Outcome {
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
        let (reading, writing) = (fds[0], fds[1])
        for datagram in datagrams {
            try #require(datagram.withUnsafeBytes { send(writing, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) } == datagram.count)
        }
        if thenClose { close(writing) } else { _ = writing }
        defer { if !thenClose { close(writing) } }

        let loop = EventLoop.started()
        defer { loop.stop() }
        let box = OutcomeBox()
        let finished = await onLoop(loop) { ready in
            let settle = {
                _ = loop.schedule(after: .milliseconds(50)) { box.reader = nil; ready() }
            }
            let reader = DatagramReader(
                fd: reading, maximumSize: maximumSize, loop: loop,
                onDatagram: { datagram in
                    box.outcome.received.append(datagram)
                    if box.outcome.received.count == count && !thenClose { settle() }
                },
                onEnd: {
                    box.outcome.ended = true
                    if thenClose { settle() }
                })
            box.reader = reader
            if count == 0 && !thenClose { settle() }
        }
        #expect(finished, "the reader did not deliver what was sent within 5 s")
        return box.outcome
    }
}

/// Loop-confined: written on the loop, read after it has finished.
private final class OutcomeBox: @unchecked Sendable {
    var outcome = DatagramReaderTests.Outcome()
    var reader: DatagramReader?
}
