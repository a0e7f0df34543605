import Glibc

/// This process's executable, and running another in its place.
public enum ProcessImage {
    /// The path of this process's executable (/proc/self/exe); nil if it cannot be read.
    public static var executablePath: String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Runs the executable at `path` in this process's place with these
    /// arguments (the first is its name); returns errno when it cannot.
    public static func replace(with path: String, arguments: [String]) -> Int32 {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        execv(path, argv)
        let failure = errno
        for argument in argv { free(argument) }
        return failure
    }
}
