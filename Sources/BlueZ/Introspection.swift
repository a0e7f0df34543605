/// What an `Introspect` reply says of one object: its interfaces and the
/// names of its children. Only those two tags are read. The XML is
/// bluetoothd's (a peer names nothing in it); anything unexpected in it is
/// skipped, never trusted further than a path component. Public for the
/// fuzz target (fuzz/).
public struct Introspection: Equatable, Sendable {
    public var interfaces: [String] = []
    public var children: [String] = []

    public init(xml: String) {
        // Read as UTF-8 bytes: every delimiter is ASCII, and walking the text
        // by Character ran unspecialized generic code, a large share of a
        // read's start-up (see docs/performance.md, 'Start-up').
        let bytes = Array(xml.utf8)
        // Depth 1 is inside the root <node>: its interfaces and child nodes.
        var depth = 0
        var position = 0
        while let open = bytes[position...].firstIndex(of: UInt8(ascii: "<")),
            let close = bytes[open...].firstIndex(of: UInt8(ascii: ">"))
        {
            let tag = bytes[(open + 1)..<close]
            position = close + 1
            if tag.first == UInt8(ascii: "/") {
                if tag.dropFirst().starts(with: "node".utf8) { depth -= 1 }
                continue
            }
            let kind = tag.prefix { !Self.isXMLSpace($0) && $0 != UInt8(ascii: "/") }
            if kind.elementsEqual("node".utf8) {
                if depth == 1, let name = Self.name(in: tag), Self.isPathElement(name) { children.append(name) }
                if tag.last != UInt8(ascii: "/") { depth += 1 }
            } else if kind.elementsEqual("interface".utf8), depth == 1, let name = Self.name(in: tag) {
                interfaces.append(name)
            }
        }
    }

    private static let nameAttribute = Array(#"name=""#.utf8)

    /// The value of a tag's `name="…"` attribute.
    private static func name(in tag: ArraySlice<UInt8>) -> String? {
        var start = tag.startIndex
        while !tag[start...].starts(with: nameAttribute) {
            if start == tag.endIndex { return nil }
            start += 1
        }
        start += nameAttribute.count
        guard let end = tag[start...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        return String(decoding: tag[start..<end], as: UTF8.self)
    }

    /// XML's white space: space, tab, carriage return, line feed.
    private static func isXMLSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    /// A D-Bus path element: [A-Za-z0-9_]+.
    public static func isPathElement(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F
            }
    }
}
