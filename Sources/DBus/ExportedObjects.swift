/// One interface of an object this process exports on the bus.
public struct ExportedInterface: Sendable {
    /// Runs on the loop; returns the reply's arguments or throws the error to send.
    public typealias Method = @Sendable (MethodCall) throws(DBusError) -> [DBusValue]
    /// Validates and accepts a `Properties.Set`; throw to refuse (the value stays).
    public typealias Setter = @Sendable (_ property: String, _ value: DBusValue) throws(DBusError) -> Void

    /// Answers later (a person is asked, say): call `reply` once, on the loop.
    public typealias DeferredMethod = @Sendable (MethodCall, _ reply: @escaping @Sendable (Result<[DBusValue], DBusError>) -> Void) -> Void

    public var name: String
    public var properties: [String: DBusValue]
    public var methods: [String: Method]
    public var deferredMethods: [String: DeferredMethod]
    /// Properties that `Set` may change; each change goes through `setter` first.
    public var writable: Set<String>
    public var setter: Setter?

    public init(
        _ name: String, properties: [String: DBusValue] = [:], methods: [String: Method] = [:],
        deferredMethods: [String: DeferredMethod] = [:], writable: Set<String> = [], setter: Setter? = nil
    ) {
        self.name = name
        self.properties = properties
        self.methods = methods
        self.deferredMethods = deferredMethods
        self.writable = writable
        self.setter = setter
    }
}

/// An incoming call to an exported method.
public struct MethodCall: Sendable {
    public let message: Message
    public let arguments: [DBusValue]
    public var path: ObjectPath { message.path ?? "/" }
    public var sender: String? { message.sender }
}

let propertiesInterface = "org.freedesktop.DBus.Properties"
let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
let introspectableInterface = "org.freedesktop.DBus.Introspectable"

extension Connection {
    /// Exports (or replaces) an object. Under an object manager, emits InterfacesAdded.
    public func export(_ path: ObjectPath, _ interfaces: [ExportedInterface]) {
        loop.execute { [self] in
            exports.objects[path, default: [:]].merge(interfaces.map { ($0.name, $0) }) { $1 }
            if let manager = exports.manager(above: path) {
                let added = interfaces.map { DictEntry(.string($0.name), .propertyMap($0.properties)) }
                emitNow(manager, objectManagerInterface, "InterfacesAdded", [
                    .objectPath(path), .dictionary(key: "s", value: "a{sv}", added),
                ])
            }
        }
    }

    /// Removes an exported object. Under an object manager, emits InterfacesRemoved.
    public func unexport(_ path: ObjectPath) {
        loop.execute { [self] in
            guard let removed = exports.objects.removeValue(forKey: path) else { return }
            if let manager = exports.manager(above: path) {
                emitNow(manager, objectManagerInterface, "InterfacesRemoved", [
                    .objectPath(path), .strings(removed.keys.sorted()),
                ])
            }
        }
    }

    /// Only the current owner of the well-known `name` may call the objects at
    /// or below `root` (Properties and Introspect included); any other caller
    /// gets org.freedesktop.DBus.Error.AccessDenied. For objects that only a
    /// service (bluetoothd) is meant to drive.
    public func restrictCalls(below root: ObjectPath, toOwnerOf name: String) {
        loop.execute { [self] in
            trackOwner(of: name)
            exports.restrictions[root] = name
        }
    }

    /// Makes `path` an org.freedesktop.DBus.ObjectManager for the objects below it.
    public func addObjectManager(at path: ObjectPath) {
        loop.execute { [self] in exports.managers.insert(path) }
    }

    /// Changes an exported property and emits PropertiesChanged when it differs.
    public func setProperty(_ path: ObjectPath, interface: String, name: String, value: DBusValue) {
        loop.execute { [self] in
            guard exports.objects[path]?[interface] != nil,
                exports.objects[path]?[interface]?.properties[name] != value
            else { return }
            exports.objects[path]?[interface]?.properties[name] = value
            emitPropertiesChanged(path, interface, [name: value])
        }
    }

    /// Emits a signal from `path`.
    public func emitSignal(_ path: ObjectPath, interface: String, member: String, arguments: [DBusValue]) {
        loop.execute { [self] in emitNow(path, interface, member, arguments) }
    }

    fileprivate func emitNow(_ path: ObjectPath, _ interface: String, _ member: String, _ arguments: [DBusValue]) {
        guard let message = try? Message.signal(path: path, interface: interface, member: member, arguments: arguments)
        else { return }
        _ = sendNow(message)
    }

    fileprivate func emitPropertiesChanged(_ path: ObjectPath, _ interface: String, _ changed: [String: DBusValue]) {
        emitNow(path, propertiesInterface, "PropertiesChanged", [
            .string(interface), .propertyMap(changed), .strings([]),
        ])
    }
}

/// The objects a connection exports, and the standard interfaces on them.
/// Loop-confined (owned by the connection).
final class ExportRegistry {
    var objects: [ObjectPath: [String: ExportedInterface]] = [:]
    var managers: Set<ObjectPath> = []
    /// Subtrees only the owner of a well-known name may call: root → name.
    var restrictions: [ObjectPath: String] = [:]

    /// The name whose owner alone may call `path`, if any.
    func restriction(for path: ObjectPath) -> String? {
        restrictions.first { path.isDescendant(of: $0.key) }?.value
    }

    func manager(above path: ObjectPath) -> ObjectPath? {
        managers.filter { $0 != path && path.isDescendant(of: $0) }.max { $0.rawValue.count < $1.rawValue.count }
    }

