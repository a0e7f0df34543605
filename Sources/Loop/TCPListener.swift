import CLoop
import Glibc

/// A listening TCP socket on the loop, for the loop's servers (the metrics
/// page, the proxy): it takes every connection as it comes and hands each
/// descriptor over, non-blocking. Out of descriptors, it pauses a little
/// instead of waking the loop again and again. Loop-confined.
public final class TCPListener: @unchecked Sendable {
    static let pauseWhenOutOfDescriptors = Duration.milliseconds(100)

    public enum ListenError: Error, Equatable, CustomStringConvertible {
        /// The host is not an address this machine can listen on.
        case badHost(String, String)
        case system(String, Int32)

        public var description: String {
            switch self {
            case .badHost(let host, let reason): "cannot listen on \(host): \(reason)"
            case .system(let call, let code): "\(call): \(String(cString: strerror(code)))"
            }
        }
    }

    private let loop: EventLoop
    private let listener: Int32
    private var watch: AnyObject?
    /// Listening paused while the process is out of descriptors: when it resumes.
    private var resume: EventLoop.TimerID?
    private let accepted: (Int32) -> Void
    /// The port listened on (the one chosen by the kernel for port 0).
    public let port: UInt16

    /// Listens on `host` (nil: every address, IPv6 and IPv4) and `port` (0:
    /// any free one); `accepted` gets each connection's descriptor, which is
    /// its to close. Must be called on the loop.
    public init(loop: EventLoop, host: String?, port: UInt16, accepted: @escaping (Int32) -> Void) throws(ListenError) {
        loop.assertInLoop()
        let listener = try Self.listen(host: host, port: port)
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        guard named == 0 else {
            let error = ListenError.system("getsockname", errno)
            close(listener)
            throw error
        }
        self.port = Self.port(of: address)
        self.loop = loop
        self.listener = listener
        self.accepted = accepted
        watch = loop.watchReadable(listener) { [unowned self] in acceptAll() }
    }

    /// Released on the loop, or after `stop()` there (a stopped listener touches nothing).
    deinit { stop() }

    public var isListening: Bool { watch != nil || resume != nil }

    /// Stops listening (on the loop); connections handed over are their owners'.
    public func stop() {
        guard isListening else { return }
        if let watch { loop.unwatch(watch) }
        if let resume { loop.cancel(resume) }
        (watch, resume) = (nil, nil)
        close(listener)
    }

    private static func listen(host: String?, port: UInt16) throws(ListenError) -> Int32 {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        guard let host else {
            // Every address: the IPv6 wildcard takes IPv4 too (IPV6_V6ONLY
            // off); a kernel without IPv6 has IPv4's alone.
            do { return try listen(host: "::", port: port) } catch { return try listen(host: "0.0.0.0", port: port) }
        }
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0 else { throw .badHost(host, String(cString: gai_strerror(status))) }
        defer { freeaddrinfo(found) }
        var lastError = ListenError.badHost(host, "no address")
        var entry = found
        while let info = entry?.pointee {
            entry = info.ai_next
            let fd = socket(info.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                lastError = .system("socket", errno)
                continue
            }
            var on: Int32 = 1, off: Int32 = 0
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            if info.ai_family == AF_INET6 { setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &off, socklen_t(MemoryLayout<Int32>.size)) }
            guard bind(fd, info.ai_addr, info.ai_addrlen) == 0 else {
                lastError = .system("bind", errno)
                close(fd)
                continue
            }
            guard Glibc.listen(fd, 16) == 0 else {
                lastError = .system("listen", errno)
                close(fd)
                continue
            }
            return fd
        }
        throw lastError
    }

    private static func port(of address: sockaddr_storage) -> UInt16 {
        var address = address
        let family = Int32(address.ss_family)
        return withUnsafePointer(to: &address) { pointer in
            switch family {
            case AF_INET: pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            case AF_INET6: pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            default: 0
            }
        }
    }

    private func acceptAll() {
        while watch != nil {
            let fd = cloop_accept(listener)
            guard fd >= 0 else {
                if errno == ECONNABORTED || errno == EINTR { continue }
                // Out of descriptors: the connection stays queued, and a
                // level-triggered watch would wake the loop at once, again
                // and again; listening pauses a little instead.
                if errno == EMFILE || errno == ENFILE { pauseListening() }
                return  // EAGAIN: none left
            }
            accepted(fd)
        }
    }

    private func pauseListening() {
        guard let watch else { return }
        loop.unwatch(watch)
        self.watch = nil
        resume = loop.schedule(after: Self.pauseWhenOutOfDescriptors) { [weak self] in
            guard let self, resume != nil else { return }
            resume = nil
            self.watch = loop.watchReadable(listener) { [unowned self] in acceptAll() }
        }
    }
}
