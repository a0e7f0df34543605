import CLoop
import Glibc

/// The kernel's Bluetooth management channel, the one bluetoothd itself
/// speaks, opened only to listen: the kernel copies to every listener with
/// CAP_NET_ADMIN the events it sends bluetoothd, each advertisement heard
/// (Device Found) among them, as it came off the air. Nothing is sent on it,
/// so bluetoothd keeps the radio.
public enum BluetoothManagement {
    public enum OpenError: Error, Equatable, CustomStringConvertible {
        /// Without CAP_NET_ADMIN the kernel sends a listener no Device Found.
        case notPermitted
        /// The kernel has no Bluetooth, or refused the socket.
        case unavailable(errno: Int32)

        public var description: String {
            switch self {
            case .notPermitted: "it needs CAP_NET_ADMIN"
            case .unavailable(let code): String(cString: strerror(code))
            }
        }
    }

    /// The channel's descriptor, non-blocking and close-on-exec, or why there is none.
    public static func open() -> Result<Int32, OpenError> {
        guard hasNetworkAdministration() else { return .failure(.notPermitted) }
        let fd = cloop_open_bluetooth_management()
        return fd >= 0 ? .success(fd) : .failure(.unavailable(errno: errno))
    }

    /// CAP_NET_ADMIN (capability 12) among this process's effective ones.
    static func hasNetworkAdministration() -> Bool {
        guard let status = ProcessUsage.read("/proc/self/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let bits = UInt64(line.dropFirst("CapEff:".count).drop(while: \.isWhitespace), radix: 16)
        else { return false }
        return bits & (1 << 12) != 0
    }
}
