import BlueZ
import DBus
import Loop

/// Advertisements as the kernel reports them (`KernelAdvertisement`), off
/// the management channel, for the adapters in use. An adapter whose
/// advertisements have come this way has them from here only: its rebuilt
/// ones are not passed on (`covers`). If the channel ends, every adapter is
/// back to rebuilt ones. Loop-confined.
public final class KernelAdvertisements: @unchecked Sendable {
    /// The longest event read: Device Found with an extended advertisement
    /// and its scan response (a longer one, cut by the kernel, is dropped).
    static let maximumEvent = 2048

    private var reader: DatagramReader?
    /// Adapters (hciN's N) whose advertisements have come from the kernel.
    private var reporting: Set<UInt16> = []

    /// Listens on the management channel; `inUse` says whether hciN is an
    /// adapter in use, `heard` takes each of their advertisements.
    public static func open(
        loop: EventLoop, inUse: @escaping (UInt16) -> Bool, heard: @escaping (BluetoothLERawAdvertisement) -> Void
    ) -> Result<KernelAdvertisements, BluetoothManagement.OpenError> {
        BluetoothManagement.open().map { KernelAdvertisements(fd: $0, loop: loop, inUse: inUse, heard: heard) }
    }

    /// Reads events from `fd` (the channel, or a test's socket). On the loop.
    init(fd: Int32, loop: EventLoop, inUse: @escaping (UInt16) -> Bool, heard: @escaping (BluetoothLERawAdvertisement) -> Void) {
        reader = DatagramReader(
            fd: fd, maximumSize: Self.maximumEvent, loop: loop,
            onDatagram: { [unowned self] event in
                guard let (adapter, advertisement) = KernelAdvertisement.parse(event), inUse(adapter) else { return }
                reporting.insert(adapter)
                heard(advertisement)
            },
            onEnd: { [unowned self] in
                reader = nil
                reporting = []
            })
    }

    /// Whether the adapter at `path` (`/org/bluez/hciN`) has its
    /// advertisements from the kernel. Asked per device signalled.
    public func covers(adapter path: ObjectPath) -> Bool {
        let text = path.rawValue
        guard !reporting.isEmpty, let slash = text.lastIndex(of: "/") else { return false }
        let name = text[text.index(after: slash)...]
        guard name.hasPrefix("hci"), let index = UInt16(name.dropFirst(3)) else { return false }
        return reporting.contains(index)
    }

    public func close() {
        reader?.close()
        reader = nil
        reporting = []
    }
}
