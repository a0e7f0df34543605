import Glibc

/// A SOCK_SEQPACKET descriptor received over the bus (BlueZ's AcquireNotify:
/// one notification per datagram), read on the loop: every datagram waiting
/// when it wakes, then back to poll. End of file or an error ends it (for
/// AcquireNotify: the link or bluetoothd is gone). Owns the descriptor.
/// Loop-confined.
public final class DatagramReader: @unchecked Sendable {
    private let fd: Int32
    private let loop: EventLoop
    private var watch: AnyObject?
    private var buffer: [UInt8]
    private let onDatagram: ([UInt8]) -> Void
    private var onEnd: (() -> Void)?

    /// `maximumSize`: the longest datagram (for AcquireNotify, the MTU it
    /// returned); a longer one would be cut by the kernel, so the buffer is
    /// at least that.
    public init(
        fd: Int32, maximumSize: Int, loop: EventLoop, onDatagram: @escaping ([UInt8]) -> Void,
        onEnd: @escaping () -> Void
    ) {
        self.fd = fd
        self.loop = loop
        self.buffer = [UInt8](repeating: 0, count: max(maximumSize, 23))
        self.onDatagram = onDatagram
        self.onEnd = onEnd
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        watch = loop.watchReadable(fd) { [unowned self] revents in readAll(hungUp: revents & Int16(POLLHUP) != 0) }
    }

    /// recv returns 0 both for an empty datagram (a notification may be
    /// empty) and at the end: only after poll said POLLHUP is it the end.
    /// Without it, an empty datagram ends this wake-up (should the other end
    /// close meanwhile, the next poll says so).
    private func readAll(hungUp: Bool) {
        while watch != nil {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 {
                onDatagram(Array(buffer[0..<count]))
            } else if count == 0 && !hungUp {
                return onDatagram([])
            } else if count < 0 && (errno == EAGAIN || errno == EINTR) {
                return
            } else {
                // The other end closed it, or the socket failed (ECONNRESET…).
                let end = onEnd
                close()
                end?()
                return
            }
        }
    }

    /// Stops reading and closes the descriptor (for AcquireNotify: releases
    /// the notifications; bluetoothd sees the other end close). Idempotent.
    public func close() {
        guard let watch else { return }
        loop.unwatch(watch)
        self.watch = nil
        onEnd = nil
        Glibc.close(fd)
    }

    deinit { close() }
}
