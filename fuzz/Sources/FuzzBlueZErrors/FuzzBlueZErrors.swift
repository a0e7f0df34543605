import BlueZ
import DBus
import FuzzSupport

/// Any error name and message, as an error reply from bluetoothd or the bus:
/// mapped to a kind without trapping, described, and consistent — a
/// org.bluez.Error.* name birdctl knows maps to the kind that answers with
/// that name again, `needsPairing` holds only for the kinds that can ask for
/// pairing. (Error replies themselves are made in FuzzExportedMethods.)
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBlueZErrors(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(Array(UnsafeBufferPointer(start: data, count: size)))
    let name = input.pick(knownNames) { $0.text(upTo: 64) }
    let message = String(decoding: input.rest(), as: UTF8.self)
    let error = BlueZError(DBusError(DBusErrorName(name), message))
    check(error)
    // BlueZ's wording is matched whatever its case.
    let shouted = BlueZError(DBusError(DBusErrorName(name), message.uppercased()))
    if message.uppercased().lowercased() == message.lowercased() {
        require(shouted.needsPairing == error.needsPairing, "needsPairing depends on case: \(message.debugDescription)")
        require(shouted.isUnnamedATTError == error.isUnnamedATTError, "an ATT error depends on case: \(message.debugDescription)")
    }
    return 0
}

private let knownNames = [
    "org.bluez.Error.Failed", "org.bluez.Error.NotPermitted", "org.bluez.Error.NotAuthorized",
    "org.bluez.Error.AuthenticationFailed", "org.bluez.Error.AuthenticationCanceled", "org.bluez.Error.InProgress",
    "org.bluez.Error.InvalidOffset", "org.bluez.Error.AlreadyExists", "org.freedesktop.DBus.Error.NoReply",
    "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.UnknownObject",
    "org.freedesktop.DBus.Error.AccessDenied", "org.freedesktop.DBus.Error.Disconnected", "org.bluez.Error.",
]

private func check(_ error: BlueZError) {
    _ = error.description
    _ = error.isTransient
    if error.needsPairing {
        require([.authenticationFailed, .notPermitted, .notAuthorized, .failed].contains(error.kind), "\(error) needs pairing")
    }
    if error.isConnectionAbortByLocal { require(error.kind == .failed && error.isTransient) }
    if error.isConnectionCanceled { require(error.kind == .failed && error.isTransient) }
    if error.isUnnamedATTError { require(error.kind == .failed) }
    // Answering with this error names it as it came, or by its kind.
    let answered = BlueZError(DBusError(DBusErrorName(error.dbusName), error.message))
    if error.name.hasPrefix("org.bluez.Error."), error.kind != .other {
        require(answered.kind == error.kind, "\(error.name) → \(error.kind), answered as \(answered.kind)")
    }
    let bare = BlueZError(error.kind)
    let named = BlueZError(DBusError(DBusErrorName(bare.dbusName)))
    require(bare.dbusName.hasPrefix("org.bluez.Error."), "\(error.kind) answers as \(bare.dbusName)")
    if named.kind != .failed {
        require(named.kind == error.kind, "\(error.kind) answers as \(bare.dbusName), which maps to \(named.kind)")
    }
}
