import Foundation
import Glibc

extension FileHandle {
    /// What one read(2) returns, at most `maximum` bytes; empty at end of file
    /// (or if the descriptor fails). Foundation's `availableData`,
    /// `readData(ofLength:)` and `readDataToEndOfFile()` trap when a signal
    /// interrupts the read (EINTR: "Fatal error ... Interrupted system call",
    /// seen once in a full run); this reads again instead.
    public func nextChunk(upTo maximum: Int = 65_536) -> Data {
        var buffer = [UInt8](repeating: 0, count: maximum)
        while true {
            let count = Glibc.read(fileDescriptor, &buffer, maximum)
            if count >= 0 { return Data(buffer[..<count]) }
            if errno != EINTR { return Data() }
        }
    }

    /// What one read returns, as `nextChunk`, if anything (data or the end)
    /// comes within `timeout`; nil if nothing did.
    public func nextChunk(within timeout: Duration, upTo maximum: Int = 65_536) -> Data? {
        readable(by: ContinuousClock.now + timeout) ? nextChunk(upTo: maximum) : nil
    }

    /// Everything up to end of file if it ends within `timeout`; nil if not.
    public func readToEnd(within timeout: Duration) -> Data? {
        let deadline = ContinuousClock.now + timeout
        var all = Data()
        // The clock too: poll says "readable" at once while data keeps coming.
        while ContinuousClock.now < deadline, readable(by: deadline) {
            let chunk = nextChunk()
            if chunk.isEmpty { return all }
            all.append(chunk)
        }
        return nil
    }

    /// Whether a read would not block (data, the end or an error) before `deadline`.
    func readable(by deadline: ContinuousClock.Instant) -> Bool {
        var descriptor = pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let left = deadline - ContinuousClock.now
            // Rounded up, so that it does not wake just before the deadline and spin.
            let milliseconds = max(0, left.components.seconds * 1000 + (left.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            let ready = poll(&descriptor, 1, Int32(clamping: milliseconds))
            if ready > 0 { return true }
            if ready == 0 && ContinuousClock.now >= deadline { return false }
            if ready < 0 && errno != EINTR { return true }  // the read will say what is wrong
        }
    }
}

/// Reads one line from a pipe (used at start-up only): nil at end of file,
/// or if no whole line came within `timeout`.
public func readLine(from handle: FileHandle, within timeout: Duration = .seconds(30)) -> String? {
    let deadline = ContinuousClock.now + timeout
    var bytes: [UInt8] = []
    while ContinuousClock.now < deadline, handle.readable(by: deadline) {
        let chunk = handle.nextChunk(upTo: 1)
        guard let byte = chunk.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
    return nil
}
