import Bird

/// One command-line option, declared once (in Options.swift): its name, what
/// it does, and its kind — the type of its value, its default and its
/// choices. The parser converts and checks values by the kind (`Arguments`);
/// `--help`, the man page and the shell completions render the same
/// declaration: the value's label, the default, the choices. A command that
/// needs another default or wording declares another option of the same
/// name and kind (`--timeout` is three), never the same one twice.
struct Option: Hashable, Sendable {
    /// `--timeout`.
    let name: String
    /// What the option does; the default and the choices are added from `kind`.
    let summary: String
    let kind: Kind
    /// What happens without the option, where that is not a value
    /// (`--adapter`: the first powered one).
    let fallback: String?

    enum Kind: Sendable {
        case flag
        /// Seconds, at least `minimum`. Where `none` is set, it says what nil
        /// means (`no limit`), and 0 is nil; `default` nil is none.
        case seconds(default: Duration?, none: String? = nil, minimum: Duration = .zero)
        /// An integer in `range`, called `label` in help.
        case integer(label: String, range: ClosedRange<Int>, default: Int? = nil, inBytes: Bool = false)
        /// One of `choices` (by name).
        case choice([Choice], default: String)
        /// A Bluetooth adapter's name, `hciN`; or several separated by commas,
        /// or `all` (several adapters as one pool), where the command allows
        /// it (`CommonOptions.adapterPool`).
        case adapter
        /// Bird addresses separated by commas.
        case addresses
        /// A Bird value, checked as a reading is (`BirdCodec`).
        case birdValue(BirdField, default: String)
        /// Text the command checks itself (a URL, a file name).
        case text(label: String, completion: Completion = .none)
    }

    struct Choice: Sendable {
        let name: String
        let help: String
    }

    /// What a shell offers for the value.
    enum Completion: Hashable, Sendable {
        case none
        /// Bluetooth adapters on this machine (`hci0`, …).
        case adapter
        /// A file name.
        case file
        /// One of these words.
        case choices([String])
    }

    init(_ name: String, _ summary: String, _ kind: Kind = .flag, fallback: String? = nil) {
        self.name = name
        self.summary = summary
        self.kind = kind
        self.fallback = fallback
    }

    static func == (a: Option, b: Option) -> Bool { a.name == b.name }

    /// `--adapter all`: every adapter BlueZ has, and those added later.
    static let allAdapters = "all"
    func hash(into hasher: inout Hasher) { hasher.combine(name) }

    var takesValue: Bool {
        if case .flag = kind { false } else { true }
    }

    /// What the value is called in help (`S`, `auto|acquire|start`); nil for a flag.
    var value: String? {
        switch kind {
        case .flag: nil
        case .seconds: "S"
        case .integer(let label, _, _, _), .text(let label, _): label
        case .choice(let choices, _): choices.map(\.name).joined(separator: "|")
        case .adapter: "hciN[,hciN...]|all"
        case .addresses: "ADDRESS[,ADDRESS...]"
        case .birdValue(let field, _):
            switch field {
            case .name: "NAME"
            case .color: "#RRGGBB"
            case .alpha: "0-100"
            }
        }
    }

    var completion: Completion {
        switch kind {
        case .adapter: .adapter
        case .text(_, let completion): completion
        case .choice(let choices, _): .choices(choices.map(\.name))
        default: .none
        }
    }

    /// The help line: the summary, the choices, and the default, all from the declaration.
    var help: String {
        var text = summary
        if case .choice(let choices, _) = kind {
            text += ". " + choices.map { "\($0.name): \($0.help)" }.joined(separator: "; ")
        }
        if let note = defaultNote { text += " (\(note))" }
        return text
    }

    /// `default 10 s; 0 = no limit`, `default: the first powered one`, `-127 to 20`.
    var defaultNote: String? {
        switch kind {
        case .flag, .addresses, .adapter, .text: return fallback.map { "default: \($0)" }
        case .seconds(let value, let none, _):
            guard let value else { return none.map { "default: \($0)" } }
            return "default \(Option.secondsText(value)) s" + (none.map { "; 0 = \($0)" } ?? "")
        case .integer(_, let range, let value, let inBytes):
            if let value { return "default " + (inBytes ? Option.bytesText(value) : "\(value)") }
            return range.upperBound == Int.max ? nil : "\(range.lowerBound) to \(range.upperBound)"
        case .choice(_, let value), .birdValue(_, let value): return "default \(value)"
        }
    }

