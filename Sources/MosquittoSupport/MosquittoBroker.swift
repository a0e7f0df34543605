import CTestSupport
import Foundation
import Glibc
import Synchronization
import TestProcesses

/// A real MQTT broker (Debian's `mosquitto`) on a free loopback port, with a
/// generated configuration in a directory of its own: persistence on, and
/// optionally password authentication and TLS with a CA made for the test.
public final class MosquittoBroker: @unchecked Sendable {
    public struct TLSFiles: Sendable {
        public let caCertificate: String
        public let serverCertificate: String
        public let serverKey: String
        /// A CA that signed nothing here: a client trusting only it must fail.
        public let otherCACertificate: String
        /// A client certificate (and key) the CA signed.
        public let clientCertificate: String
        public let clientKey: String
    }

    public let port: Int
    public let directory: URL
    public let tls: TLSFiles?
    private var process: ChildProcess?

    /// `users`: name → password (anonymous clients refused when given).
    /// `requireClientCertificate`: TLS clients must show one the CA signed.
    /// Async, so that its helpers (openssl, mosquitto_passwd) and the start
    /// never hold a pool thread (see `offThePool`).
    public init(users: [String: String] = [:], tls: Bool = false, requireClientCertificate: Bool = false) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mosquitto-\(UUID().uuidString)")
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        port = try freeLoopbackPort()
        self.tls = tls ? try await offThePool { try Self.makeCertificates(in: directory) } : nil
        var config = """
            listener \(port) 127.0.0.1
            persistence true
            persistence_location \(directory.path)/
            log_dest file \(directory.path)/mosquitto.log
            log_dest stdout
            user root

            """
        if users.isEmpty {
            config += "allow_anonymous true\n"
        } else {
            let passwords = directory.appendingPathComponent("passwords").path
            try await offThePool {
                for (user, password) in users.sorted(by: { $0.key < $1.key }) {
                    try Self.run("/usr/bin/mosquitto_passwd", ["-b", passwords, user, password], creating: passwords)
                }
            }
            config += "allow_anonymous false\npassword_file \(passwords)\n"
        }
        if let files = self.tls {
            config += "cafile \(files.caCertificate)\ncertfile \(files.serverCertificate)\nkeyfile \(files.serverKey)\n"
            if requireClientCertificate { config += "require_certificate true\n" }
        }
        try config.write(to: directory.appendingPathComponent("mosquitto.conf"), atomically: true, encoding: .utf8)
        try await start()
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// `mqtt://127.0.0.1:PORT` (`mqtts://` with TLS), then `/prefix` if given.
    public func url(prefix: String? = nil) -> String {
        "\(tls == nil ? "mqtt" : "mqtts")://127.0.0.1:\(port)" + (prefix.map { "/" + $0 } ?? "")
    }

    /// Starts the broker (again, on the same port, with what it persisted)
    /// and returns once it accepts connections.
    public func start() async throws {
        let configuration = directory.appendingPathComponent("mosquitto.conf").path
        process = try await offThePool { [directory] in
            try Self.launch(configuration: configuration, log: directory.appendingPathComponent("mosquitto.log"))
        }
    }

