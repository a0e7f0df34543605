@testable import BirdctlCLI
import Testing

@Suite("--metrics [ADDRESS:]PORT")
struct MetricsEndpointTests {
    @Test(arguments: [
        ("9464", nil, 9464), ("127.0.0.1:9464", "127.0.0.1", 9464), ("[::1]:9464", "::1", 9464),
        ("localhost:0", "localhost", 0), ("[::]:65535", "::", 65535),
    ] as [(String, String?, Int)])
    func parses(_ text: String, _ host: String?, _ port: Int) throws {
        let endpoint = try MetricsEndpoint(text)
        #expect(endpoint.host == host && Int(endpoint.port) == port)
    }

    @Test(arguments: ["", "x", "65536", "-1", "::1:9464", "[::1]9464", ":9464", "127.0.0.1:", "9464 ", "٩٤"])
    func refuses(_ text: String) {
        #expect(throws: UsageError.self) { try MetricsEndpoint(text) }
    }

    /// How a listening endpoint is named in messages.
    @Test func describes() throws {
        #expect(try MetricsEndpoint("9464").description == "*:9464")
        #expect(try MetricsEndpoint("[::1]:1").description == "[::1]:1")
    }
}
