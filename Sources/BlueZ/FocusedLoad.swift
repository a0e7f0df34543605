import DBus

/// Loads only what a command about one device needs: every adapter, and under
/// each the object of the device at one address with everything below it
/// (its GATT services and characteristics), or the adapters alone (`scan`) —
/// in place of GetManagedObjects,
/// whose reply grows with every device BlueZ ever cached: a read would cost
/// as much as BlueZ's cache is large (see docs/performance.md, 'A read and
/// BlueZ's cache').
///
/// Paths come from Introspect, properties from GetAll, issued together. The
/// client applies signals to the tree while this runs; each reply then sets
/// what it reports. bluetoothd sends in order, so a signal before a reply is
/// already reflected in it, and the tree ends as its messages left it.
/// Loop-confined.
final class FocusedLoad: @unchecked Sendable {
    /// `dev_F0_0D_B1_7D_00_01`: the path element BlueZ gives a device; nil: the adapters alone.
    let deviceElement: String?
    private let client: BlueZClient
    /// False once the client started another load (bluetoothd came back):
    /// this one's replies then change nothing.
    private let isCurrent: @Sendable () -> Bool
    private var inFlight = 0
    private var failure: BlueZError?
    private var finished: (@Sendable (Result<Void, BlueZError>) -> Void)?

    /// `address`: the device to load; nil for the adapters alone.
    init(client: BlueZClient, address: String?, isCurrent: @escaping @Sendable () -> Bool) {
        self.client = client
        self.isCurrent = isCurrent
        deviceElement = address.map(ObjectTree.pathElement(ofDevice:))
    }

    /// `finished` runs once, on the loop, when every reply is in.
    func start(finished: @escaping @Sendable (Result<Void, BlueZError>) -> Void) {
        client.connection.loop.assertInLoop()
        self.finished = finished
        call(.introspect(ObjectPath(BlueZNames.root))) { [self] root in
            for adapter in root.children {
                let path = ObjectPath(BlueZNames.root + "/" + adapter)
                // Not introspected: its children are every cached device.
                loadInterfaces([BlueZNames.adapter], of: path)
                if let deviceElement, Introspection.isPathElement(deviceElement) {
                    load(ObjectPath(path.rawValue + "/" + deviceElement), absentIsFine: true)
                }
            }
        }
    }

    /// Loads `object` and everything below it (a connected device heard
    /// again: its GATT objects); `finished` as for `start`.
    func start(below object: ObjectPath, finished: @escaping @Sendable (Result<Void, BlueZError>) -> Void) {
        self.finished = finished
        load(object, absentIsFine: true)
    }

    /// An object and everything below it.
    private func load(_ path: ObjectPath, absentIsFine: Bool = false) {
        call(.introspect(path), absentIsFine: absentIsFine) { [self] found in
            loadInterfaces(found.interfaces.filter { !$0.hasPrefix("org.freedesktop.DBus.") }, of: path)
            for child in found.children { load(ObjectPath(path.rawValue + "/" + child), absentIsFine: true) }
        }
    }

    private func loadInterfaces(_ interfaces: [String], of path: ObjectPath) {
        for interface in interfaces {
            call(.getAll(path, interface: interface), absentIsFine: true) { [self] properties in
                client.tree.set(path, interface: interface, properties: properties)
            }
        }
    }

    /// Counts the call in flight; an object or interface that is not there
    /// (gone meanwhile, or never there) is skipped when `absentIsFine`.
    private func call<Output>(
        _ request: BlueZRequest<Output>, absentIsFine: Bool = false, then: @escaping @Sendable (Output) -> Void
    ) {
        inFlight += 1
        client.perform(request) { [self] result in
            inFlight -= 1
            switch result {
            case .success(let output): if failure == nil, isCurrent() { then(output) }
            case .failure(let error) where absentIsFine && (error.kind == .notFound || error.kind == .notSupported): break
            case .failure(let error): failure = failure ?? error
            }
            if inFlight == 0, let finished {
                self.finished = nil
                finished(failure.map { .failure($0) } ?? .success(()))
            }
        }
    }
}

extension BlueZRequest where Output == Introspection {
    static func introspect(_ path: ObjectPath) -> Self {
        Self(path, "org.freedesktop.DBus.Introspectable", "Introspect") { reply throws(BlueZError) in
            guard let xml = reply.first?.string else { throw BlueZError(.unexpectedReply, message: "Introspect of \(path)") }
            return Introspection(xml: xml)
        }
    }
}

extension BlueZRequest where Output == ObjectTree.Properties {
    static func getAll(_ path: ObjectPath, interface: String) -> Self {
        Self(path, BlueZNames.properties, "GetAll", [.string(interface)]) { reply throws(BlueZError) in
            guard let properties = reply.first?.propertyMap else {
                throw BlueZError(.unexpectedReply, message: "GetAll of \(interface) on \(path)")
            }
            return properties
        }
    }
}