    /// `10`, `0.1`.
    static func secondsText(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if attoseconds == 0 { return "\(seconds)" }
        return "\(Double(seconds) + Double(attoseconds) / 1e18)"
    }

    /// `auto, acquire or start`.
    static func alternatives(_ names: [String]) -> String {
        names.dropLast().joined(separator: ", ") + (names.count > 1 ? " or " : "") + (names.last ?? "")
    }

    /// `16 MiB`, or the number of bytes.
    static func bytesText(_ bytes: Int) -> String {
        bytes > 0 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }
}

/// An option's value, converted and checked by its kind.
enum OptionValue: Equatable, Sendable {
    case seconds(Duration?)
    case integer(Int)
    case text(String)
    case addresses(Set<BluetoothAddress>)
    case birdValue(BirdValue)
}

extension Option.Kind {
    /// The value given as `text` to the option `name`, or a usage error saying what was expected.
    func value(of text: String, for name: String) throws(UsageError) -> OptionValue {
        switch self {
        case .flag:
            throw UsageError("\(name) takes no value")
        case .seconds(_, let none, let minimum):
            guard let value = Double(text), value >= 0, value.isFinite, value < 1e9 else {
                throw UsageError("\(name) expects a number of seconds, got '\(text)'")
            }
            if value == 0 && none != nil { return .seconds(nil) }
            let duration = Duration.milliseconds(Int64((value * 1000).rounded()))
            // Forgetting what was just heard would report a Bird again at every advertisement.
            if duration < minimum { throw UsageError("\(name) expects at least \(Option.secondsText(minimum)) seconds") }
            return .seconds(duration)
        case .integer(_, let range, _, _):
            guard let value = Int(text), range.contains(value) else {
                throw UsageError("\(name) expects an integer in \(range.lowerBound)…\(range.upperBound), got '\(text)'")
            }
            return .integer(value)
        case .choice(let choices, _):
            guard choices.contains(where: { $0.name == text }) else {
                throw UsageError("\(name) expects \(Option.alternatives(choices.map(\.name))), got '\(text)'")
            }
            return .text(text)
        case .adapter:
            if text == Option.allAdapters { return .text(text) }
            let names = text.split(separator: ",", omittingEmptySubsequences: false).map { String($0).trimmingSpaces }
            for adapter in names where !AdapterPool.isAdapterName(adapter) {
                throw UsageError(
                    names.count > 1
                        ? "\(name) expects names like hci0, separated by commas, or all; got '\(adapter)'"
                        : "\(name) expects a name like hci0 (several separated by commas, or all), got '\(text)'")
            }
            if Set(names).count < names.count { throw UsageError("\(name) names an adapter twice: '\(text)'") }
            return .text(names.joined(separator: ","))
        case .addresses:
            var addresses: Set<BluetoothAddress> = []
            for address in text.split(separator: ",", omittingEmptySubsequences: false).map({ String($0).trimmingSpaces }) {
                guard let given = BluetoothAddress(address) else {
                    throw UsageError("\(name) expects addresses like AA:BB:CC:DD:EE:FF, separated by commas; got '\(address)'")
                }
                addresses.insert(given)
            }
            return .addresses(addresses)
        case .birdValue(let field, _):
            switch BirdCodec.parse(field, text) {
            case .success(let value): return .birdValue(value)
            case .failure(let error): throw UsageError("\(name): \(error.reason)")
            }
        case .text:
            return .text(text)
        }
    }

    /// The value without the option; nil where there is none (a flag, text).
    var defaultValue: OptionValue? {
        switch self {
        case .flag, .adapter, .text: nil
        case .seconds(let value, _, _): .seconds(value)
        case .integer(_, _, let value, _): value.map(OptionValue.integer)
        case .choice(_, let value): .text(value)
        case .addresses: .addresses([])
        case .birdValue(let field, let text):
            // Declared, so checked by a test (every default converts by its own kind).
            if case .success(let value) = BirdCodec.parse(field, text) { .birdValue(value) } else { nil }
        }
    }
}
