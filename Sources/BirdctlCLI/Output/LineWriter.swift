import Glibc

/// Buffered lines to a file descriptor, written in one go per loop batch, so a
/// burst of notifications costs one write(2), not one per line. Writes block:
/// a slow reader slows us down instead of losing lines. Loop-confined.
final class LineWriter: @unchecked Sendable {
    private let fd: Int32
    private var buffer: [UInt8] = []
    /// Called once when the reader has gone away (EPIPE): `watch | head -1`.
    var onClosed: (() -> Void)?
    private(set) var isClosed = false

    init(fd: Int32) {
        self.fd = fd
        buffer.reserveCapacity(64 * 1024)
    }

    func line(_ text: String) {
        line { $0 += text.utf8 }
    }

    /// A line that `build` appends to the buffer in place (the newline is added here).
    func line(_ build: (inout [UInt8]) -> Void) {
        guard !isClosed else { return }
        build(&buffer)
        buffer.append(UInt8(ascii: "\n"))
        if buffer.count >= 64 * 1024 { flush() }
    }

    func flush() {
        guard !isClosed, !Self.writeOut(&buffer, to: fd) else { return }
        // EPIPE (reader gone) or another error: nothing more can be said here.
        isClosed = true
        onClosed?()
    }

    /// Writes all of `bytes` and empties it; false if the descriptor failed
    /// (what was left is dropped). One exclusive access to the buffer for
    /// the whole flush: it runs at every wake-up of a paced `watch`.
    private static func writeOut(_ bytes: inout [UInt8], to fd: Int32) -> Bool {
        while !bytes.isEmpty {
            let result = write(fd, bytes, bytes.count)
            if result == bytes.count {
                bytes.removeAll(keepingCapacity: true)
            } else if result >= 0 {
                // A blocking write is rarely partial (a signal); then drop what went out.
                bytes.removeFirst(result)
            } else if errno != EINTR {
                bytes.removeAll()
                return false
            }
        }
        return true
    }
}