    /// Answers a method call; nil when there is nothing to send.
    func handle(_ message: Message, on connection: Connection) -> Message? {
        guard let path = message.path, let member = message.member else { return nil }
        let interface = message.interface
        let arguments: [DBusValue]
        do {
            arguments = try message.arguments()
        } catch {
            return message.makeErrorReply(error)
        }
        let call = MethodCall(message: message, arguments: arguments)
        if let deferred = deferredMethod(path: path, interface: interface, member: member) {
            deferred(call) { [weak connection] result in
                guard let connection, message.expectsReply else { return }
                let reply: Message
                switch result {
                case .success(let values): reply = (try? message.makeReply(values)) ?? message.makeErrorReply(DBusError(.failed, "bad reply"))
                case .failure(let error): reply = message.makeErrorReply(error)
                }
                connection.send(reply)
            }
            return nil
        }
        do {
            let result = try dispatch(path: path, interface: interface, member: member, call: call, connection: connection)
            return try message.makeReply(result)
        } catch {
            return message.makeErrorReply(error)
        }
    }

    private func deferredMethod(path: ObjectPath, interface: String?, member: String) -> ExportedInterface.DeferredMethod? {
        guard let interfaces = objects[path] else { return nil }
        let candidates = interface.map { name in interfaces[name].map { [$0] } ?? [] } ?? Array(interfaces.values)
        return candidates.lazy.compactMap { $0.deferredMethods[member] }.first
    }

    private func dispatch(
        path: ObjectPath, interface: String?, member: String, call: MethodCall, connection: Connection
    ) throws(DBusError) -> [DBusValue] {
        switch (interface, member) {
        case (propertiesInterface, _):
            return try properties(path: path, member: member, arguments: call.arguments, connection: connection)
        case (objectManagerInterface, "GetManagedObjects") where managers.contains(path):
            return [managedObjects(below: path)]
        case (introspectableInterface, "Introspect"):
            return [.string(introspect(path))]
        default:
            break
        }
        guard let interfaces = objects[path] else {
            throw DBusError(.unknownObject, "no object at \(path)")
        }
        let candidates = interface.map { name in interfaces[name].map { [$0] } ?? [] } ?? Array(interfaces.values)
        guard let method = candidates.lazy.compactMap({ $0.methods[member] }).first else {
            throw DBusError(.unknownMethod, "no method \(interface ?? "*").\(member) at \(path)")
        }
        return try method(call)
    }

    private func properties(
        path: ObjectPath, member: String, arguments: [DBusValue], connection: Connection
    ) throws(DBusError) -> [DBusValue] {
        guard let interfaceName = arguments.first?.string else {
            throw DBusError(.invalidArgs, "expected an interface name")
        }
        guard let interface = objects[path]?[interfaceName] else {
            throw DBusError(.unknownInterface, "no interface \(interfaceName) at \(path)")
        }
        switch (member, arguments.count) {
        case ("GetAll", 1):
            return [.propertyMap(interface.properties)]
        case ("Get", 2):
            guard let name = arguments[1].string, let value = interface.properties[name] else {
                throw DBusError(.unknownProperty, "no property \(arguments[1].string ?? "?") on \(interfaceName)")
            }
            return [.variant(value)]
        case ("Set", 3):
            guard let name = arguments[1].string, interface.properties[name] != nil else {
                throw DBusError(.unknownProperty, "no property \(arguments[1].string ?? "?") on \(interfaceName)")
            }
            guard interface.writable.contains(name) else {
                throw DBusError(.propertyReadOnly, "property \(name) is read-only")
            }
            let value = arguments[2].unwrapped
            try interface.setter?(name, value)
            if objects[path]?[interfaceName]?.properties[name] != value {
                objects[path]?[interfaceName]?.properties[name] = value
                connection.emitPropertiesChanged(path, interfaceName, [name: value])
            }
            return []
        default:
            throw DBusError(.unknownMethod, "no method \(propertiesInterface).\(member) with these arguments")
        }
    }

    /// `a{oa{sa{sv}}}` of every object below `root`.
    private func managedObjects(below root: ObjectPath) -> DBusValue {
        let entries = objects.keys.filter { $0 != root && $0.isDescendant(of: root) }.sorted().map { path in
            let interfaces = objects[path]!.values.sorted { $0.name < $1.name }.map {
                DictEntry(.string($0.name), .propertyMap($0.properties))
            }
            return DictEntry(.objectPath(path), .dictionary(key: "s", value: "a{sv}", interfaces))
        }
        return .dictionary(key: "o", value: "a{sa{sv}}", entries)
    }

    /// Enough introspection XML for tools such as busctl and gdbus to browse the tree.
    private func introspect(_ path: ObjectPath) -> String {
        var xml = "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\" "
        xml += "\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<node>\n"
        for interface in (objects[path] ?? [:]).values.sorted(by: { $0.name < $1.name }) {
            xml += "  <interface name=\"\(interface.name)\">\n"
            for method in interface.methods.keys.sorted() { xml += "    <method name=\"\(method)\"/>\n" }
            for (name, value) in interface.properties.sorted(by: { $0.key < $1.key }) {
                let access = interface.writable.contains(name) ? "readwrite" : "read"
                xml += "    <property name=\"\(name)\" type=\"\(value.signature)\" access=\"\(access)\"/>\n"
            }
            xml += "  </interface>\n"
        }
        let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
        var children = Set<String>()
        for other in objects.keys where other.rawValue.hasPrefix(prefix) && other != path {
            if let first = other.rawValue.dropFirst(prefix.count).split(separator: "/").first {
                children.insert(String(first))
            }
        }
        for child in children.sorted() { xml += "  <node name=\"\(child)\"/>\n" }
        return xml + "</node>\n"
    }
}
