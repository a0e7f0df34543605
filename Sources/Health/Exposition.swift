/// The Prometheus text exposition format (version 0.0.4, which OpenMetrics
/// scrapers read too): one `# HELP` and `# TYPE` per family, then its
/// samples. Label values are escaped (backslash, double quote, newline);
/// names are the caller's constants.
public struct Exposition: Sendable {
    public enum Kind: String, Sendable {
        case gauge, counter
    }

    public private(set) var text = ""

    public init() {}

    /// Starts a family; a counter's name ends in `_total`.
    public mutating func family(_ name: String, _ kind: Kind, help: String) {
        precondition(kind != .counter || name.hasSuffix("_total"), "a counter's name ends in _total")
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(kind.rawValue)\n"
    }

    public mutating func sample(_ name: String, _ value: Double, labels: KeyValuePairs<String, String> = [:]) {
        text += name
        if !labels.isEmpty {
            text += "{"
            for (index, (key, labelValue)) in labels.enumerated() {
                if index > 0 { text += "," }
                text += key + "=\"" + Self.escaped(labelValue) + "\""
            }
            text += "}"
        }
        text += " " + Self.number(value) + "\n"
    }

    /// A family of one sample without labels.
    public mutating func single(_ name: String, _ kind: Kind, help: String, _ value: Double) {
        family(name, kind, help: help)
        sample(name, value)
    }

    public mutating func single(_ name: String, _ kind: Kind, help: String, _ value: Int) { single(name, kind, help: help, Double(value)) }

    public mutating func sample(_ name: String, _ value: Int, labels: KeyValuePairs<String, String> = [:]) {
        sample(name, Double(value), labels: labels)
    }

    /// A label value as the format wants it.
    static func escaped(_ value: String) -> String {
        var escaped = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// Whole numbers without a fraction; others as Swift prints them.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}
