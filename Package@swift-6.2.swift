// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "birdctl",
    products: [
        .library(name: "Loop", targets: ["Loop"]),
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "BlueZ", targets: ["BlueZ"]),
        .library(name: "Bird", targets: ["Bird"]),
        .library(name: "Formats", targets: ["Formats"]),
        .library(name: "BirdctlCLI", targets: ["BirdctlCLI"]),
        .executable(name: "birdctl", targets: ["birdctl"]),
    ],
    targets: [
        // libdbus, plus a shim for what Swift cannot call directly.
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        // Threads and a lock over pthreads (no Foundation, no libdispatch), for the loop and MQTT's publisher.
        .target(name: "Threads"),
        // epoll, eventfd, signalfd and recvmmsg, which Swift's Glibc module leaves out.
        .systemLibrary(name: "CLoop"),
        // The event loop: epoll, timers, descriptor watches, signals, work posted from other threads, a monotonic clock.
        .target(name: "Loop", dependencies: ["CLoop", "Threads"]),
        // Swift over libdbus: the layer that touches libdbus's pointers; libdbus's watches and timeouts on the loop.
        .target(name: "DBus", dependencies: ["CDBus", "Loop", "Threads"]),
        // A typed org.bluez client.
        .target(name: "BlueZ", dependencies: ["DBus"]),
        // The Bird domain: UUIDs, codecs, RSSI smoothing, the central state machine and its driver.
        .target(name: "Bird", dependencies: ["BlueZ", "DBus"]),
        // libmosquitto, the reference MQTT client library, for the gateway:
        // loaded with dlopen when a gateway starts (its header from libmosquitto-dev).
        .target(name: "CMosquitto", linkerSettings: [.linkedLibrary("dl")]),
        // Publishing to an MQTT broker on a thread of its own; touches libmosquitto's pointers.
        .target(name: "MQTT", dependencies: ["CMosquitto", "Threads"]),
        // How readings and events look (text, JSON Lines) and the escaping of what peers send: for the CLI and the gateway.
        .target(name: "Formats", dependencies: ["Bird", "BlueZ"]),
        // The MQTT gateway: its machines (policy, no I/O), its topics and payloads, and its driver on the loop.
        .target(name: "Gateway", dependencies: ["Bird", "BlueZ", "DBus", "MQTT", "Formats", "Health"]),
        // What an operator sees: the health page (`--metrics`) in Prometheus's text format.
        .target(name: "Health", dependencies: ["Bird", "Loop"]),
        // The git revision of a release build (a C macro `make release` sets).
        .target(name: "BuildInfo"),
        // glibc's malloc.h (heap statistics, malloc_trim), which Swift's Glibc module leaves out.
        .systemLibrary(name: "CMalloc"),
        // The command line as a library: argument parsing, output formats, escaping, exit codes.
        .target(name: "BirdctlCLI", dependencies: ["Bird", "BlueZ", "DBus", "MQTT", "Formats", "Gateway", "Health", "BuildInfo", "CMalloc"]),
        // The executable: blocks signals, runs BirdctlCLI, exits.
        .executableTarget(name: "birdctl", dependencies: ["BirdctlCLI", "DBus"]),
        // What the test support asks of the kernel with a sockaddr or C strings (a free port, posix_spawn).
        .target(name: "CTestSupport"),
        // The tests' children: started with posix_spawn, reaped, killed with the test process; birdctl's runner.
        .target(name: "TestProcesses", dependencies: ["CTestSupport"]),
        // A private dbus-daemon and the fake BlueZ of fixtures/ on it.
        .target(name: "FakeBlueZSupport", dependencies: ["DBus", "BlueZ", "Loop", "TestProcesses"]),
        // mosquitto on a free port, its clients, a test CA.
        .target(name: "MosquittoSupport", dependencies: ["CTestSupport", "TestProcesses"]),
        // A test run in miniature (a bus, the fake, a birdctl watch) for the test that kills it.
        .executableTarget(name: "test-support-probe", dependencies: ["FakeBlueZSupport", "TestProcesses"]),
        .testTarget(name: "ThreadsTests", dependencies: ["Threads"]),
        .testTarget(name: "LoopTests", dependencies: ["Loop"]),
        .testTarget(name: "DBusTests", dependencies: ["DBus", "FakeBlueZSupport", "TestProcesses"]),
        .testTarget(name: "BlueZTests", dependencies: ["BlueZ", "DBus", "FakeBlueZSupport", "TestProcesses"]),
        .testTarget(name: "BirdTests", dependencies: ["Bird", "BlueZ", "DBus"]),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT"]),
        .testTarget(name: "FormatsTests", dependencies: ["Formats", "Bird", "BlueZ", "DBus"]),
        .testTarget(name: "GatewayTests", dependencies: ["Gateway", "Formats", "Bird", "BlueZ", "DBus", "MQTT"]),
        .testTarget(name: "HealthTests", dependencies: ["Health", "Bird", "BlueZ", "DBus", "Loop"]),
        // The command line's parsing, escaping and formatting, without a bus.
        .testTarget(name: "BirdctlCLITests", dependencies: ["BirdctlCLI", "Formats", "Gateway", "Bird", "DBus", "MQTT"]),
        // Runs the built birdctl against the fake BlueZ (and the gateway, in-process, against mosquitto).
        .testTarget(
            name: "BirdctlTests",
            dependencies: ["birdctl", "test-support-probe", "BirdctlCLI", "Gateway", "Bird", "MQTT", "FakeBlueZSupport", "MosquittoSupport", "TestProcesses", "BlueZ", "DBus"]),
    ],
    swiftLanguageModes: [.v6]
)

// ----- The proxy -----
// Above: Package.swift's package, word for word (a test holds them so).
// The ESPHome native API (`watch --all --proxy`): Home Assistant adopts
// birdctl as a Bluetooth proxy. Its messages are generated from ESPHome's
// api.proto by swift-protobuf, its Noise encryption stands on swift-crypto;
// both need Swift 6.2 (swift-protobuf's manifest and the code it generates).
package.dependencies += [
    // Without its default traits: BinaryDelimitedStreams imports all of
    // Foundation (with ICU's data: 85 MB more in a static binary); what the
    // proxy uses needs FoundationEssentials only.
    .package(url: "https://github.com/apple/swift-protobuf", exact: "1.39.0", traits: []),
    .package(url: "https://github.com/apple/swift-crypto", exact: "4.5.2"),
]
// birdctl-proxy: birdctl with the proxy linked, which birdctl runs in its
// place for `--proxy` (linked into birdctl, its libraries would raise every
// command's memory).
package.products.append(.executable(name: "birdctl-proxy", targets: ["birdctl-proxy"]))
// The proxy as a library, for the fuzz package's targets.
package.products.append(.library(name: "Proxy", targets: ["Proxy"]))
package.targets += [
    // The proxy: frames, the Noise handshake, the API's messages (generated: dist/esphome/generate.sh).
    .target(
        name: "Proxy",
        dependencies: [
            "Bird", "BlueZ", "DBus", .product(name: "SwiftProtobuf", package: "swift-protobuf"), .product(name: "Crypto", package: "swift-crypto"),
        ],
        exclude: ["Messages/api.proto"]),
    .executableTarget(name: "birdctl-proxy", dependencies: ["BirdctlCLI", "Proxy", "Health", "Bird", "BlueZ", "DBus"]),
    .testTarget(
        name: "ProxyTests",
        dependencies: [
            "birdctl", "birdctl-proxy", "Proxy", "Bird", "DBus", "FakeBlueZSupport", "TestProcesses", .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
]
