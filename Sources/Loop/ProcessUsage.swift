import Glibc

/// What this process uses, from /proc/self (`--metrics`): CPU time, resident
/// memory and open descriptors. Nil fields: /proc could not be read.
public struct ProcessUsage: Sendable {
    /// User and system CPU time, seconds.
    public var cpuSeconds: Double?
    public var residentBytes: Int?
    public var openDescriptors: Int?

    public static func current() -> ProcessUsage {
        var usage = ProcessUsage()
        // /proc/self/stat: "pid (comm) state ..." — the name may hold spaces
        // and parentheses, so fields are counted after the last ')'.
        if let stat = read("/proc/self/stat"), let close = stat.lastIndex(of: ")") {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // utime and stime are fields 14 and 15 of the whole line: 12th and 13th after the name.
            if fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) {
                usage.cpuSeconds = (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
            }
        }
        if let statm = read("/proc/self/statm"), let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) {
            usage.residentBytes = pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        }
        usage.openDescriptors = countDescriptors()
        return usage
    }

    /// A small /proc file's text (at most 4 KiB).
    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// Entries of /proc/self/fd, less the one the listing itself holds open.
    private static func countDescriptors() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { $0.first == UInt8(ascii: ".") }
            if !isDot { count += 1 }
        }
        return count - 1
    }
}
