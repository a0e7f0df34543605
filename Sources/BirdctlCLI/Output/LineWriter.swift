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
        guard !isClosed, !buffer.isEmpty else { return }
        while !buffer.isEmpty {
            let result = write(fd, buffer, buffer.count)
            if result == buffer.count {
                buffer.removeAll(keepingCapacity: true)
            } else if result >= 0 {
                // A blocking write is rarely partial (a signal); then drop what went out.
                buffer.removeFirst(result)
            } else if errno == EINTR {
                continue
            } else {
                // EPIPE (reader gone) or another error: nothing more can be said here.
                isClosed = true
                buffer.removeAll()
                onClosed?()
                return
            }
        }
    }
}

/// Diagnostics to stderr, unbuffered (they are rare and must not be lost).
/// Messages quote peers (names, BlueZ's error texts, `--verbose` traffic), so
/// every message is escaped here, in one place; only birdctl's own styling
/// and usage texts are written as they are.
enum Diagnostics {
    static let isTTY = isatty(2) == 1
    static let useColor = isTTY && getenv("NO_COLOR") == nil

    static func say(_ text: String) {
        raw("birdctl: " + SafeText.escaped(text))
    }

    static func error(_ text: String) {
        raw("birdctl: " + (useColor ? "\u{1B}[31merror:\u{1B}[0m " : "error: ") + SafeText.escaped(text))
    }

    /// A line (or block, like a usage text) of birdctl's own, as it is.
    static func raw(_ text: String) {
        let line = Array((text + "\n").utf8)
        _ = write(2, line, line.count)
    }
}
