import DBus

extension BlueZRequest where Output == Void {
    /// Pairs (and bonds) with the device through the agent the caller
    /// registered; BlueZ connects first if needed. Answers when pairing ends.
    public static func pair(device: ObjectPath, timeout: Duration) -> Self {
        Self(device, BlueZNames.device, "Pair", timeout: timeout)
    }

    public static func cancelPairing(device: ObjectPath) -> Self {
        Self(device, BlueZNames.device, "CancelPairing")
    }

    /// Registers an Agent1 object of ours for the pairings this client asks for
    /// (not as the system's default agent: a desktop keeps its own).
    public static func registerAgent(_ agent: PairingAgent) -> Self {
        Self(ObjectPath(BlueZNames.root), BlueZNames.agentManager, "RegisterAgent", [
            .objectPath(agent.path), .string(agent.capability.rawValue),
        ])
    }

    public static func unregisterAgent(_ agent: PairingAgent) -> Self {
        Self(ObjectPath(BlueZNames.root), BlueZNames.agentManager, "UnregisterAgent", [.objectPath(agent.path)])
    }
}

extension BlueZError {
    /// BlueZ refused a read, write or subscription because the link is not
    /// secure enough: the ATT errors Insufficient Authentication / Encryption
    /// (and Encryption Key Size), which bluetoothd reports as NotPermitted
    /// ("Not paired", or the ATT error's name), or a failed authentication.
    /// A plain "Read not permitted" (the attribute is never readable) is not one.
    public var needsPairing: Bool {
        switch kind {
        case .authenticationFailed: return true
        case .notPermitted, .notAuthorized, .failed:
            let text = message.lowercased()
            return text.includes("not paired") || text.includes("insufficient authentication")
                || text.includes("insufficient encryption") || text.includes("att error: 0x05")
                || text.includes("att error: 0x0f") || text.includes("att error: 0x0c")
        default: return false
        }
    }

    /// Pair answered that the device is already paired.
    public var isAlreadyPaired: Bool { kind == .alreadyExists }
}

/// An org.bluez.Agent1 of ours: what bluetoothd asks when it pairs on our
/// behalf. With NoInputNoOutput (the default) pairing is Just Works: there is
/// nothing to confirm, and anything that would need a person (a PIN, a
/// passkey) is rejected. With `person` (DisplayYesNo) a passkey shown on both
/// sides is confirmed by a person, and a passkey or PIN to type on the
/// device is shown to them. Only bluetoothd may call it; it asks one
/// question at a time and may cancel it (Cancel).
public final class PairingAgent: @unchecked Sendable {
    public enum Capability: String, Sendable {
        case noInputNoOutput = "NoInputNoOutput"
        case displayYesNo = "DisplayYesNo"
    }

    /// What bluetoothd may ask a person, on the loop, about the device at a path.
    public struct Person: Sendable {
        /// Confirm the passkey shown on both sides; answer once, now or later.
        public var confirm: @Sendable (_ device: ObjectPath, _ passkey: UInt32, _ answer: @escaping @Sendable (Bool) -> Void) -> Void
        /// Show a passkey or PIN (as text: a passkey has six digits) to type on the device.
        public var display: @Sendable (_ device: ObjectPath, _ code: String) -> Void
        /// The question asked last is withdrawn (a pairing that timed out or was cancelled).
        public var cancel: @Sendable () -> Void

        public init(
            confirm: @escaping @Sendable (ObjectPath, UInt32, @escaping @Sendable (Bool) -> Void) -> Void,
            display: @escaping @Sendable (ObjectPath, String) -> Void, cancel: @escaping @Sendable () -> Void
        ) {
            self.confirm = confirm
            self.display = display
            self.cancel = cancel
        }
    }

    public let connection: Connection
    public let path: ObjectPath
    public let capability: Capability
    private let person: Person?

    public init(connection: Connection, path: ObjectPath = "/org/birdctl/agent", person: Person? = nil) {
        self.connection = connection
        self.path = path
        self.capability = person == nil ? .noInputNoOutput : .displayYesNo
        self.person = person
    }

    /// A passkey as it is shown: six digits.
    public static func passkeyText(_ passkey: UInt32) -> String {
        let digits = String(passkey)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }

    /// The device and the code of DisplayPasskey(device, passkey, entered) —
    /// called again as keys are typed — or DisplayPinCode(device, pincode).
    public static func codeToShow(_ arguments: [DBusValue]) -> (ObjectPath, String)? {
        guard let device = arguments.first?.objectPath else { return nil }
        if arguments.count == 3, let passkey = arguments[1].integer.flatMap(UInt32.init(exactly:)), passkey <= 999_999 {
            return (device, passkeyText(passkey))
        }
        if arguments.count == 2, let pin = arguments[1].string, (1...16).contains(pin.utf8.count) { return (device, pin) }
        return nil
    }

    /// Exports the agent (before `registerAgent`).
    public func export() {
        connection.restrictCalls(below: path, toOwnerOf: BlueZNames.busName)
        let rejected = DBusError(DBusErrorName(BlueZNames.errorPrefix + "Rejected"), "birdctl pairs without input")
        let reject: ExportedInterface.Method = { _ throws(DBusError) in throw rejected }
        let accept: ExportedInterface.Method = { _ in [] }
        var methods: [String: ExportedInterface.Method] = [
            "Release": accept, "Cancel": accept,
            "RequestPinCode": reject, "RequestPasskey": reject,
            "DisplayPinCode": accept, "DisplayPasskey": accept,
            // Incoming requests (a peer pairing with us, a service to authorise) are not ours to grant.
            "RequestAuthorization": reject, "AuthorizeService": reject,
            "RequestConfirmation": reject,
        ]
        var deferred: [String: ExportedInterface.DeferredMethod] = [:]
        if let person {
            methods["Cancel"] = { _ in
                person.cancel()
                return []
            }
            let malformed = DBusError(.invalidArgs, "expected a device and a code to show")
            let display: ExportedInterface.Method = { call throws(DBusError) in
                guard let (device, code) = PairingAgent.codeToShow(call.arguments) else { throw malformed }
                person.display(device, code)
                return []
            }
            methods["DisplayPasskey"] = display
            methods["DisplayPinCode"] = display
            methods["RequestConfirmation"] = nil
            deferred["RequestConfirmation"] = { call, reply in
                guard call.arguments.count == 2, let device = call.arguments[0].objectPath,
                    let passkey = call.arguments[1].integer.flatMap(UInt32.init(exactly:)), passkey <= 999_999
                else { return reply(.failure(DBusError(.invalidArgs, "expected a device and a passkey"))) }
                person.confirm(device, passkey) { accepted in reply(accepted ? .success([]) : .failure(rejected)) }
            }
        }
        connection.export(path, [ExportedInterface(BlueZNames.agent, methods: methods, deferredMethods: deferred)])
    }
}
