import BlueZ
import FuzzSupport

/// Any text as an Introspect reply: read without trapping, every child is a
/// valid path element (FocusedLoad builds paths from them), and a document
/// written from names the fuzzer chose reads back as those names.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIntrospection(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let parsed = Introspection(xml: String(decoding: bytes, as: UTF8.self))
    for child in parsed.children {
        require(Introspection.isPathElement(child), "child \(child.debugDescription) is not a path element")
    }
    require(Introspection(xml: String(decoding: bytes, as: UTF8.self)) == parsed, "read twice, read differently")

    // The same bytes as names in a well-formed document (as bluetoothd writes it).
    var input = FuzzInput(bytes)
    var interfaces: [String] = []
    var children: [String] = []
    var xml = "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n"
    xml += "\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<node>\n"
    while !input.isEmpty {
        let name = String(input.text(upTo: 32).unicodeScalars.filter { !"\"<>&".unicodeScalars.contains($0) })
        if input.bool() {
            interfaces.append(name)
            xml += "  <interface name=\"\(name)\">\n    <method name=\"Get\">\n"
            xml += "      <arg name=\"interface\" type=\"s\" direction=\"in\"/>\n    </method>\n"
            xml += "    <property name=\"UUIDs\" type=\"as\" access=\"read\"/>\n  </interface>\n"
        } else {
            if Introspection.isPathElement(name) { children.append(name) }
            xml += "  <node name=\"\(name)\"/>\n"
        }
    }
    xml += "</node>\n"
    let written = Introspection(xml: xml)
    require(written.interfaces == interfaces, "interfaces \(interfaces) read as \(written.interfaces)")
    require(written.children == children, "children \(children) read as \(written.children)")
    return 0
}
