import CLoop
import Glibc

/// A small HTTP/1.x server on the loop for a scraper such as Prometheus: each
/// connection sends one request; a GET (or HEAD) of `path` is answered with
/// the text `body()` gives at that moment, anything else with an error
/// status, and the connection is closed. A client that misbehaves costs
/// little and is dropped: at most `maximumClients` connections at once (one
/// more is closed at once), a request head of at most 8 KiB, and
/// `clientDeadline` to send its request and take the answer. Loop-confined.
public final class HTTPTextServer: @unchecked Sendable {
    public static let maximumClients = 16
    public static let maximumRequestHead = 8192
    public static let clientDeadline = Duration.seconds(10)
    private let loop: EventLoop
    private var listener: TCPListener!
    private let path: String
    private let contentType: String
    private let body: () -> String
    private var clients: [Int32: Client] = [:]
    /// The port listened on (the one chosen by the kernel for port 0).
    public var port: UInt16 { listener.port }

    private final class Client {
        var request: [UInt8] = []
        var response: [UInt8] = []
        var sent = 0
        var watch: AnyObject?
        var deadline: EventLoop.TimerID?
    }

    /// Listens on `host` (nil: every address, IPv6 and IPv4) and `port` (0:
    /// any free one). Must be called on the loop.
    public init(
        loop: EventLoop, host: String?, port: UInt16, path: String, contentType: String,
        body: @escaping () -> String
    ) throws(TCPListener.ListenError) {
        self.loop = loop
        self.path = path
        self.contentType = contentType
        self.body = body
        listener = try TCPListener(loop: loop, host: host, port: port) { [unowned self] fd in accepted(fd) }
    }

    /// Released on the loop, or after `stop()` there (a stopped server touches nothing).
    deinit { stop() }

    /// Stops listening and drops every client (on the loop).
    public func stop() {
        guard let listener, listener.isListening else { return }
        listener.stop()
        for fd in Array(clients.keys) { drop(fd) }
    }

    private func accepted(_ fd: Int32) {
        guard clients.count < Self.maximumClients else {
            close(fd)
            return
        }
        let client = Client()
        clients[fd] = client
        client.watch = loop.watchReadable(fd) { [unowned self] in read(fd) }
        client.deadline = loop.schedule(after: Self.clientDeadline) { [weak self] in
            self?.clients[fd]?.deadline = nil
            self?.drop(fd)
        }
    }

    // MARK: One client

    private func read(_ fd: Int32) {
        guard let client = clients[fd] else { return }
        var chunk = [UInt8](repeating: 0, count: 2048)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count < 0, errno == EAGAIN || errno == EINTR { return }
        guard count > 0 else { return drop(fd) }  // closed before its request ended, or an error
        client.request += chunk[..<count]
        if let head = Self.head(of: client.request) {
            return answer(fd, client, head)
        }
        if client.request.count > Self.maximumRequestHead {
            answer(fd, client, status: "431 Request Header Fields Too Large", text: "request head too long\n")
        }
    }

    /// The request head up to its blank line, if it has come.
    static func head(of request: [UInt8]) -> String? {
        let end: [UInt8] = [13, 10, 13, 10]
        guard request.count >= 4 else { return nil }
        for index in 0...(request.count - 4) where request[index..<(index + 4)].elementsEqual(end) {
            return String(decoding: request[..<index], as: UTF8.self)
        }
        return nil
    }

    private func answer(_ fd: Int32, _ client: Client, _ head: String) {
        let requestLine = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else {
            return answer(fd, client, status: "400 Bad Request", text: "not an HTTP/1 request\n")
        }
        let method = parts[0], target = parts[1]
        guard method == "GET" || method == "HEAD" else {
            return answer(fd, client, status: "405 Method Not Allowed", text: "only GET\n", extra: "Allow: GET, HEAD\r\n")
        }
        let requested = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        guard requested == path else {
            return answer(fd, client, status: "404 Not Found", text: "the metrics are at \(path)\n")
        }
        answer(fd, client, status: "200 OK", text: body(), contentType: contentType, withBody: method == "GET")
    }

    private func answer(
        _ fd: Int32, _ client: Client, status: String, text: String, contentType: String = "text/plain; charset=utf-8",
        extra: String = "", withBody: Bool = true
    ) {
        if let watch = client.watch { loop.unwatch(watch) }
        client.watch = nil
        let content = Array(text.utf8)
        let head = "HTTP/1.1 \(status)\r\nContent-Type: \(contentType)\r\nContent-Length: \(content.count)\r\n"
            + extra + "Connection: close\r\n\r\n"
        client.response = Array(head.utf8) + (withBody ? content : [])
        write(fd)
    }

    private func write(_ fd: Int32) {
        guard let client = clients[fd] else { return }
        while client.sent < client.response.count {
            let count = client.response.withUnsafeBytes {
                send(fd, $0.baseAddress! + client.sent, $0.count - client.sent, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            }
            if count < 0, errno == EAGAIN {
                // The rest when the socket takes more.
                if client.watch == nil {
                    let watch = EventLoop.IOWatch(fd: fd, events: Int16(POLLOUT)) { [unowned self] _ in write(fd) }
                    loop.addWatch(watch)
                    client.watch = watch
                }
                return
            }
            guard count > 0 else { return drop(fd) }
            client.sent += count
        }
        // All sent: no more from this client (it asked for one answer).
        shutdown(fd, Int32(SHUT_WR))
        drop(fd)
    }

    private func drop(_ fd: Int32) {
        guard let client = clients.removeValue(forKey: fd) else { return }
        if let watch = client.watch { loop.unwatch(watch) }
        if let deadline = client.deadline { loop.cancel(deadline) }
        close(fd)
    }
}
