/// The Bluetooth proxy's side of the health page (`watch --all --proxy`):
/// Home Assistant's clients and links. Its labels are a fixed set.
public struct ProxyHealth: Sendable {
    /// API clients connected now.
    public var clients: Int
    /// Clients the proxy dropped (a bad key or frame, silence, too slow).
    public var clientsDropped: Int
    /// Advertisements passed on to the clients that asked for them.
    public var advertisements: Int
    /// Home Assistant's links up or being made.
    public var links: Int
    /// Connects asked for, by how they ended: `linked`, `failed`, `no_slot`.
    public var connects: [String: Int]

    public init(clients: Int, clientsDropped: Int, advertisements: Int, links: Int, connects: [String: Int]) {
        (self.clients, self.clientsDropped, self.advertisements, self.links, self.connects) =
            (clients, clientsDropped, advertisements, links, connects)
    }
}
