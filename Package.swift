// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "birdctl",
    products: [
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "BlueZ", targets: ["BlueZ"]),
        .library(name: "Bird", targets: ["Bird"]),
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
        // Threads and a lock over pthreads (no Foundation, no libdispatch), for DBus's loop and MQTT's publisher.
        .target(name: "Threads"),
        // Swift over libdbus: the layer that touches libdbus's pointers.
        .target(name: "DBus", dependencies: ["CDBus", "Threads"]),
        // A typed org.bluez client.
        .target(name: "BlueZ", dependencies: ["DBus"]),
        // The Bird domain: UUIDs, codecs, RSSI smoothing, the central state machine and its driver.
        .target(name: "Bird", dependencies: ["BlueZ", "DBus"]),
        // libmosquitto, the reference MQTT client library, for the gateway:
        // loaded with dlopen when a gateway starts (its header from libmosquitto-dev).
        .target(name: "CMosquitto", linkerSettings: [.linkedLibrary("dl")]),
        // Publishing to an MQTT broker on a thread of its own; touches libmosquitto's pointers.
        .target(name: "MQTT", dependencies: ["CMosquitto", "Threads"]),
        // Where readings go, as policy with no I/O: the MQTT gateway's state machine.
        .target(name: "Sinks", dependencies: ["Bird"]),
        // The git revision of a release build (a C macro `make release` sets).
        .target(name: "BuildInfo"),
        // glibc's malloc.h (heap statistics, malloc_trim), which Swift's Glibc module leaves out.
        .systemLibrary(name: "CMalloc"),
        // The command line as a library: argument parsing, output formats, escaping, exit codes.
        .target(name: "BirdctlCLI", dependencies: ["Bird", "BlueZ", "DBus", "MQTT", "Sinks", "BuildInfo", "CMalloc"]),
        // The executable: blocks signals, runs BirdctlCLI, exits.
        .executableTarget(name: "birdctl", dependencies: ["BirdctlCLI", "DBus"]),
        // What the test support asks of the kernel with a sockaddr (a free port).
        .target(name: "CTestSupport"),
        // Starts a private dbus-daemon, the fake BlueZ of fixtures/ and mosquitto for tests.
        .target(name: "BlueZTestSupport", dependencies: ["DBus", "BlueZ", "CTestSupport"]),
        .testTarget(name: "ThreadsTests", dependencies: ["Threads"]),
        .testTarget(name: "DBusTests", dependencies: ["DBus", "BlueZTestSupport"]),
        .testTarget(name: "BlueZTests", dependencies: ["BlueZ", "DBus", "BlueZTestSupport"]),
        .testTarget(name: "BirdTests", dependencies: ["Bird", "BlueZ", "DBus"]),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT"]),
        .testTarget(name: "SinksTests", dependencies: ["Sinks", "Bird", "BlueZ", "DBus"]),
        // The command line's parsing, escaping and formatting, without a bus.
        .testTarget(name: "BirdctlCLITests", dependencies: ["BirdctlCLI", "Bird", "DBus", "MQTT"]),
        // Runs the built birdctl against the fake BlueZ (and the gateway, in-process, against mosquitto).
        .testTarget(name: "BirdctlTests", dependencies: ["birdctl", "BirdctlCLI", "Bird", "MQTT", "BlueZTestSupport", "BlueZ", "DBus"]),
    ],
    swiftLanguageModes: [.v6]
)