    /// Starts mosquitto and waits until it says it is running.
    private static func launch(configuration: String, log: URL) throws -> ChildProcess {
        // stdbuf: its log lines on stdout as they are written (a pipe is block-buffered).
        let process = try ChildProcess(
            "/usr/bin/stdbuf",
            ["-oL", "/usr/sbin/mosquitto", "-c", configuration],
            stdout: .pipe)
        guard let handle = process.stdout else { return process }
        // It says "… running" once its listeners are open (mosquitto logs it
        // after listeners__start), so no connect check is needed; read on a
        // thread of its own, so that a broker that says nothing fails after 10 s.
        let answered = DispatchSemaphore(value: 0)
        let running = SaidRunning()
        Thread.detachNewThread {
            var said = ""
            while !said.contains(" running") {
                let data = handle.nextChunk()
                if data.isEmpty { break }
                said += String(decoding: data, as: UTF8.self)
            }
            running.value.store(said.contains(" running"), ordering: .releasing)
            answered.signal()
            // Drained to the end, so the broker never blocks on a full pipe.
            while !handle.nextChunk().isEmpty {}
            try? handle.close()
        }
        guard answered.wait(timeout: .now() + 10) == .success, running.value.load(ordering: .acquiring) else {
            process.kill()
            throw TestSetupError("mosquitto did not start:\n\((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        }
        return process
    }

    /// A clean shutdown (SIGTERM: it saves its persistence file), waited for.
    public func stop() async {
        guard let process else { return }
        self.process = nil
        process.signal(SIGTERM)
        _ = try? await offThePool { if process.wait(within: .seconds(10)) == nil { process.kill() } }
    }

    /// SIGSTOP: a hung broker that still holds its connections.
    public func signal(_ signal: Int32) {
        process?.signal(signal)
    }

    public func kill() {
        guard let process else { return }
        process.kill()
        self.process = nil
    }

    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("mosquitto.log"), encoding: .utf8)) ?? ""
    }

    /// `mosquitto_sub` on `topics` (QoS 1, `-v`: "topic payload" lines). With
    /// a `sessionID` its session persists (clean session off) across broker
    /// restarts, and it reconnects by itself. Returns once it is subscribed.
    public func subscribe(
        _ topics: [String], sessionID: String? = nil, environment: [String: String] = [:], extra: [String] = []
    ) async throws -> BirdctlProcess {
        let marker = "birdctl-test/ready/\(UUID().uuidString)"
        // -W: gone after two minutes even if a failed test never stops it.
        var arguments = ["-h", "127.0.0.1", "-p", String(port), "-q", "1", "-v", "-W", "120", "-t", marker]
        for topic in topics { arguments += ["-t", topic] }
        if let sessionID { arguments += ["-c", "-i", sessionID] }
        arguments += extra
        // A retained marker arrives as soon as the SUBSCRIBE is in place.
        try await publish(marker, "ready", retain: true, extra: extra)
        let subscriber = try BirdctlProcess(
            arguments, environment: environment, executable: URL(fileURLWithPath: "/usr/bin/mosquitto_sub"))
        guard let line = try await subscriber.nextLine(within: .seconds(10)), line.hasPrefix(marker) else {
            throw TestSetupError("mosquitto_sub did not subscribe:\n\(subscriber.stderr)")
        }
        return subscriber
    }

    /// One message through `mosquitto_pub`.
    public func publish(_ topic: String, _ payload: String, retain: Bool = false, extra: [String] = []) async throws {
        var arguments = ["-h", "127.0.0.1", "-p", String(port), "-q", "1", "-t", topic, "-m", payload]
        if retain { arguments.append("-r") }
        try await offThePool { [arguments] in try Self.run("/usr/bin/mosquitto_pub", arguments + extra) }
    }

    /// The retained messages under `topic` (a filter), as topic → payload.
    public func retained(_ topic: String, extra: [String] = []) async throws -> [String: String] {
        let arguments = ["-h", "127.0.0.1", "-p", String(port), "-t", topic, "-v", "--retained-only", "-W", "1"] + extra
        let output = try await offThePool { try Self.run("/usr/bin/mosquitto_sub", arguments, allowFailure: true) }
        var messages: [String: String] = [:]
        for line in output.split(separator: "\n") {
            guard let space = line.firstIndex(of: " ") else { continue }
            messages[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        return messages
    }

    // MARK: Set-up


    /// A CA, a server certificate it signs for 127.0.0.1, and another CA.
    private static func makeCertificates(in directory: URL) throws -> TLSFiles {
        let d = directory.path
        let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        let script = """
            set -e
            cd '\(d)'
            openssl req -x509 \(key) -keyout ca.key -out ca.crt -days 2 -subj /CN=birdctl-test-ca 2>/dev/null
            openssl req -x509 \(key) -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=someone-else 2>/dev/null
            openssl req \(key) -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext
            openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 \\
                -extfile san.ext 2>/dev/null
            openssl req \(key) -keyout client.key -out client.csr -subj /CN=birdctl-gateway 2>/dev/null
            openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2 2>/dev/null
            """
        try run("/bin/sh", ["-c", script])
        return TLSFiles(
            caCertificate: "\(d)/ca.crt", serverCertificate: "\(d)/server.crt", serverKey: "\(d)/server.key",
            otherCACertificate: "\(d)/other-ca.crt", clientCertificate: "\(d)/client.crt", clientKey: "\(d)/client.key")
    }

    /// Runs a helper to completion; its stdout.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], creating file: String? = nil, allowFailure: Bool = false) throws -> String {
        var arguments = arguments
        // mosquitto_passwd -c makes the file; later users are added without it.
        if let file, !FileManager.default.fileExists(atPath: file) { arguments.insert("-c", at: 0) }
        let (status, output) = try ChildProcess.run(executable, arguments)
        if status != 0 && !allowFailure {
            throw TestSetupError("\(executable) \(arguments.joined(separator: " ")) exited \(status)")
        }
        return output
    }
}

/// Whether mosquitto said it is running: written by the reader thread before
/// it signals, read after the wait.
/// An atomic, not a plain flag: a semaphore signalled before its wait
/// passes through libdispatch, where ThreadSanitizer sees no ordering.
private final class SaidRunning: Sendable {
    let value = Atomic<Bool>(false)
}
