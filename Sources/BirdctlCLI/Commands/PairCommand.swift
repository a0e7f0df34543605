import Bird

/// `birdctl pair ADDRESS` and `birdctl unpair ADDRESS`: bond with a Bird ahead
/// of time (read, watch and set also pair by themselves when a bird asks for
/// it), or have BlueZ forget one and its bond.
enum PairCommand {
    static let command = Command(
        name: "pair", summary: "pair and bond with a Bird (Just Works unless --confirm-pairing)", operands: "ADDRESS",
        details: """
            Finds the Bird at ADDRESS, connects, pairs and bonds through birdctl's own
            agent (NoInputNoOutput: Just Works; --confirm-pairing asks on the terminal
            to confirm the passkey), and disconnects. A bird already paired is success.
            The bond is BlueZ's: later connections are encrypted without pairing again.
            Exits 10 if pairing is refused, fails or takes longer than --pair-timeout.
            """,
        options: [.timeout, .connectTimeout, .pairTimeout, .confirmPairing, .adapter, .powerOn, .verbose, .help],
        run: { arguments throws(UsageError) in try run(arguments, mode: .pair) })

    static let unpairCommand = Command(
        name: "unpair", summary: "have BlueZ forget a Bird and its bond", operands: "ADDRESS",
        details: """
            Removes the device at ADDRESS from BlueZ, bond included (as
            bluetoothctl's remove does). Exits 6 if BlueZ does not know it.
            """,
        options: [.adapter, .powerOn, .verbose, .help],
        run: { arguments throws(UsageError) in try run(arguments, mode: .unpair) })

    static func run(_ arguments: Arguments, mode: BirdCentral.Configuration.Mode) throws(UsageError) -> ExitStatus {
        let common = try CommonOptions(arguments)
        let (address, fields) = try arguments.addressAndFields()
        guard let address, fields.isEmpty else { throw UsageError("expected the bird's ADDRESS (AA:BB:CC:DD:EE:FF)") }
        // Pairing is the point of `pair`: say when it is done.
        return try common.runQuietly(common.configuration(mode, fields: [], address: address)) { report in
            if case .paired = report { true } else { false }
        }
    }
}
