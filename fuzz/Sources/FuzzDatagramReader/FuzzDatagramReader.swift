import DBus
import Dispatch
import FuzzBusSupport
import FuzzSupport
import Glibc

/// Any datagrams (up to 80, each up to 255 bytes, empty ones included) sent
/// over a SOCK_SEQPACKET socketpair to a DatagramReader on a connection's
/// loop, as bluetoothd sends AcquireNotify's notifications, then the other
/// end closed or not. What arrives is what was sent, in order, each cut to
/// the reader's slot as the kernel cuts it, none lost (empty ones before the
/// end included); the end is reported once, after the last datagram, when
/// (and only when) the other end closed.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDatagramReader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(Array(UnsafeBufferPointer(start: data, count: size)))
    let maximumSize = Int(input.byte() % 96)
    let slot = max(maximumSize, 23)
    let hangUp = input.bool()
    var sent: [[UInt8]] = []
    while !input.isEmpty, sent.count < 80 { sent.append(input.bytes(upTo: 255)) }
    let expected = sent.map { Array($0.prefix(slot)) }

    var pair: [Int32] = [0, 0]
    guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
        fatalError("socketpair: \(errno)")
    }
    let (readEnd, writeEnd) = (pair[0], pair[1])
    _ = fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK)
    let received = Received(expecting: hangUp ? nil : expected.count)
    let loop = Shared.connection.loop
    let holder = ReaderHolder()
    let created = DispatchSemaphore(value: 0)
    loop.execute {
        holder.reader = DatagramReader(
            fd: readEnd, maximumSize: maximumSize, loop: loop,
            onDatagram: { received.add($0) }, onEnd: { received.end() })
        created.signal()
    }
    created.wait()
    // Sent while the loop reads: some batches find the queue half full.
    for datagram in sent {
        let written = datagram.withUnsafeBytes { send(writeEnd, $0.baseAddress, $0.count, 0) }
        require(written == datagram.count, "send: \(written), errno \(errno)")
    }
    if hangUp { close(writeEnd) }
    guard received.done.wait(timeout: .now() + .seconds(10)) == .success else {
        fatalError("after 10 s: \(received.datagrams.count) of \(expected.count) datagrams, ended \(received.ended)")
    }
    let closed = DispatchSemaphore(value: 0)
    loop.execute {
        holder.reader?.close()
        holder.reader = nil
        closed.signal()
    }
    closed.wait()
    if !hangUp { close(writeEnd) }

    let got = received.datagrams
    require(received.endings == (hangUp ? 1 : 0), "ended \(received.endings) times (other end closed: \(hangUp))")
    require(got.count == expected.count, "\(got.count) datagrams arrived of \(expected.count) sent")
    require(got == expected, "datagrams changed or out of order")
    return 0
}

private enum Shared {
    static let connection = FuzzBus.connect()
}

private final class ReaderHolder: @unchecked Sendable {
    var reader: DatagramReader?  // on the loop
}

/// What the reader delivered (on the loop), read by the fuzzer after `done`.
private final class Received: @unchecked Sendable {
    private(set) var datagrams: [[UInt8]] = []
    private(set) var endings = 0
    var ended: Bool { endings > 0 }
    let done = DispatchSemaphore(value: 0)
    private let expecting: Int?

    /// `expecting`: signal after that many datagrams (nil: at the end).
    init(expecting: Int?) {
        self.expecting = expecting
        if expecting == 0 { done.signal() }
    }

    func add(_ datagram: [UInt8]) {
        datagrams.append(datagram)
        if datagrams.count == expecting { done.signal() }
    }

    func end() {
        endings += 1
        if expecting == nil { done.signal() }
    }
}
