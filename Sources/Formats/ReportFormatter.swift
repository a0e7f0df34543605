import Bird

/// How readings and events look: text for people, JSON Lines for programs.
/// Data goes to stdout; in text mode, events go to stderr as diagnostics.
public struct ReportFormatter: Sendable {
    public var json: Bool
    public var color: Bool

    public init(json: Bool, color: Bool) {
        self.json = json
        self.color = color
    }

    public typealias Peripheral = BirdCentral.Peripheral

    // MARK: Readings

    /// One `watch` line, appended to `line` (without its newline). Built as
    /// bytes straight into the output buffer: this runs per notification, and
    /// making a String of the line and copying it out again cost more than
    /// the rest of it.
    public func appendReading(_ peripheral: Peripheral, _ value: BirdValue, raw: [UInt8], notified: Bool, to line: inout [UInt8]) {
        if json {
            var object = event("reading", peripheral)
            object.add("field", value.field.rawValue)
            object.add("value", Self.jsonValue(value))
            object.add("raw", hexString(raw))
            object.add("source", notified ? "notify" : "read")
            line += object.renderedBytes
            return
        }
        if color { line += Self.dimOn }
        Timestamp.appendClock(to: &line)
        if color { line += Self.styleOff }
        Self.appendGap(to: &line)
        peripheral.address.append(to: &line)
        Self.appendGap(to: &line)
        line += fieldLabel(value.field)
        Self.appendGap(to: &line)
        line += styled(value).utf8
    }

    /// Two spaces, byte by byte: appending a shared array cost its lazy
    /// global, a retain and a generic append per gap (docs/performance.md,
    /// 'The signal path').
    private static func appendGap(to line: inout [UInt8]) {
        line.append(UInt8(ascii: " "))
        line.append(UInt8(ascii: " "))
    }

    /// Each field's name padded to one width (the widest, "color"), plain and bold.
    private func fieldLabel(_ field: BirdField) -> [UInt8] {
        switch (field, color) {
        case (.name, false): Self.nameLabel
        case (.name, true): Self.boldNameLabel
        case (.color, false): Self.colorLabel
        case (.color, true): Self.boldColorLabel
        case (.alpha, false): Self.alphaLabel
        case (.alpha, true): Self.boldAlphaLabel
        }
    }

    private static let nameLabel = Array("name ".utf8)
    private static let colorLabel = Array("color".utf8)
    private static let alphaLabel = Array("alpha".utf8)
    private static let boldNameLabel = Array("\u{1B}[1mname \u{1B}[0m".utf8)
    private static let boldColorLabel = Array("\u{1B}[1mcolor\u{1B}[0m".utf8)
    private static let boldAlphaLabel = Array("\u{1B}[1malpha\u{1B}[0m".utf8)

    private static let dimOn = Array("\u{1B}[2m".utf8)
    private static let styleOff = Array("\u{1B}[0m".utf8)

    /// A `bad_value` JSON Lines event.
    public func badValueLine(_ peripheral: Peripheral, _ error: BirdValueError) -> String {
        var object = event("bad_value", peripheral)
        object.add("field", error.field.rawValue)
        object.add("error", error.reason)
        object.add("raw", error.rawHex)
        return object.rendered
    }

    /// The same for a person, on stderr.
    public func badValueText(_ peripheral: Peripheral, _ error: BirdValueError) -> String {
        "\(error) from \(peripheral.address)"
    }

    /// A value as JSON: alpha is a number, the rest strings.
    public static func jsonValue(_ value: BirdValue) -> JSONObject.Value {
        if case .alpha = value { return .number(value.text) }
        return .string(value.text)
    }

    /// The value as text, escaped (a name is the peer's; colour and alpha
    /// text are ours).
    public func text(_ value: BirdValue) -> String {
        if case .name(let name) = value { return SafeText.escaped(name) }
        return value.text
    }

    /// The value, with a swatch of the colour itself on a colour terminal.
    public func styled(_ value: BirdValue) -> String {
        guard color, case .color(let rgb) = value else { return text(value) }
        return "\u{1B}[38;2;\(rgb.red);\(rgb.green);\(rgb.blue)m■\u{1B}[0m \(value.text)"
    }

    // MARK: Events

