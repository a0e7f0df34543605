/// One `field value` line, as `birdctl serve` reads them from stdin:
/// `alpha 55`, `color #00FF00`, `name Robin Redbreast` (the rest of the line).
public enum BirdAssignment {
    public enum Problem: Error, Hashable, Sendable, CustomStringConvertible {
        case unknownField(String)
        case missingValue(BirdField)
        case badValue(BirdValueError)

        public var description: String {
            switch self {
            case .unknownField(let word): "'\(word)' is not a field (name, color, alpha)"
            case .missingValue(let field): "no value for \(field)"
            case .badValue(let error): error.description
            }
        }
    }

    /// nil for a blank line or a `#` comment.
    public static func parse(_ line: String) -> Result<BirdValue, Problem>? {
        let trimmed = line.drop { $0 == " " || $0 == "\t" }
        guard let first = trimmed.first, first != "#", !first.isNewline else { return nil }
        let word = trimmed.prefix { $0 != " " && $0 != "\t" }
        guard let field = BirdField(rawValue: word.lowercased()) else { return .failure(.unknownField(String(word))) }
        var value = trimmed.dropFirst(word.count).drop { $0 == " " || $0 == "\t" }
        while let last = value.last, last.isNewline { value = value.dropLast() }
        guard !value.isEmpty else { return .failure(.missingValue(field)) }
        return BirdCodec.parse(field, String(value)).mapError(Problem.badValue)
    }
}
