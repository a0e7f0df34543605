@testable import BirdctlCLI
import Testing

@Suite("[ADDRESS:]PORT of --metrics and --proxy")
struct ListenEndpointTests {
    @Test(arguments: [
        ("9464", nil, 9464), ("127.0.0.1:9464", "127.0.0.1", 9464), ("[::1]:9464", "::1", 9464),
        ("localhost:0", "localhost", 0), ("[::]:65535", "::", 65535),
    ] as [(String, String?, Int)])
    func parses(_ text: String, _ host: String?, _ port: Int) throws {
        let endpoint = try ListenEndpoint(text, option: "--metrics")
        #expect(endpoint.host == host && Int(endpoint.port) == port)
    }

    @Test(arguments: ["", "x", "65536", "-1", "::1:9464", "[::1]9464", ":9464", "127.0.0.1:", "9464 ", "٩٤"])
    func refuses(_ text: String) {
        #expect(throws: UsageError.self) { try ListenEndpoint(text, option: "--metrics") }
    }

    /// How a listening endpoint is named in messages.
    @Test func describes() throws {
        #expect(try ListenEndpoint("9464", option: "--metrics").description == "*:9464")
        #expect(try ListenEndpoint("[::1]:1", option: "--metrics").description == "[::1]:1")
    }

    /// Plaintext is allowed only where no other machine can connect.
    @Test(arguments: [
        ("127.0.0.1:6053", true), ("127.9.8.7:1", true), ("[::1]:6053", true), ("localhost:6053", true),
        ("6053", false), ("0.0.0.0:6053", false), ("[::]:6053", false), ("192.168.1.2:6053", false), ("127.example:1", false),
    ] as [(String, Bool)])
    func loopback(_ text: String, _ expected: Bool) throws {
        #expect(try ListenEndpoint(text, option: "--proxy").isLoopback == expected)
    }

    @Test func namesItsOptionInAnError() {
        do {
            _ = try ListenEndpoint("x", option: "--proxy")
            Issue.record("x was taken for an endpoint")
        } catch {
            #expect(error.message == "--proxy expects [ADDRESS:]PORT with a port from 0 to 65535, not x")
        }
    }
}
