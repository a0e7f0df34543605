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

    /// Everything up to end of file, reading as `nextChunk` does.
    public func readToEndRetryingInterrupts() -> Data {
        var all = Data()
        while true {
            let chunk = nextChunk()
            if chunk.isEmpty { return all }
            all.append(chunk)
        }
    }
}

/// Reads one line from a pipe, blocking (used at start-up only).
public func readLine(from handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    while true {
        let chunk = handle.nextChunk(upTo: 1)
        guard let byte = chunk.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}
