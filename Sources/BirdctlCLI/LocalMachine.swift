import Glibc

/// What options need to know of this machine: its name, its own addresses,
/// and the small files secrets are kept in.
enum LocalMachine {
    static func hostname() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }

    /// Whether `host` is this machine (127.0.0.0/8, ::1, localhost): what is
    /// sent there in plain text crosses no network.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The first 64 KiB of a file, or nil if it cannot be read.
    static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 65536)
        let count = read(fd, &bytes, bytes.count)
        guard count >= 0 else { return nil }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }

    /// Whether others than its owner can read a file holding a secret (for a
    /// warning, as ssh gives).
    static func readableByOthers(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & 0o077 != 0
    }
}
