import BlueZ

/// A held link that dies quietly: the bird's notifications stop while BlueZ
/// still calls it connected (a bird that hung, a supervision timeout the
/// controller never reported). `QuietWatch` notices the silence; a probe
/// read, with a deadline of its own (`QuietWatch.probeDeadline`), asks the bird. An
/// answer (a value, or an ATT error) keeps the link; a failure or no answer
/// ends it, and a watch finds the bird again.
extension BirdLink {
    /// The link streams: the watchdog starts (a held watch's, if asked for).
    mutating func startWatching() -> [Action] {
        guard quiet == nil, let multiple = configuration.quietAfter, multiple > 0 else { return [] }
        let watch = QuietWatch(multiple: multiple)
        quiet = watch
        return [.armTimer(.quiet, watch.window)]
    }

    /// The watchdog's window ended: look again later, or probe.
    mutating func quietWindowEnded() -> Step {
        guard var watch = quiet, watch.probing == nil else { return .next([]) }
        let verdict = watch.windowEnded()
        quiet = watch
        switch (verdict, state) {
        case (.calm(let next), _):
            return .next([.armTimer(.quiet, next)])
        case (.quiet, .reading):
            // A read is out already (a notification that filled the MTU): its answer says as much.
            return .next([.armTimer(.quiet, watch.window)])
        case (.quiet(let silentFor), .streaming(let link)):
            // Any field will do: a read of one the bird serves.
            guard let field = configuration.fields.first(where: { link.characteristics[$0] != nil }),
                let path = link.characteristics[field]
            else { return .next([]) }
            quiet?.probing = field
            return .next([
                .report(.quiet(link.peripheral, .probing(silentFor: silentFor, usualGap: watch.usualGap))),
                .armTimer(.probe, QuietWatch.probeDeadline), .read(field, path),
            ])
        default:
            return .next([])
        }
    }

    /// The probe read answered (a value or an error).
    mutating func probeCompleted(_ field: BirdField, _ result: Result<[UInt8], BlueZError>) -> Step {
        guard case .streaming(let link) = state else { return .next([]) }
        switch result {
        case .success(let raw):
            return .next(probeAnswered(link.peripheral) + report(field, raw, from: link, notified: false))
        case .failure(let error) where Self.cameFromTheBird(error):
            return .next(probeAnswered(link.peripheral))
        case .failure(let error):
            return probeFailed(link, error)
        }
    }

    /// A read refused with an ATT error is an answer too: the bird is there
    /// (bluetoothd names the ATT errors it knows, the rest are "ATT error: 0x…").
    static func cameFromTheBird(_ error: BlueZError) -> Bool {
        switch error.kind {
        case .notPermitted, .notAuthorized, .notSupported, .invalidOffset, .invalidValueLength: true
        case .failed: error.isUnnamedATTError
        default: false
        }
    }

    /// No answer within the probe's deadline.
    mutating func probeDeadlinePassed() -> Step {
        guard case .streaming(let link) = state, quiet?.probing != nil else { return .next([]) }
        return probeFailed(link, BlueZError(.timeout, message: "no answer within \(QuietWatch.probeDeadline)"))
    }

    /// The bird answered (the read, or a notification meanwhile): the link is kept.
    mutating func probeAnswered(_ peripheral: Peripheral) -> [Action] {
        guard let next = quiet?.probeAnswered() else { return [] }
        return [.cancelTimer(.probe), .report(.quiet(peripheral, .answered)), .armTimer(.quiet, next)]
    }

    /// The link is dead in all but name: undone, and the bird found again.
    private mutating func probeFailed(_ link: Link, _ error: BlueZError) -> Step {
        quiet?.probing = nil
        let actions = BirdCentral.stopTimers() + [.report(.quiet(link.peripheral, .unanswered(error)))]
            + cleanUp(link, subscribed: true) + [.report(.disconnected(link.peripheral))]
        guard configuration.reconnects else { return .finished(.failed(.connectionLost), actions) }
        return .findAgain(actions)
    }
}
