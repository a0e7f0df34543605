import Bird

/// A usage mistake: reported with the command's usage, exit code 2.
struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// The command line split into options and positionals, checked against the
/// options the command declares. Small on purpose: swift-argument-parser
/// would cost 3 ms of start-up and 3.7 MiB of RSS (README, "Start-up").
struct Arguments {
    private var values: [String: String] = [:]
    private var flags: Set<String> = []
    private(set) var positionals: [String] = []

    init(_ arguments: [String], accepting options: [Option]) throws(UsageError) {
        let accepted = Dictionary(options.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
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
            guard let option = accepted[name] else { throw UsageError("unknown option \(name)") }
            if !option.takesValue {
                guard inlineValue == nil else { throw UsageError("\(name) takes no value") }
                flags.insert(name)
            } else {
                if let inlineValue {
                    values[name] = inlineValue
                } else {
                    guard index < arguments.count else { throw UsageError("\(name) needs a value") }
                    values[name] = arguments[index]
                    index += 1
                }
            }
        }
    }

    private static func isNegativeNumber(_ s: String) -> Bool {
        s.count > 1 && s.hasPrefix("-") && s.dropFirst().allSatisfy(\.isNumber)
    }

    func has(_ flag: Option) -> Bool { flags.contains(flag.name) }

    func value(_ option: Option) -> String? { values[option.name] }

    /// Seconds as a Duration; 0 means "no limit" where `zeroMeansNone`.
    func seconds(_ option: Option, default fallback: Duration?, zeroMeansNone: Bool = true) throws(UsageError) -> Duration? {
        guard let text = value(option) else { return fallback }
        guard let value = Double(text), value >= 0, value.isFinite, value < 1e9 else {
            throw UsageError("\(option.name) expects a number of seconds, got '\(text)'")
        }
        if value == 0 && zeroMeansNone { return nil }
        return .milliseconds(Int64((value * 1000).rounded()))
    }

    /// `--notify-method auto|acquire|start`, default auto.
    func notifyMethod() throws(UsageError) -> NotifyMethod {
        guard let text = value(.notifyMethod) else { return .auto }
        guard let method = NotifyMethod(rawValue: text) else {
            throw UsageError("--notify-method expects auto, acquire or start, got '\(text)'")
        }
        return method
    }

    /// `--connect-timeout S`, default 10 s (0 is not "no limit" here: a deadline is the point).
    func connectTimeout() throws(UsageError) -> Duration {
        try seconds(.connectTimeout, default: .seconds(10), zeroMeansNone: false) ?? .seconds(10)
    }

    /// `--pair-timeout S`, default 30 s.
    func pairTimeout() throws(UsageError) -> Duration {
        try seconds(.pairTimeout, default: .seconds(30), zeroMeansNone: false) ?? .seconds(30)
    }

    /// A comma-separated list of addresses (upper case).
    func addresses(_ option: Option) throws(UsageError) -> Set<String> {
        guard let list = value(option) else { return [] }
        var addresses: Set<String> = []
        for address in list.split(separator: ",", omittingEmptySubsequences: false).map({ String($0).trimmingSpaces }) {
            guard Arguments.isAddress(address) else {
                throw UsageError("\(option.name) expects addresses like AA:BB:CC:DD:EE:FF, separated by commas; got '\(address)'")
            }
            addresses.insert(address.uppercased())
        }
        return addresses
    }

    func integer(_ option: Option, range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let text = value(option) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw UsageError("\(option.name) expects an integer in \(range.lowerBound)…\(range.upperBound), got '\(text)'")
        }
        return value
    }

    /// An optional ADDRESS, then fields, from the positionals.
    func addressAndFields() throws(UsageError) -> (address: String?, fields: [BirdField]) {
        var address: String?
        var fields: [BirdField] = []
        for (position, argument) in positionals.enumerated() {
            if position == 0, Arguments.isAddress(argument) {
                address = argument.uppercased()
            } else if let field = BirdField(rawValue: argument.lowercased()) {
                if !fields.contains(field) { fields.append(field) }
            } else if Arguments.isAddress(argument) {
                throw UsageError("the address must come before the fields")
            } else {
                throw UsageError("'\(argument)' is neither an address (AA:BB:CC:DD:EE:FF) nor a field (name, color, alpha)")
            }
        }
        return (address, fields)
    }

    static func isAddress(_ s: String) -> Bool {
        let parts = s.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 6 && parts.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }
    }
}
