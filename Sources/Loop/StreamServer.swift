import CLoop
import Glibc

/// A TCP server on the loop for long-lived clients (the proxy's Home
/// Assistant): each connection's bytes go to its owner as they come, and
/// what it sends waits in a bounded queue while the client is slow. At most
/// `maximumClients` at once (one more is closed at once). Loop-confined.
public final class StreamServer: @unchecked Sendable {
    private let loop: EventLoop
    private var listener: TCPListener!
    private let maximumClients: Int
    private let maximumQueued: Int
    private let connected: (StreamConnection) -> Void
    private var connections: [Int32: StreamConnection] = [:]

    public var port: UInt16 { listener.port }
    public var clientCount: Int { connections.count }

    /// `connected` gets each new connection, to set its handlers on at once.
    /// `maximumQueued`: the bytes a connection may have waiting to be sent;
    /// a client that lets more pile up is dropped.
    public init(
        loop: EventLoop, host: String?, port: UInt16, maximumClients: Int, maximumQueued: Int,
        connected: @escaping (StreamConnection) -> Void
    ) throws(TCPListener.ListenError) {
        self.loop = loop
        self.maximumClients = maximumClients
        self.maximumQueued = maximumQueued
        self.connected = connected
        listener = try TCPListener(loop: loop, host: host, port: port) { [unowned self] fd in accepted(fd) }
    }

    /// Released on the loop, or after `stop()` there.
    deinit { stop() }

    /// Stops listening and closes every connection (on the loop).
    public func stop() {
        listener.stop()
        for connection in Array(connections.values) { connection.close() }
    }

    private func accepted(_ fd: Int32) {
        guard connections.count < maximumClients else {
            close(fd)
            return
        }
        let connection = StreamConnection(loop: loop, fd: fd, maximumQueued: maximumQueued) { [weak self] in
            self?.connections[fd] = nil
        }
        connections[fd] = connection
        connected(connection)
        connection.start()
    }
}

/// One client of a `StreamServer`. Loop-confined.
public final class StreamConnection: @unchecked Sendable {
    private let loop: EventLoop
    private let fd: Int32
    private let maximumQueued: Int
    private var readWatch: AnyObject?
    private var writeWatch: EventLoop.IOWatch?
    private var queued: [UInt8] = []
    private var sent = 0
    private var closed = false
    /// Closing once the queue is sent (`closeAfterSending`).
    private var closing = false
    private let removed: () -> Void

    /// Bytes as they come from the client.
    public var onBytes: (([UInt8]) -> Void)?
    /// The connection ended (the client closed it, an error, or `close`); called once.
    public var onClose: (() -> Void)?

    init(loop: EventLoop, fd: Int32, maximumQueued: Int, removed: @escaping () -> Void) {
        (self.loop, self.fd, self.maximumQueued, self.removed) = (loop, fd, maximumQueued, removed)
    }

    func start() {
        guard !closed else { return }
        readWatch = loop.watchReadable(fd) { [unowned self] in read() }
    }

    public var isOpen: Bool { !closed }

    /// Sends `bytes` after what is queued; false (and the connection closed)
    /// if that would put more than the bound in the queue.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        guard !closed else { return false }
        guard queued.count - sent + bytes.count <= maximumQueued else {
            close()
            return false
        }
        queued += bytes
        if writeWatch == nil { write() }
        return !closed
    }

    /// Closes once what is queued is sent (at once if nothing is).
    public func closeAfterSending() {
        guard !closed else { return }
        if queued.count == sent { return close() }
        if let readWatch { loop.unwatch(readWatch) }
        readWatch = nil
        closing = true
    }

    /// Closes now; what is queued is dropped.
    public func close() {
        guard !closed else { return }
        closed = true
        if let readWatch { loop.unwatch(readWatch) }
        if let writeWatch { loop.removeWatch(writeWatch) }
        (readWatch, writeWatch) = (nil, nil)
        Glibc.close(fd)
        removed()
        onClose?()
        onBytes = nil
        onClose = nil
    }

    private func read() {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count < 0, errno == EAGAIN || errno == EINTR { return }
        guard count > 0 else { return close() }
        onBytes?(Array(chunk[..<count]))
    }

    private func write() {
        while sent < queued.count {
            let count = queued.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            }
            if count < 0, errno == EAGAIN || errno == EINTR {
                if writeWatch == nil {
                    let watch = EventLoop.IOWatch(fd: fd, events: Int16(POLLOUT)) { [unowned self] _ in write() }
                    loop.addWatch(watch)
                    writeWatch = watch
                }
                return
            }
            guard count > 0 else { return close() }
            sent += count
            // A client that never quite catches up must not keep what it was sent.
            if sent >= 65536 && sent * 2 >= queued.count {
                queued.removeFirst(sent)
                sent = 0
            }
        }
        queued.removeAll(keepingCapacity: queued.capacity <= 65536)
        sent = 0
        if let writeWatch { loop.removeWatch(writeWatch) }
        writeWatch = nil
        if closing { close() }
    }
}
