import Bird

/// `birdctl set`: write one value to a Bird (with response).
enum SetCommand {
    static let command = Command(
        name: "set", summary: "write a value to a Bird", operands: "[ADDRESS] FIELD VALUE",
        details: """
            Checks VALUE locally with the same rules as a reading (so a bad value
            is refused before any radio work, exit 2), then finds the Bird (or the
            one at ADDRESS), connects, writes with response, and disconnects.
            Prints nothing on success. Exit codes as for read.
            """,
        options: [
            .timeout, .connectTimeout, .minimumRSSI, .noPair, .pairWith, .confirmPairing, .pairTimeout, .adapter, .powerOn, .verbose, .help,
        ],
        run: run)

    static func run(_ arguments: Arguments) throws(UsageError) -> ExitStatus {
        let common = try CommonOptions(arguments)
        var words = arguments.positionals
        var address: BluetoothAddress?
        if let first = words.first, let given = BluetoothAddress(first) {
            address = given
            words.removeFirst()
        }
        guard words.count >= 2, let field = BirdField(rawValue: words[0].lowercased()) else {
            throw UsageError("expected FIELD VALUE, e.g. 'alpha 55' or 'color #00FF00'")
        }
        let text = words.dropFirst().joined(separator: " ")
        let value: BirdValue
        switch BirdCodec.parse(field, text) {
        case .success(let parsed): value = parsed
        case .failure(let error): throw UsageError(error.description)
        }
        return try common.runQuietly(common.configuration(.write(value), fields: [field], address: address))
    }
}
