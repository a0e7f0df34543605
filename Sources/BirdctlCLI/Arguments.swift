import Formats
import Bird

/// A usage mistake: reported with the command's usage, exit code 2.
struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// The command line split into options and positionals, checked against the
/// options the command declares: each value is converted by its option's
/// kind as it is parsed (a bad one is a usage error, unless `--help` is
/// asked for), and an option not given reads as its declared default. Small
/// on purpose: swift-argument-parser would add to every command's start-up
/// time and RSS (see docs/performance.md, 'Start-up').
struct Arguments {
    /// The command's declarations by name: a value is read with the default
    /// the command declared, whichever option of that name asks.
    private let declared: [String: Option]
    private var texts: [String: String] = [:]
    private var values: [String: OptionValue] = [:]
    private var flags: Set<String> = []
    private(set) var positionals: [String] = []

    init(_ arguments: [String], accepting options: [Option]) throws(UsageError) {
        declared = Dictionary(options.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var badValue: UsageError?
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || !argument.hasPrefix("-") || argument == "-" || Arguments.isNegativeNumber(argument) {
                positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            var name = argument
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            if name == "-h" { name = Option.help.name }
            guard let option = declared[name] else { throw UsageError("unknown option \(name)") }
            if !option.takesValue {
                guard inlineValue == nil else { throw UsageError("\(name) takes no value") }
                flags.insert(name)
                continue
            }
            let text: String
            if let inlineValue {
                text = inlineValue
            } else {
                guard index < arguments.count else { throw UsageError("\(name) needs a value") }
                text = arguments[index]
                index += 1
            }
            texts[name] = text
            do throws(UsageError) {
                values[name] = try option.kind.value(of: text, for: name)
            } catch {
                badValue = badValue ?? error
            }
        }
        if let badValue, !flags.contains(Option.help.name) { throw badValue }
    }

    private static func isNegativeNumber(_ s: String) -> Bool {
        s.count > 1 && s.hasPrefix("-") && s.dropFirst().allSatisfy(\.isNumber)
    }

    func has(_ flag: Option) -> Bool { flags.contains(flag.name) }

    /// The value as given, if it was.
    func value(_ option: Option) -> String? { texts[option.name] }

    /// The value given, else the default the command declared (else `option`'s own).
    private func converted(_ option: Option) -> OptionValue? {
        values[option.name] ?? (declared[option.name] ?? option).kind.defaultValue
    }

    /// Seconds; nil is "no limit" (`none` in the declaration).
    func seconds(_ option: Option) -> Duration? {
        guard case .seconds(let value)? = converted(option) else { preconditionFailure("\(option.name) is not in seconds") }
        return value
    }

    /// Seconds of an option whose default is a duration and whose 0 is not "no limit": a deadline.
    func deadline(_ option: Option) -> Duration {
        guard let value = seconds(option) else { preconditionFailure("\(option.name) has no limit") }
        return value
    }

    func integer(_ option: Option) -> Int? {
        switch converted(option) {
        case .integer(let value)?: value
        case nil: nil
        default: preconditionFailure("\(option.name) is not an integer")
        }
    }

    /// A choice as the type whose cases are the choices (`NotifyMethod`).
    func choice<Choice: RawRepresentable<String>>(_ option: Option, as type: Choice.Type = Choice.self) -> Choice {
        guard case .text(let name)? = converted(option), let choice = Choice(rawValue: name) else {
            preconditionFailure("\(option.name) is not a choice of \(Choice.self)")
        }
        return choice
    }

    func addresses(_ option: Option) -> Set<BluetoothAddress> {
        guard case .addresses(let addresses)? = converted(option) else { preconditionFailure("\(option.name) is not addresses") }
        return addresses
    }

    func birdValue(_ option: Option) -> BirdValue {
        guard case .birdValue(let value)? = converted(option) else { preconditionFailure("\(option.name) is not a Bird value") }
        return value
    }

    /// An optional ADDRESS, then fields, from the positionals.
    func addressAndFields() throws(UsageError) -> (address: BluetoothAddress?, fields: [BirdField]) {
        var address: BluetoothAddress?
        var fields: [BirdField] = []
        for (position, argument) in positionals.enumerated() {
            if position == 0, let given = BluetoothAddress(argument) {
                address = given
            } else if let field = BirdField(rawValue: argument.lowercased()) {
                if !fields.contains(field) { fields.append(field) }
            } else if BluetoothAddress(argument) != nil {
                throw UsageError("the address must come before the fields")
            } else {
                let fields = BirdField.allCases.map(\.rawValue).joined(separator: ", ")
                throw UsageError("'\(argument)' is neither an address (AA:BB:CC:DD:EE:FF) nor a field (\(fields))")
            }
        }
        return (address, fields)
    }

    /// What `addressAndFields` reads. Spelled out, not joined from
    /// `BirdField.allCases` (ArgumentsTests checks it is the same): every
    /// command is declared at start, and the joining would instantiate the
    /// array's metadata then, for every command (see docs/performance.md,
    /// 'Start-up').
    static let addressAndFieldsOperands = "[ADDRESS] [name|color|alpha ...]"
}
