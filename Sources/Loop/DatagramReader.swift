import CLoop
import Glibc

/// A datagram socket — a SOCK_SEQPACKET descriptor received over the bus
/// (BlueZ's AcquireNotify: one notification per datagram), or the kernel's
/// Bluetooth management channel (one event each) — read on the loop: every datagram waiting
/// when it wakes, taken in one recvmmsg of up to `batchSize`, then back to
/// epoll. End of file or an error ends it (for AcquireNotify: the link or
/// bluetoothd is gone). Owns the descriptor. Loop-confined.
public final class DatagramReader: @unchecked Sendable {
    /// Datagrams taken per system call; a fuller queue takes more calls.
    static let batchSize = 32

    private let fd: Int32
    private let loop: EventLoop
    private var watch: AnyObject?
    private let slotSize: Int
    /// `batchSize` slots of `slotSize` bytes, their iovecs and headers, set
    /// up once: recvmmsg writes only the lengths and flags back.
    private let storage: UnsafeMutableRawPointer
    private let vectors: UnsafeMutablePointer<iovec>
    private let headers: UnsafeMutablePointer<cloop_datagram_header>
    private let onDatagram: ([UInt8]) -> Void
    private var onEnd: (() -> Void)?

    /// `maximumSize`: the longest datagram (for AcquireNotify, the MTU it
    /// returned); a longer one would be cut by the kernel, so each slot is
    /// at least that.
    public init(
        fd: Int32, maximumSize: Int, loop: EventLoop, onDatagram: @escaping ([UInt8]) -> Void,
        onEnd: @escaping () -> Void
    ) {
        let count = Self.batchSize
        self.fd = fd
        self.loop = loop
        self.slotSize = max(maximumSize, 23)
        self.storage = .allocate(byteCount: count * slotSize, alignment: 16)
        self.vectors = .allocate(capacity: count)
        self.headers = .allocate(capacity: count)
        for index in 0..<count {
            vectors[index] = iovec(iov_base: storage + index * slotSize, iov_len: slotSize)
            headers[index] = cloop_datagram_header()
            headers[index].header.msg_iov = vectors + index
            headers[index].header.msg_iovlen = 1
        }
        self.onDatagram = onDatagram
        self.onEnd = onEnd
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        // With SO_PASSCRED each datagram comes with the sender's credentials;
        // given no room for them, the kernel marks it MSG_CTRUNC instead,
        // while the end (no datagram) carries no mark: so a length of 0 says
        // which it is (the POLLHUP guess below loses the datagrams queued
        // behind a batch of empty ones; FuzzDatagramReader checks that none
        // is lost). The option costs nothing measurable (docs/performance.md,
        // "Wake-ups"). Without the option, the end is guessed from POLLHUP
        // as below. The Bluetooth management channel takes the option but
        // marks nothing; its events are never empty, so none is taken for the end.
        var on: Int32 = 1
        marksDatagrams = setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size)) == 0
        watch = loop.watchReadable(fd, drains: true) { [unowned self] revents in
            readAll(hungUp: revents & Int16(POLLHUP) != 0)
        }
    }

    /// Whether each datagram is marked (MSG_CTRUNC), which tells an empty
    /// datagram from the end.
    private let marksDatagrams: Bool

    /// A length of 0 is an empty datagram (a notification may be empty) or
    /// the end, and after the end recvmmsg fills every slot left with 0s.
    /// Marked datagrams say which. Unmarked (no SO_PASSCRED): 0s followed by
    /// data are datagrams, and so are trailing 0s in a batch that was not
    /// full (it stopped at EAGAIN, which the end never gives); trailing 0s
    /// filling the batch are taken for the end once the socket says POLLHUP
    /// (then empty datagrams just before the end, and anything queued
    /// behind a batch of them, are lost with it).
    private func readAll(hungUp: Bool) {
        while watch != nil {
            let received = Int(cloop_receive_datagrams(fd, headers, UInt32(Self.batchSize)))
            if received < 0 {
                // Drained: epoll reports the socket again when more comes (edge-triggered).
                if errno == EAGAIN { return }
                if errno == EINTR { continue }
                return end()  // the socket failed (ECONNRESET…)
            }
            var datagrams = received
            let batchFull = received == Self.batchSize
            let endReached: Bool
            if marksDatagrams {
                datagrams = (0..<received).first { headers[$0].length == 0 && headers[$0].header.msg_flags & Int32(MSG_CTRUNC) == 0 } ?? received
                endReached = datagrams < received
            } else {
                while datagrams > 0 && headers[datagrams - 1].length == 0 { datagrams -= 1 }
                endReached = batchFull && datagrams < received && (hungUp || hangsUpNow())
                if !endReached { datagrams = received }
            }
            for index in 0..<datagrams {
                guard watch != nil else { return }  // a handler closed it
                let bytes = UnsafeRawBufferPointer(start: storage + index * slotSize, count: Int(headers[index].length))
                onDatagram(Array(bytes))
            }
            if endReached { return end() }
            if !batchFull { return }
        }
    }

    /// Whether the other end has closed, asked without waiting.
    private func hangsUpNow() -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLHUP) != 0
    }

    private func end() {
        let end = onEnd
        close()
        end?()
    }

    /// Stops reading and closes the descriptor (for AcquireNotify: releases
    /// the notifications; bluetoothd sees the other end close). Idempotent.
    public func close() {
        guard let watch else { return }
        loop.assertInLoop()
        loop.unwatch(watch)
        self.watch = nil
        onEnd = nil
        Glibc.close(fd)
    }

    deinit {
        close()
        storage.deallocate()
        vectors.deallocate()
        headers.deallocate()
    }
}
