#if canImport(Proxy)
import Bird
import BlueZ
import Formats
import Loop
import Proxy

/// `watch --all --proxy [ADDRESS:]PORT`: the watch is also a Bluetooth proxy
/// Home Assistant adopts through its ESPHome integration (docs/proxy.md):
/// every LE device heard through the adapters in use goes to Home Assistant
/// as an advertisement. Encrypted with `--proxy-key`; plaintext only on
/// loopback or with `--proxy-plaintext`. Loop-confined.
final class ProxyService: @unchecked Sendable {
    /// The options that go with the proxy, for the commands that have it.
    static let options: [Option] = [.proxy, .proxyKey, .proxyPlaintext]

    private let endpoint: ListenEndpoint
    private let key: NoiseKey?
    private var server: ProxyServer?
    /// Home Assistant's links, through `central`.
    private var guests: GuestBluetooth?
    /// The watch's driver: the adapters in use (the first with an address
    /// is the proxy's identity, asked as the first client comes), the
    /// devices heard, and Home Assistant's links as its guest's.
    weak var central: CentralDriver?

    private init(endpoint: ListenEndpoint, key: NoiseKey?) { (self.endpoint, self.key) = (endpoint, key) }

    /// The proxy the options ask for, if any. A key file that is not one
    /// key, or plaintext on a network address not asked for, is a usage
    /// error; a key file others can read is warned about.
    static func requested(in arguments: Arguments, all: Bool) throws(UsageError) -> ProxyService? {
        guard let text = arguments.value(.proxy) else {
            if let given = [Option.proxyKey, .proxyPlaintext].first(where: { arguments.has($0) }) {
                throw UsageError("\(given.name) goes with --proxy")
            }
            return nil
        }
        guard all else { throw UsageError("--proxy goes with --all (the proxy hears every device)") }
        let endpoint = try ListenEndpoint(text, option: "--proxy")
        let plaintext = arguments.has(.proxyPlaintext)
        guard let file = arguments.value(.proxyKey) else {
            if plaintext || endpoint.isLoopback { return ProxyService(endpoint: endpoint, key: nil) }
            throw UsageError(
                "--proxy on \(endpoint) needs --proxy-key FILE (Home Assistant's encryption key), or --proxy-plaintext for no encryption")
        }
        if plaintext { throw UsageError("--proxy-plaintext and --proxy-key: choose one") }
        guard let text = LocalMachine.readSmallFile(file) else { throw UsageError("--proxy-key: cannot read \(file)") }
        guard let key = NoiseKey(base64: text) else {
            throw UsageError("--proxy-key: \(file) should hold 32 bytes in base64 (44 characters), e.g. from head -c32 /dev/urandom | base64")
        }
        if LocalMachine.readableByOthers(file) {
            Diagnostics.say("warning: \(file) holds the proxy's key and other users can read it (chmod 600 \(file))")
        }
        return ProxyService(endpoint: endpoint, key: key)
    }

    /// Listens (on the loop); a failure says why and is the command's end.
    func start(on loop: EventLoop) -> Bool {
        do {
            let server = try ProxyServer(
                loop: loop, configuration: .init(host: endpoint.host, port: endpoint.port, key: key),
                identify: { [unowned self] in identity() }, said: { Diagnostics.say($0) })
            server.devicesHeard = { [unowned self] in
                (central?.devicesHeard() ?? []).compactMap(HeardDevice.init).map(RebuiltAdvertisement.of)
            }
            if let central {
                guests = GuestBluetooth(driver: central, server: server)
                server.bluetooth = guests
            }
            self.server = server
        } catch {
            Diagnostics.error("cannot serve the proxy at \(endpoint): \(error)")
            return false
        }
        var shown = endpoint
        shown.port = server?.port ?? endpoint.port
        Diagnostics.say("serving a Bluetooth proxy at \(shown) (\(key == nil ? "plaintext" : "encrypted"))")
        return true
    }

    /// Listens unless `proxy` is nil; false (said) if it cannot: the session ends with a usage error.
    static func start(_ proxy: ProxyService?, in session: Session) -> Bool {
        guard let proxy else { return true }
        guard proxy.start(on: session.connection.loop) else {
            session.finish(.usage)
            return false
        }
        return true
    }

    /// A device heard advertising, Bird or not (on the loop).
    func heard(_ device: Device) {
        guard let server, let heard = HeardDevice(device) else { return }
        server.advertise(RebuiltAdvertisement.of(heard))
    }

    func stop() { server?.stop() }

    /// Who the proxy is: `birdctl-HOSTNAME`, known by its first adapter's
    /// address; nil while no adapter has one.
    private func identity() -> ProxySession.Identity? {
        guard let address = central?.adapterHealth().lazy.compactMap(\.address).first else { return nil }
        let host = LocalMachine.hostname()
        return ProxySession.Identity(
            name: Self.deviceName(host: host), friendlyName: "birdctl on \(host)", macAddress: address, birdctlVersion: Version.number)
    }

    /// ESPHome's form of a device name: lower-case letters, digits and `-`, 31 at most.
    static func deviceName(host: String) -> String {
        let safe = host.lowercased().unicodeScalars.map { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) ? Character($0) : "-" }
        return String(("birdctl-" + String(safe)).prefix(31))
    }
}
#else
import Bird
import BlueZ

/// This birdctl was built without the proxy (it needs Swift 6.2): no
/// option asks for one.
enum ProxyService {
    static let options: [Option] = []
    static func requested(in arguments: Arguments, all: Bool) throws(UsageError) -> ProxyService? { nil }
    static func start(_ proxy: ProxyService?, in session: Session) -> Bool { true }
    var central: CentralDriver? {
        get { nil }
        nonmutating set {}
    }
    func heard(_ device: Device) {}
    func stop() {}
}
#endif
