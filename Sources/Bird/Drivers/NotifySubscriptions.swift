import BlueZ
import Glibc
import DBus

/// How to subscribe to notifications (`--notify-method`).
public enum NotifyMethod: String, Sendable, CaseIterable {
    /// AcquireNotify where BlueZ offers it (the characteristic has
    /// NotifyAcquired), StartNotify where not or where it fails.
    case auto
    /// AcquireNotify only: a failure is the subscription's failure.
    case acquire
    /// StartNotify only: PropertiesChanged signals, which other clients of
    /// the same characteristic can share.
    case start
}

/// A driver's notify subscriptions. AcquireNotify hands over a socket that
/// carries each notification as a datagram straight from bluetoothd, past
/// dbus-daemon; bluetoothd then gives that characteristic's notifications to
/// this client only (others' StartNotify fail with "Notify acquired").
/// StartNotify sends them as PropertiesChanged signals that every client may
/// share. Notifications that arrive before either is answered are lost:
/// the machine reads the fields after subscribing. Loop-confined.
final class NotifySubscriptions: @unchecked Sendable {
    typealias Notified = @Sendable (_ characteristic: ObjectPath, _ value: [UInt8], _ mtu: Int) -> Void

    private let client: BlueZClient
    private let method: NotifyMethod
    private var sockets: [ObjectPath: DatagramReader] = [:]
    /// AcquireNotify calls not answered yet.
    private var acquiring: Set<ObjectPath> = []
    /// The command is ending (`releaseAll`): what is acquired now is released at once.
    private var releasing = false
    private var releaseWhenAcquired: [ObjectPath: @Sendable () -> Void] = [:]

    init(client: BlueZClient, method: NotifyMethod) {
        self.client = client
        self.method = method
    }

    /// Subscribes; values from an acquired socket go to `notified`, those
    /// from signals come as the client's `.valueChanged` events.
    func subscribe(
        _ characteristic: ObjectPath, notified: @escaping Notified,
        completion: @escaping @Sendable (Result<Void, BlueZError>) -> Void
    ) {
        let offered = client.tree.characteristic(characteristic)?.notifyAcquired != nil
        guard method == .acquire || (method == .auto && offered) else {
            return startNotify(characteristic, completion)
        }
        acquiring.insert(characteristic)
        client.perform(.acquireNotify(characteristic: characteristic)) { [self] result in
            acquiring.remove(characteristic)
            if releasing {
                // Answered after the command began to end: ended there before the exit.
                let done = releaseWhenAcquired.removeValue(forKey: characteristic) ?? {}
                guard case .success(let acquired) = result else { return done() }
                return client.perform(.stopNotify(characteristic: characteristic)) { _ in
                    close(acquired.fd)
                    done()
                }
            }
            switch result {
            case .success(let acquired):
                sockets[characteristic]?.close()
                sockets[characteristic] = DatagramReader(
                    fd: acquired.fd, maximumSize: acquired.mtu, loop: client.connection.loop,
                    onDatagram: { value in notified(characteristic, value, acquired.mtu) },
                    // The link or bluetoothd went: its own events say so.
                    onEnd: { [self] in sockets[characteristic] = nil })
                completion(.success(()))
            case .failure where method == .auto:
                // NotPermitted (another client holds it), InProgress (another
                // client has StartNotify), NotSupported (indicate only)…
                startNotify(characteristic, completion)
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// Whether `characteristic`'s notifications come through a socket (not as signals).
    func isAcquired(_ characteristic: ObjectPath) -> Bool { sockets[characteristic] != nil }

    private func startNotify(_ characteristic: ObjectPath, _ completion: @escaping @Sendable (Result<Void, BlueZError>) -> Void) {
        client.perform(.startNotify(characteristic: characteristic)) { completion($0.map { _ in }) }
    }

    /// Ends a subscription. An acquired socket is closed only once
    /// bluetoothd has answered StopNotify, which ends it there first: a
    /// socket that hangs up after its owner has left the bus is
    /// bluetoothd's use-after-free (`sock_hup`, up to 5.85; docs/testing.md),
    /// and the hang-up waits for bluetoothd to be idle. A StartNotify session
    /// is stopped.
    func unsubscribe(_ characteristic: ObjectPath, done: @escaping @Sendable () -> Void) {
        let socket = sockets.removeValue(forKey: characteristic)
        client.perform(.stopNotify(characteristic: characteristic)) { _ in
            socket?.close()
            done()
        }
    }

    /// The link to `device` went: its sockets are dead.
    func linkEnded(_ device: ObjectPath) {
        for (path, socket) in sockets where path.isDescendant(of: device) {
            socket.close()
            sockets[path] = nil
        }
    }

    /// On the way out, before the bus connection closes: each acquired
    /// socket ended as `unsubscribe` ends it, and one still being acquired
    /// once its answer comes (`cleanup` holds the exit for each, within the
    /// driver's exit wait).
    func releaseAll(_ cleanup: ((@escaping @Sendable () -> Void) -> Void) -> Void) {
        releasing = true
        for characteristic in Array(sockets.keys) {
            cleanup { [self] done in unsubscribe(characteristic, done: done) }
        }
        for characteristic in acquiring {
            cleanup { [self] done in releaseWhenAcquired[characteristic] = done }
        }
    }
}
