import Formats
import Bird

/// `birdctl read`: find (or use ADDRESS), connect, read, print, disconnect.
enum ReadCommand {
    static let command = Command(
        name: "read", summary: "read a Bird's name, color and alpha once",
        operands: Arguments.addressAndFieldsOperands,
        details: """
            Finds a Bird (the one heard strongest on average in the second after the
            first is heard, or the one at ADDRESS), connects, reads the fields (all
            three by default), prints them and disconnects. With one field the
            value is printed bare, for scripts: color=$(birdctl read color). Exits 0
            only if every field decoded; 8 if one did not.
            """,
        options: [
            .timeout, .connectTimeout, .minimumRSSI, .noPair, .pairWith, .confirmPairing, .pairTimeout, .adapter, .powerOn, .json, .verbose,
            .help,
        ],
        run: run)

    static func run(_ arguments: Arguments) throws(UsageError) -> ExitStatus {
        let common = try CommonOptions(arguments)
        let (address, requested) = try arguments.addressAndFields()
        let fields = requested.isEmpty ? BirdField.allCases : requested
        let configuration = common.configuration(.read, fields: fields, address: address)
        let bare = requested.count == 1 && !common.json

        return try Session.run(json: common.json, verbose: common.verbose) { session throws(UsageError) in
            let results = ReadResults()
            let formatter = session.formatter
            return try common.centralDriver(
                session, BirdFleet(configuration),
                onReport: { report in
                    switch report {
                    case .reading(let peripheral, let value, let raw, _):
                        results.values[value.field] = (value, raw)
                        results.peripheral = peripheral
                    case .badValue(let peripheral, let error):
                        results.errors[error.field] = error
                        results.peripheral = peripheral
                        Diagnostics.error(formatter.badValueText(peripheral, error))
                    default:
                        if common.verbose, let text = formatter.eventText(report) { Diagnostics.say(text) }
                    }
                },
                onFinish: { outcome in
                    if outcome == .success || outcome == .badValue {
                        for line in lines(results, fields: fields, bare: bare, formatter) { session.stdout.line(line) }
                    }
                    session.finish(exitStatus(for: outcome))
                })
        }
    }

    /// What was read, collected so it prints in field order once complete. Loop-confined.
    final class ReadResults: @unchecked Sendable {
        var peripheral: BirdCentral.Peripheral?
        var values: [BirdField: (BirdValue, [UInt8])] = [:]
        var errors: [BirdField: BirdValueError] = [:]
    }

    static func lines(_ results: ReadResults, fields: [BirdField], bare: Bool, _ formatter: ReportFormatter) -> [String] {
        if formatter.json {
            var object = JSONObject()
            object.add("address", ifPresent: results.peripheral?.address.description)
            var raw = JSONObject()
            var errors = JSONObject()
            for field in fields {
                if let (value, bytes) = results.values[field] {
                    object.add(field.rawValue, ReportFormatter.jsonValue(value))
                    raw.add(field.rawValue, hexString(bytes))
                } else if let error = results.errors[field] {
                    raw.add(field.rawValue, error.rawHex)
                    errors.add(field.rawValue, error.reason)
                }
            }
            object.add("raw", .object(raw))
            if !results.errors.isEmpty { object.add("errors", .object(errors)) }
            return [object.rendered]
        }
        if bare { return fields.compactMap { results.values[$0].map { formatter.text($0.0) } } }
        return fields.compactMap { field in
            results.values[field].map { "\(formatter.bold(formatter.pad(field.rawValue, 5)))  \(formatter.styled($0.0))" }
        }
    }
}
