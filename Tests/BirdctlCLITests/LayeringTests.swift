import Foundation
import Testing

/// The layering rules of docs/architecture.md, checked on the sources: a
/// rule that only a reviewer checks drifts.
@Suite("Layering")
struct LayeringTests {
    static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources")

    /// Debian's Swift 6.0 reads Package.swift, Swift 6.2 and later
    /// Package@swift-6.2.swift: the same package, word for word, and the proxy after it.
    @Test func bothManifestsDescribeOnePackage() throws {
        let project = Self.sources.deletingLastPathComponent()
        func body(_ name: String) throws -> Substring {
            let text = try String(contentsOf: project.appendingPathComponent(name), encoding: .utf8)
            return text.drop { $0 != "\n" }  // past the tools version
        }
        let plain = try body("Package.swift")
        let package = try #require(plain.range(of: "\n// Swift 6.2 and later read").map { plain[..<$0.lowerBound] })
        let full = try body("Package@swift-6.2.swift")
        #expect(full.hasPrefix(package), "Package@swift-6.2.swift no longer begins with Package.swift's package")
        #expect(full.contains("name: \"Proxy\"") && !plain.contains("Proxy\""))
    }

    /// Every Swift file of a target, as (name, text).
    static func files(of target: String) throws -> [(name: String, text: String)] {
        let root = sources.appendingPathComponent(target)
        let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
        return try enumerator.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }.map {
            ($0.lastPathComponent, try String(contentsOf: $0, encoding: .utf8))
        }
    }

    /// String literals of a file, one line or several (comments may name
    /// BlueZ's properties); a multi-line literal also gives each of its lines.
    static func literals(_ text: String) -> [String] {
        let code = TestsCheckSomethingTests.code(text)
        var literals: [String] = []
        var start = code.startIndex
        // The blanked code keeps each literal's place: its quotes, with spaces between.
        while let open = code[start...].firstIndex(of: "\"") {
            guard let close = code[code.index(after: open)...].firstIndex(of: "\"") else { break }
            let offsets = (code.distance(from: code.startIndex, to: open) + 1, code.distance(from: code.startIndex, to: close))
            let original = Array(text)
            // The same offsets in the original text (blanking keeps every character's place).
            if offsets.0 <= offsets.1, offsets.1 <= original.count {
                let literal = String(original[offsets.0..<offsets.1])
                literals.append(literal)
                if literal.contains("\n") {
                    literals += literal.split(separator: "\n").map { String($0.drop { $0 == " " || $0 == "\"" }) }
                }
            }
            start = code.index(after: close)
        }
        return literals
    }

    /// The check above sees literals of several lines too.
    @Test func literalsOfSeveralLinesAreSeen() {
        let found = Self.literals(#"""
            let a = "org.bluez.Device1" // "Powered"
            let b = """
                Connected
                """
            """#)
        #expect(found.contains("org.bluez.Device1"))
        #expect(found.contains("Connected"))
        #expect(!found.contains("Powered"))
    }

    static let bluezProperties: Set<String> = [
        "Powered", "Discovering", "Connected", "ServicesResolved", "RSSI", "Name", "Alias", "UUIDs",
        "ManufacturerData", "ServiceData", "TxPower", "Paired", "Notifying", "NotifyAcquired", "Value", "Flags", "MTU",
    ]

    /// BlueZ's messages that mean something to birdctl: the BlueZ layer
    /// names them (`BlueZError.isNotifyAcquiredByAnother`, …).
    static let bluezMessages: Set<String> = ["Notify acquired", "le-connection-abort-by-local", "br-connection-canceled", "att error"]

    @Test(arguments: ["Bird", "Formats", "Gateway", "Health", "Proxy", "BirdctlCLI", "birdctl", "birdctl-proxy"])
    func noBlueZNameAboveTheBlueZLayer(_ target: String) throws {
        for file in try Self.files(of: target) {
            for literal in Self.literals(file.text) {
                #expect(!literal.contains("org.bluez"), "\(target)/\(file.name) spells \"\(literal)\"")
                #expect(!literal.contains("org.freedesktop"), "\(target)/\(file.name) spells \"\(literal)\"")
                #expect(!Self.bluezProperties.contains(literal), "\(target)/\(file.name) spells \"\(literal)\"")
                #expect(!Self.bluezMessages.contains(literal), "\(target)/\(file.name) spells \"\(literal)\"")
            }
        }
    }

    /// DBus re-exports Loop (a connection's `loop` is part of its API), so
    /// above DBus the loop's types need no import of their own.
    @Test(arguments: [
        ("Threads", []), ("Loop", ["CLoop", "Threads"]), ("DBus", ["CDBus", "Loop", "Threads"]),
        ("BlueZ", ["DBus", "Loop"]), ("Bird", ["BlueZ", "DBus", "Loop"]),
        ("MQTT", ["CMosquitto", "Threads"]), ("Formats", ["Bird", "BlueZ"]), ("Health", ["Bird", "Loop"]),
        ("Gateway", ["Bird", "BlueZ", "DBus", "Loop", "MQTT", "Formats", "Health"]),
        ("Proxy", ["Bird", "BlueZ", "DBus", "Loop", "SwiftProtobuf", "Crypto"]),
        ("BirdctlCLI", ["Bird", "BlueZ", "DBus", "Loop", "MQTT", "Formats", "Gateway", "Health"]), ("birdctl", ["BirdctlCLI", "DBus", "Loop"]),
        ("birdctl-proxy", ["BirdctlCLI", "Proxy", "Health", "Bird", "BlueZ", "DBus", "Loop"]),
    ])
    func importsOnlyPointDown(_ target: String, _ allowed: [String]) throws {
        let ours: Set<String> = [
            "Threads", "CLoop", "Loop", "CDBus", "DBus", "BlueZ", "Bird", "Formats", "Gateway", "Health", "Proxy", "BirdctlCLI",
            "CMosquitto", "MQTT",
        ]
        for file in try Self.files(of: target) {
            for line in file.text.split(separator: "\n") {
                let statement = line.hasPrefix("@_exported ") ? line.dropFirst("@_exported ".count) : line
                guard statement.hasPrefix("import ") else { continue }
                let module = String(statement.dropFirst("import ".count))
                #expect(!ours.contains(module) || allowed.contains(module), "\(target)/\(file.name): \(line)")
            }
        }
    }

    /// Loop, DBus, MQTT and Threads are the layers over C libraries (epoll,
    /// libdbus, libmosquitto, pthreads); nothing above them touches a pointer,
    /// nor does the tests' support (its sockaddr and posix_spawn's string
    /// arrays are handled in CTestSupport).
    @Test(arguments: [
        "BlueZ", "Bird", "Formats", "Gateway", "Health", "Proxy", "BirdctlCLI", "birdctl", "TestProcesses", "FakeBlueZSupport",
        "MosquittoSupport", "test-support-probe",
    ])
    func noPointersAboveTheDBusLayer(_ target: String) throws {
        for file in try Self.files(of: target) {
            for word in ["UnsafePointer", "UnsafeMutablePointer", "UnsafeRawPointer", "UnsafeMutableRawPointer", "OpaquePointer"] {
                #expect(!file.text.contains(word), "\(target)/\(file.name) uses \(word)")
            }
        }
    }

    /// Tests start programs only through the test support's `ChildProcess`:
    /// Foundation's `Process` lists /proc/self/fd on each start (and crashed
    /// the test process with many descriptors open), and its children
    /// outlive a run that is killed (docs/testing.md).
    @Test func testsStartChildrenOnlyThroughTheTestSupport() throws {
        let tests = Self.sources.deletingLastPathComponent().appendingPathComponent("Tests")
        let targets = try FileManager.default.contentsOfDirectory(atPath: tests.path).map { "../Tests/" + $0 }
            + ["TestProcesses", "FakeBlueZSupport", "MosquittoSupport", "test-support-probe"]
        let regex = try NSRegularExpression(pattern: #"(?<![A-Za-z_])Process\("#)
        for target in targets {
            for file in try Self.files(of: target) {
                let match = regex.firstMatch(in: file.text, range: NSRange(file.text.startIndex..., in: file.text))
                #expect(match == nil, "\(target)/\(file.name) starts a Foundation Process")
            }
        }
    }

    /// birdctl runs on its event loop's callbacks, never on Swift's tasks or
    /// dispatch queues: anything from the Concurrency runtime (even
    /// ContinuousClock) or libdispatch links it in, and a `read` then maps
    /// more code and runs its start-up (docs/performance.md). Tests await
    /// through the test support (FakeBlueZSupport, TestProcesses).
    /// (Proxy is not held to it: the messages swift-protobuf generates use
    /// FoundationEssentials' `Data`; the command line does not link it.)
    @Test(arguments: ["Threads", "Loop", "DBus", "BlueZ", "Bird", "MQTT", "Formats", "Gateway", "Health", "BirdctlCLI", "birdctl"])
    func noConcurrencyRuntimeOrDispatchInWhatBirdctlLinks(_ target: String) throws {
        let regex = try NSRegularExpression(
            pattern: #"\b(async|await|actor|Task|TaskGroup|AsyncStream|AsyncSequence|ContinuousClock|SuspendingClock|MainActor|withChecked\w*Continuation|Dispatch\w*|Foundation)\b"#)
        for file in try Self.files(of: target) {
            for line in file.text.split(separator: "\n") {
                let code = String(line.range(of: "//").map { line[..<$0.lowerBound] } ?? line)
                let match = regex.firstMatch(in: code, range: NSRange(code.startIndex..., in: code))
                #expect(match == nil, "\(target)/\(file.name): \(line)")
            }
        }
    }
}
