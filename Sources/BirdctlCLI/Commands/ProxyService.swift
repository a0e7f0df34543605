import Bird
import BlueZ
import Formats
import Glibc
import Health
import Loop

/// The proxy's libraries (swift-protobuf, swift-crypto, Foundation's
/// essentials) behind one seam: linked only into `birdctl-proxy`, because
/// linked into birdctl they would raise every command's memory
/// (docs/proxy.md). A birdctl asked for the proxy runs `birdctl-proxy` in
/// its place (`ProxyService.runProxyBinary`).
public protocol ProxyEngine: AnyObject {
    /// The 32 bytes written in base64 in `text`; nil if it is not a key.
    static func key(base64 text: String) -> [UInt8]?
    /// Serves the API at `host`:`port` (nil: every address; 0: any free
    /// port), encrypted with `key` (nil: plaintext), over `central`'s
    /// adapters; `identify` says who the proxy is, `said` takes a line for the log.
    init(
        loop: EventLoop, host: String?, port: UInt16, key: [UInt8]?, central: CentralDriver,
        identify: @escaping () -> ProxyIdentity?, said: @escaping (String) -> Void
    ) throws(TCPListener.ListenError)
    /// The port it listens on.
    var port: UInt16 { get }
    /// A device heard advertising, Bird or not.
    func heard(_ device: Device)
    /// Says goodbye to each client and closes.
    func stop()
    /// What the health page shows of it (`--metrics`).
    var health: ProxyHealth { get }
}

/// Who the proxy says it is (ESPHome's device info).
public struct ProxyIdentity: Sendable {
    public var name: String
    public var friendlyName: String
    /// Its first adapter's: Home Assistant keys the proxy on it.
    public var macAddress: BluetoothAddress
    public var version: String
}

/// The engine linked into this executable, if any (`birdctl-proxy` sets it first).
public enum ProxyEngines {
    nonisolated(unsafe) public static var installed: (any ProxyEngine.Type)?
}

/// `watch --all --proxy [ADDRESS:]PORT`: the watch is also a Bluetooth proxy
/// Home Assistant adopts through its ESPHome integration (docs/proxy.md):
/// every LE device heard through the adapters in use goes to Home Assistant
/// as an advertisement, and its connections are links of the watch's
/// scheduler. Encrypted with `--proxy-key`; plaintext only on loopback or
/// with `--proxy-plaintext`. Loop-confined.
final class ProxyService: @unchecked Sendable {
    /// The options that go with the proxy, for the commands that have it:
    /// none where no `birdctl-proxy` is built (it needs Swift 6.2).
    #if compiler(>=6.2)
    static let options: [Option] = [.proxy, .proxyKey, .proxyPlaintext]
    #else
    static let options: [Option] = []
    #endif

    private let endpoint: ListenEndpoint
    private let key: [UInt8]?
    private let engine: any ProxyEngine.Type
    private var running: (any ProxyEngine)?
    /// The watch's driver: the adapters in use (the first with an address
    /// is the proxy's identity, asked as the first client comes), the
    /// devices heard, and Home Assistant's links as its guest's.
    weak var central: CentralDriver?

    private init(endpoint: ListenEndpoint, key: [UInt8]?, engine: any ProxyEngine.Type) {
        (self.endpoint, self.key, self.engine) = (endpoint, key, engine)
    }

    /// The proxy the options ask for, if any. A key file that is not one
    /// key, or plaintext on a network address not asked for, is a usage
    /// error; a key file others can read is warned about. Without an engine
    /// linked, `birdctl-proxy` runs in this process's place.
    static func requested(in arguments: Arguments, all: Bool) throws(UsageError) -> ProxyService? {
        guard let text = arguments.value(.proxy) else {
            if let given = [Option.proxyKey, .proxyPlaintext].first(where: { arguments.has($0) }) {
                throw UsageError("\(given.name) goes with --proxy")
            }
            return nil
        }
        guard all else { throw UsageError("--proxy goes with --all (the proxy hears every device)") }
        let endpoint = try ListenEndpoint(text, option: "--proxy")
        guard let engine = ProxyEngines.installed else { try runProxyBinary() }
        let plaintext = arguments.has(.proxyPlaintext)
        guard let file = arguments.value(.proxyKey) else {
            if plaintext || endpoint.isLoopback { return ProxyService(endpoint: endpoint, key: nil, engine: engine) }
            throw UsageError(
                "--proxy on \(endpoint) needs --proxy-key FILE (Home Assistant's encryption key), or --proxy-plaintext for no encryption")
        }
        if plaintext { throw UsageError("--proxy-plaintext and --proxy-key: choose one") }
        guard let text = LocalMachine.readSmallFile(file) else { throw UsageError("--proxy-key: cannot read \(file)") }
        guard let key = engine.key(base64: text) else {
            throw UsageError("--proxy-key: \(file) should hold 32 bytes in base64 (44 characters), e.g. from head -c32 /dev/urandom | base64")
        }
        if LocalMachine.readableByOthers(file) {
            Diagnostics.say("warning: \(file) holds the proxy's key and other users can read it (chmod 600 \(file))")
        }
        return ProxyService(endpoint: endpoint, key: key, engine: engine)
    }

    /// Where `birdctl-proxy` may be: beside this executable (a build's
    /// folder), else in `../libexec/birdctl/` from it (an installed birdctl).
    static var proxyBinaries: [String] {
        guard let path = ProcessImage.executablePath else { return [] }
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return [folder + "/birdctl-proxy", folder + "/../libexec/birdctl/birdctl-proxy"]
    }

    /// Runs `birdctl-proxy` with this command line in this process's place;
    /// returns only by throwing, when there is none to run.
    static func runProxyBinary() throws(UsageError) -> Never {
        for path in proxyBinaries where access(path, X_OK) == 0 {
            let failure = ProcessImage.replace(with: path, arguments: [path] + CommandLine.arguments.dropFirst())
            throw UsageError("--proxy: cannot run \(path): \(String(cString: strerror(failure)))")
        }
        throw UsageError("--proxy: this birdctl has no proxy (birdctl-proxy, which needs Swift 6.2 to build, is not installed beside it)")
    }

    /// Listens (on the loop); a failure says why and is the command's end.
    func start(on loop: EventLoop) -> Bool {
        guard let central else { return false }
        do {
            running = try engine.init(
                loop: loop, host: endpoint.host, port: endpoint.port, key: key, central: central,
                identify: { [unowned self] in identity() }, said: { Diagnostics.say($0) })
        } catch {
            Diagnostics.error("cannot serve the proxy at \(endpoint): \(error)")
            return false
        }
        var shown = endpoint
        shown.port = running?.port ?? endpoint.port
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
    func heard(_ device: Device) { running?.heard(device) }

    func stop() { running?.stop() }

    /// The proxy's section of the health page, once it runs.
    var health: ProxyHealth? { running?.health }

    /// Who the proxy is: `birdctl-HOSTNAME`, known by its first adapter's
    /// address; nil while no adapter has one.
    private func identity() -> ProxyIdentity? {
        guard let address = central?.adapterHealth().lazy.compactMap(\.address).first else { return nil }
        let host = LocalMachine.hostname()
        return ProxyIdentity(name: Self.deviceName(host: host), friendlyName: "birdctl on \(host)", macAddress: address, version: Version.number)
    }

    /// ESPHome's form of a device name: lower-case letters, digits and `-`, 31 at most.
    static func deviceName(host: String) -> String {
        let safe = host.lowercased().unicodeScalars.map { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) ? Character($0) : "-" }
        return String(("birdctl-" + String(safe)).prefix(31))
    }
}
