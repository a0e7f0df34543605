/// What an `Introspect` reply says of one object: its interfaces and the
/// names of its children. Only those two tags are read. The XML is
/// bluetoothd's (a peer names nothing in it); anything unexpected in it is
/// skipped, never trusted further than a path component.
struct Introspection: Equatable, Sendable {
    var interfaces: [String] = []
    var children: [String] = []

    init(xml: String) {
        // Depth 1 is inside the root <node>: its interfaces and child nodes.
        var depth = 0
        var rest = Substring(xml)
        while let open = rest.firstIndex(of: "<"), let close = rest[open...].firstIndex(of: ">") {
            let tag = rest[rest.index(after: open)..<close]
            rest = rest[rest.index(after: close)...]
            if tag.hasPrefix("/") {
                if tag.dropFirst().hasPrefix("node") { depth -= 1 }
                continue
            }
            let kind = tag.prefix { !$0.isWhitespace && $0 != "/" }
            if kind == "node" {
                if depth == 1, let name = Self.name(in: tag), Self.isPathElement(name) { children.append(name) }
                if !tag.hasSuffix("/") { depth += 1 }
            } else if kind == "interface", depth == 1, let name = Self.name(in: tag) {
                interfaces.append(name)
            }
        }
    }

    /// The value of a tag's `name="…"` attribute.
    private static func name(in tag: Substring) -> String? {
        guard let start = tag.firstOccurrence(of: "name=\"")?.upperBound,
            let end = tag[start...].firstIndex(of: "\"")
        else { return nil }
        return String(tag[start..<end])
    }

    /// A D-Bus path element: [A-Za-z0-9_]+.
    static func isPathElement(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F
            }
    }
}
