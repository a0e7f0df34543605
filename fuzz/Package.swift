// swift-tools-version: 6.0
// libFuzzer targets for birdctl (`make fuzz`), kept out of the main package
// because they only link with -sanitize=fuzzer. Each target checks what must
// hold for any input and traps (a crash the fuzzer keeps) when it does not.
import PackageDescription

let package = Package(
    name: "birdctl-fuzz",
    dependencies: [.package(name: "birdctl", path: "..")],
    targets: [
        // libFuzzer's driver as each target's entry point.
        .target(name: "FuzzMain"),
        // What every target checks with.
        .target(name: "FuzzSupport"),
        // A private dbus-daemon and D-Bus value trees from fuzz bytes, for the targets that need a bus.
        .target(name: "FuzzBusSupport", dependencies: ["FuzzSupport", .product(name: "DBus", package: "birdctl")]),
        // The Bird value decoders: bytes from a radio we do not control.
        .executableTarget(name: "FuzzBirdValues", dependencies: ["FuzzMain", "FuzzSupport", .product(name: "Bird", package: "birdctl")]),
        // libdbus-validated messages decoded into DBusValue trees and back.
        .executableTarget(name: "FuzzDBusMessages", dependencies: ["FuzzMain", "FuzzSupport", .product(name: "DBus", package: "birdctl")]),
        // BlueZ's object tree and signals, and a fleet fed the events they stand for.
        .executableTarget(
            name: "FuzzBlueZTree",
            dependencies: ["FuzzMain", "FuzzSupport", .product(name: "BlueZ", package: "birdctl"), .product(name: "Bird", package: "birdctl"), .product(name: "DBus", package: "birdctl")]),
        // Peer text escaped for a terminal and quoted for JSON.
        .executableTarget(name: "FuzzPeerText", dependencies: ["FuzzMain", "FuzzSupport", .product(name: "Formats", package: "birdctl")]),
        // `birdctl serve`'s stdin lines.
        .executableTarget(name: "FuzzServeLines", dependencies: ["FuzzMain", "FuzzSupport", .product(name: "Bird", package: "birdctl")]),
        // Method calls to serve's GATT objects and the pairing agent, as from bluetoothd or a stranger.
        .executableTarget(
            name: "FuzzExportedMethods",
            dependencies: ["FuzzMain", "FuzzSupport", "FuzzBusSupport", .product(name: "Bird", package: "birdctl"),
                           .product(name: "BlueZ", package: "birdctl"), .product(name: "DBus", package: "birdctl")]),
        // Introspect replies (FocusedLoad's view of BlueZ's tree).
        .executableTarget(name: "FuzzIntrospection", dependencies: ["FuzzMain", "FuzzSupport", .product(name: "BlueZ", package: "birdctl")]),
        // Error names and messages mapped to BlueZError kinds, and needsPairing.
        .executableTarget(
            name: "FuzzBlueZErrors",
            dependencies: ["FuzzMain", "FuzzSupport", .product(name: "BlueZ", package: "birdctl"), .product(name: "DBus", package: "birdctl")]),
        // AcquireNotify's datagrams through DatagramReader over a socketpair.
        .executableTarget(
            name: "FuzzDatagramReader",
            dependencies: ["FuzzMain", "FuzzSupport", "FuzzBusSupport", .product(name: "DBus", package: "birdctl")]),
    ],
    swiftLanguageModes: [.v6]
)

// The proxy's targets: the Proxy library exists only with Swift 6.2 and later (../Package.swift).
#if compiler(>=6.2)
package.dependencies += [
    .package(url: "https://github.com/apple/swift-protobuf", exact: "1.39.0"),
    .package(url: "https://github.com/apple/swift-crypto", exact: "4.5.2"),
]
let proxy = Target.Dependency.product(name: "Proxy", package: "birdctl")
package.targets += [
    // ESPHome's frames (plaintext and Noise) through FrameReader, cut anywhere.
    .executableTarget(name: "FuzzProxyFrames", dependencies: ["FuzzMain", "FuzzSupport", proxy]),
    // The responder's Noise handshake and its ciphers, against a small initiator of the target's own.
    .executableTarget(
        name: "FuzzNoiseHandshake",
        dependencies: ["FuzzMain", "FuzzSupport", proxy, .product(name: "Crypto", package: "swift-crypto")]),
    // Device Found events off the kernel's management channel, as the proxy passes them on.
    .executableTarget(name: "FuzzKernelAdvertisements", dependencies: ["FuzzMain", "FuzzSupport", proxy]),
    // Clients' messages through ProxySession, and its requests through ProxiedLinks.
    .executableTarget(
        name: "FuzzProxySession",
        dependencies: ["FuzzMain", "FuzzSupport", proxy, .product(name: "Bird", package: "birdctl"),
                       .product(name: "BlueZ", package: "birdctl"), .product(name: "SwiftProtobuf", package: "swift-protobuf")]),
]
#endif