    /// A JSON Lines event, or nil in text mode (where `eventText` goes to stderr).
    public func eventLine(_ report: BirdCentral.Report) -> String? {
        guard json else { return nil }
        switch report {
        case .found(let p, let rssi):
            var object = event("found", p)
            object.add("name", ifPresent: p.name)
            if let rssi { object.add("rssi", .integer(Int(rssi))) }
            return object.rendered
        case .connected(let p):
            var object = event("connected", p)
            object.add("name", ifPresent: p.name)
            // Always: with several adapters (`--adapter hci0,hci1`), the one this link is on.
            object.add("adapter", ifPresent: p.adapterName)
            return object.rendered
        case .disconnected(let p):
            return event("disconnected", p).rendered
        case .retrying(let p, let attempt, let error):
            var object = event("retrying", p)
            object.add("attempt", .integer(attempt))
            object.add("error", "\(error)")
            return object.rendered
        case .operationFailed(let p, let what, let error):
            var object = event("error", p)
            object.add("message", "could not \(what): \(error)")
            return object.rendered
        case .gaveUp(let failure, let bird):
            // A stranger asking for pairing names itself; other failures are
            // the bird's in `watch --all`, else the command's.
            var object = if case .pairingNotNamed(let p, _) = failure { event("pairing-declined", p) } else { event("error", bird) }
            object.add("message", failure.message)
            return object.rendered
        case .waiting(let message):
            var object = event("waiting", nil)
            object.add("message", message)
            return object.rendered
        case .forgotten(let address):
            var object = event("forgotten", nil)
            object.add("address", address)
            return object.rendered
        case .links(let adapter, let used, let limit, let learned):
            var object = event("links", nil)
            object.add("adapter", adapter)
            object.add("used", .integer(used))
            object.add("limit", limit.map(JSONObject.Value.integer) ?? .null)
            object.add("limit_learned", .bool(learned))
            return object.rendered
        case .polled(let p):
            return event("polled", p).rendered
        case .held(let p):
            return event("held", p).rendered
        case .adapter(let p, let adapter, let reason):
            var object = event("adapter", p)
            object.add("adapter", adapter)
            object.add("reason", reason.rawValue)
            return object.rendered
        case .adapterReset(let adapter, let failure):
            var object = event("adapter-reset", nil)
            object.add("adapter", adapter)
            object.add("ok", .bool(failure == nil))
            if let failure { object.add("message", "could not power \(adapter) off and on: \(failure)") }
            return object.rendered
        case .discoveryDeaf(let adapter, let silentFor, let stalled, let powerCycle):
            var object = event("discovery-deaf", nil)
            object.add("adapter", adapter)
            object.add("silent_s", .integer(Int(silentFor.components.seconds)))
            object.add("stalled", .bool(stalled))
            object.add("action", powerCycle ? "power-cycle" : "restart")
            return object.rendered
        case .quiet(let p, let probe):
            return quietLine(p, probe)
        case .pairing(let p):
            return event("pairing", p).rendered
        case .paired(let p):
            return event("paired", p).rendered
        case .written(let p, let value, let failure):
            var object = event("written", p)
            object.add("field", value.field.rawValue)
            object.add("value", Self.jsonValue(value))
            object.add("ok", .bool(failure == nil))
            if let failure { object.add("message", "could not write \(value.field): \(failure)") }
            return object.rendered
        case .reading, .badValue:
            return nil
        }
    }

    /// The same events for a person, on stderr: not escaped here, since
    /// `Diagnostics` escapes every message once (twice would double each
    /// backslash).
    public func eventText(_ report: BirdCentral.Report) -> String? {
        switch report {
        case .found(let p, let rssi): "found \(label(p))" + (rssi.map { " at \($0) dBm" } ?? "")
        case .connected(let p): "connected to \(label(p))"
        case .disconnected(let p): "disconnected from \(label(p))"
        case .retrying(let p, let attempt, let error): "connecting to \(p.address) failed (\(error)); attempt \(attempt)"
        case .operationFailed(let p, let what, let error): "could not \(what) on \(p.address): \(explained(error))"
        case .gaveUp(let failure, let bird):
            // A stranger asking for pairing names itself already.
            if case .pairingNotNamed = failure { failure.message } else { (bird.map { "\($0.address): " } ?? "") + failure.message }
        case .waiting(let message): message
        case .forgotten(let address): "forgot \(address): not heard for a while"
        case .links(let adapter, let used, let limit?, let learned):
            "\(adapter) holds \(used) of at most \(limit) links" + (learned ? " (the limit learned from connections that never came)" : "")
        case .links(let adapter, let used, nil, _):
            "\(adapter) holds \(used) links; its limit is not known (the one learned no longer holds)"
        case .polled(let p): "polling \(label(p)) from now on, to share the last link"
        case .held(let p): "holding \(label(p)) from now on: a link is free for it"
        case .adapter(let p, let adapter, let reason): "\(label(p)) is connected through \(adapter) now (\(reason.rawValue))"
        case .adapterReset(let adapter, nil):
            "no connection comes through \(adapter) (connect deadlines in a row, fewer links up than it held): powering it off and on"
        case .adapterReset(let adapter, let failure?): "could not power \(adapter) off and on: \(explained(failure))"
        case .discoveryDeaf(let adapter, let silentFor, let stalled, let powerCycle):
            "\(adapter) heard no Bird for \(silentFor.components.seconds) s while one is looked for"
                + (stalled ? ", restarting its discovery did not help" : "")
                + (powerCycle ? ": powering it off and on" : ": restarting its discovery")
        case .quiet(let p, let probe): quietText(p, probe)
        case .pairing(let p): "pairing with \(label(p))"
        case .paired(let p): "paired with \(label(p))"
        case .written(let p, let value, nil): "wrote \(value.field) \(value.text) to \(label(p))"
        case .written(let p, let value, let failure?): "could not write \(value.field) to \(p.address): \(explained(failure))"
        case .reading, .badValue: nil
        }
    }

    /// `Robin (F0:0D:B1:7D:00:01)`: the advertised name as the peer gave it,
    /// for messages escaped where they are printed.
    public func label(_ p: Peripheral) -> String {
        if let name = p.name, !name.isEmpty { return "\(name) (\(p.address))" }
        return p.address.description
    }

    public func event(_ name: String, _ peripheral: Peripheral?) -> JSONObject {
        var object = JSONObject()
        object.add("time", Timestamp.iso8601())
        object.add("event", name)
        if let peripheral { object.add("address", peripheral.address) }
        return object
    }

    // MARK: Styling

    public func dim(_ s: String) -> String { color ? "\u{1B}[2m\(s)\u{1B}[0m" : s }
    public func bold(_ s: String) -> String { color ? "\u{1B}[1m\(s)\u{1B}[0m" : s }

    /// Pads ASCII text (field names) to `width`.
    public func pad(_ s: String, _ width: Int) -> String {
        s.utf8.count >= width ? s : s + String(repeating: " ", count: width - s.utf8.count)
    }
}
