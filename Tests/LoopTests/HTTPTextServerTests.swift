import Glibc
import Loop
import Testing

/// The metrics page's server, on a real loop and real sockets.
@Suite("HTTP text server")
struct HTTPTextServerTests {
    /// Started on the loop; its port (0 asked: the kernel's choice).
    static func serve(_ loop: EventLoop, _ body: @escaping @Sendable () -> String) async throws -> (HTTPTextServer, UInt16) {
        let box = ServerBox()
        #expect(await onLoop(loop) { ready in
            box.server = try? HTTPTextServer(
                loop: loop, host: "127.0.0.1", port: 0, path: "/metrics", contentType: "text/plain", body: body)
            ready()
        })
        let server = try #require(box.server)
        return (server, server.port)
    }

    /// One request on a new connection; the whole answer (the server closes the connection).
    static func ask(_ port: UInt16, _ request: String) -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return "connect failed: errno \(errno)" }
        _ = request.utf8CString.withUnsafeBufferPointer { send(fd, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            answer += chunk[..<count]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    @Test func answersAGetOfItsPathAndRefusesTheRest() async throws {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let (server, port) = try await Self.serve(loop) { "a_total 1\n" }
        let page = Self.ask(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(page.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(page)")
        #expect(page.contains("Content-Length: 10\r\n") && page.hasSuffix("\r\n\r\na_total 1\n"), "\(page)")
        #expect(Self.ask(port, "HEAD /metrics HTTP/1.0\r\n\r\n").hasSuffix("Connection: close\r\n\r\n"))
        #expect(Self.ask(port, "GET / HTTP/1.1\r\n\r\n").hasPrefix("HTTP/1.1 404 "))
        #expect(Self.ask(port, "POST /metrics HTTP/1.1\r\n\r\n").hasPrefix("HTTP/1.1 405 "))
        #expect(Self.ask(port, "hello\r\n\r\n").hasPrefix("HTTP/1.1 400 "))
        #expect(Self.ask(port, "GET /metrics HTTP/1.1\r\n" + String(repeating: "X-Long: yes\r\n", count: 800)).hasPrefix("HTTP/1.1 431 "))
        #expect(Self.listensHere(port), "the running server's listener is not seen")
        _ = await onLoop(loop) { ready in
            server.stop()
            ready()
        }
        // Stopped, it serves nothing and holds no listener. (Not "the connect
        // is refused": in a loaded run a parallel test's broker may be given
        // the freed port.)
        #expect(!Self.ask(port, "GET /metrics HTTP/1.1\r\n\r\n").contains("a_total"))
        #expect(!Self.listensHere(port), "the stopped server's listener is still open")
    }

    /// Whether this process holds a socket listening on 127.0.0.1:`port`:
    /// a LISTEN entry of /proc/net/tcp whose inode is one of our descriptors'.
    static func listensHere(_ port: UInt16) -> Bool {
        let fd = open("/proc/net/tcp", O_RDONLY)
        guard fd >= 0 else { return false }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while case let count = chunk.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }), count > 0 { bytes += chunk[..<count] }
        close(fd)
        let table = String(decoding: bytes, as: UTF8.self)
        let local = "0100007F:" + String(port, radix: 16, uppercase: true).leftPadded(to: 4)
        let inodes = table.split(separator: "\n").dropFirst().compactMap { line -> Substring? in
            let fields = line.split(separator: " ")
            // local address, remote, state (0A: LISTEN), …, inode (the tenth field)
            guard fields.count > 9, fields[1] == local, fields[3] == "0A" else { return nil }
            return fields[9]
        }
        guard !inodes.isEmpty, let directory = opendir("/proc/self/fd") else { return false }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            var target = [CChar](repeating: 0, count: 64)
            let length = readlink("/proc/self/fd/" + name, &target, target.count - 1)
            guard length > 0 else { continue }
            let link = String(decoding: target.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if inodes.contains(where: { link == "socket:[\($0)]" }) { return true }
        }
        return false
    }

    /// A port taken is said as the reason.
    @Test func aPortTakenIsAnError() async throws {
        let loop = EventLoop.started()
        defer { loop.stop() }
        let (server, port) = try await Self.serve(loop) { "" }
        let failure = FailureBox()
        _ = await onLoop(loop) { ready in
            do {
                _ = try HTTPTextServer(loop: loop, host: "127.0.0.1", port: port, path: "/", contentType: "text/plain") { "" }
            } catch {
                failure.text = "\(error)"
            }
            server.stop()
            ready()
        }
        #expect(failure.text == "bind: Address already in use")
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

private final class ServerBox: @unchecked Sendable { var server: HTTPTextServer? }
private final class FailureBox: @unchecked Sendable { var text = "" }
