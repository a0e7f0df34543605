import Bird
import BlueZ
import DBus

/// Home Assistant's notifications on its links: which characteristics
/// notify for a client, through a socket (AcquireNotify) or as signals, as
/// the central driver subscribes them. Each is asked of BlueZ once: an on
/// while one is out waits for its answer, an on while on is answered at once
/// (a client that keeps the services writes the configuration descriptor
/// itself after asking), an off while one is out takes effect when it is
/// answered. A link that ends ends its subscriptions with BlueZ too (a
/// StartNotify session would otherwise be armed again at the device's next
/// link). Loop-confined.
final class GuestNotifications: @unchecked Sendable {
    typealias Done = @Sendable (Result<Void, BlueZError>) -> Void

    private enum State {
        /// Asked of BlueZ as `attempt`, not answered: the ons waiting, and
        /// whether an off came meanwhile.
        case starting(attempt: Int, waiting: [Done], stopped: Bool)
        /// BlueZ said yes; `acquired`: through a socket.
        case started(acquired: Bool)
    }

    private struct Subscription {
        var address: BluetoothAddress
        var handle: UInt32
        var state: State
    }

    private let driver: CentralDriver
    private let notified: (BluetoothAddress, UInt32, [UInt8]) -> Void
    private var subscriptions: [ObjectPath: Subscription] = [:]
    private var attempts = 0
    /// Reads out, by characteristic: bluetoothd announces a value read as a
    /// value change just before its reply, which is no notification.
    private var readsOut: [ObjectPath: Int] = [:]

    /// `notified`: a notification for a client, by its device and API handle.
    init(driver: CentralDriver, notified: @escaping (BluetoothAddress, UInt32, [UInt8]) -> Void) {
        self.driver = driver
        self.notified = notified
    }

    /// Notifications of `path` (the API's `handle` on `address`) on.
    func on(_ path: ObjectPath, of address: BluetoothAddress, handle: UInt32, done: @escaping Done) {
        switch subscriptions[path]?.state {
        case .started(let acquired) where !acquired || driver.guestNotificationsAcquired(path):
            return done(.success(()))
        case .starting(let attempt, let waiting, _):
            subscriptions[path]?.state = .starting(attempt: attempt, waiting: waiting + [done], stopped: false)
            return
        default:
            break  // not subscribed, or its socket ended: asked again
        }
        attempts += 1
        let attempt = attempts
        subscriptions[path] = Subscription(address: address, handle: handle, state: .starting(attempt: attempt, waiting: [done], stopped: false))
        driver.subscribeGuest(path, notified: { [weak self] value in self?.fromSocket(path, value) }) { [weak self] result in
            self?.answered(path, attempt, result)
        }
    }

    /// Notifications of `path` off.
    func off(_ path: ObjectPath, done: @escaping @Sendable () -> Void) {
        if case .starting(let attempt, let waiting, _) = subscriptions[path]?.state {
            subscriptions[path]?.state = .starting(attempt: attempt, waiting: waiting, stopped: true)
            return done()
        }
        subscriptions[path] = nil
        driver.unsubscribeGuest(path, done: done)
    }

    /// The link to `address` ended or is being let go: its subscriptions end.
    func linkEnded(_ address: BluetoothAddress) {
        for (path, subscription) in subscriptions where subscription.address == address {
            subscriptions[path] = nil
            switch subscription.state {
            case .started:
                driver.unsubscribeGuest(path) {}
            case .starting(_, let waiting, _):
                // Answered now (the link is gone); what BlueZ starts is ended when it answers.
                for done in waiting { done(.failure(BlueZError(.notConnected))) }
            }
        }
    }

    /// A value change of `path` as a signal: a notification, unless the
    /// characteristic notifies through a socket or is being read (its echo).
    func signalled(_ path: ObjectPath, _ value: [UInt8]) {
        guard let subscription = subscriptions[path], case .started(acquired: false) = subscription.state, readsOut[path] == nil
        else { return }
        notified(subscription.address, subscription.handle, value)
    }

    /// A read of `path` went out, or came back.
    func reading(_ path: ObjectPath) { readsOut[path, default: 0] += 1 }
    func read(_ path: ObjectPath) {
        if let count = readsOut[path] { readsOut[path] = count > 1 ? count - 1 : nil }
    }

    private func fromSocket(_ path: ObjectPath, _ value: [UInt8]) {
        guard let subscription = subscriptions[path], case .started = subscription.state else { return }
        notified(subscription.address, subscription.handle, value)
    }

    /// BlueZ answered attempt `attempt` for `path`.
    private func answered(_ path: ObjectPath, _ attempt: Int, _ result: Result<Void, BlueZError>) {
        guard case .starting(attempt, let waiting, let stopped) = subscriptions[path]?.state else {
            // Its link ended meanwhile: what was started ends.
            if case .success = result { driver.unsubscribeGuest(path) {} }
            return
        }
        switch result {
        case .success where stopped:
            subscriptions[path] = nil
            driver.unsubscribeGuest(path) {}
        case .success:
            subscriptions[path]?.state = .started(acquired: driver.guestNotificationsAcquired(path))
        case .failure:
            subscriptions[path] = nil
        }
        for done in waiting { done(result) }
    }
}
