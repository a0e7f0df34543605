import BlueZ
import DBus

/// The second half of a `BirdCentral`: working on a link — resolving its
/// services, pairing when the bird asks, writing, subscribing, reading,
/// streaming — until the command's work is done or the link is lost. A
/// value, no I/O: each event returns a `BirdCentral.Step`. A new link gets a
/// new `BirdLink`, so nothing of the last one (a pairing tried, fields that
/// could not be subscribed, notifications held) carries over.
struct BirdLink: Sendable {
    typealias Action = BirdCentral.Action
    typealias Peripheral = BirdCentral.Peripheral
    typealias Step = BirdCentral.Step

    enum State: Hashable, Sendable {
        /// Connected; waiting for ServicesResolved.
        case resolving(Peripheral)
        /// A watch reads once subscribed; a read only reads.
        case reading(Link, pending: Set<BirdField>)
        case writing(Link)
        case subscribing(Link, pending: Set<BirdField>)
        case streaming(Link)
        /// The peripheral asked for security (or `birdctl pair`): pairing, then `then`.
        case pairing(Peripheral, then: AfterPairing)
    }

    /// What a pairing was for: the step it interrupted, or (`birdctl pair`) nothing more.
    enum AfterPairing: Hashable, Sendable {
        case subscribe(Link)
        case read(Link)
        case write(Link)
        case done
    }

    /// A connected peripheral and its Bird characteristics.
    struct Link: Hashable, Sendable {
        var peripheral: Peripheral
        var characteristics: [BirdField: ObjectPath]

        func field(of path: ObjectPath) -> BirdField? {
            characteristics.first { $0.value == path }?.key
        }
    }

    let configuration: BirdCentral.Configuration
    private(set) var state: State
    /// A watch that holds the link and streams (not one that polls).
    private var streams: Bool { configuration.isWatch && !configuration.polls }
    /// BlueZ holds a bond with the bird: one the user paired with before,
    /// which may pair again.
    private var bonded: Bool
    /// Fields whose StartNotify failed.
    private var unsubscribed: Set<BirdField> = []
    /// A pairing was tried on this link (a second refusal ends it).
    private var pairedOnThisLink = false
    /// ServicesResolved went false: the link is going.
    private var dropping = false
    /// A write asked for while streaming, in flight (one at a time).
    private var streamWrite: BirdValue?
    /// A read: some field did not decode.
    private(set) var anyBadValue = false
    /// A held link's watchdog, once it streams (see `QuietWatch`).
    var quiet: QuietWatch?
    /// The unordered notifications of each field whose read is pending (see
    /// `valueChanged`), in order, reported after the read; at most
    /// `heldLimit` per field (past it the oldest go).
    private var heldNotifications: [BirdField: [HeldNotification]] = [:]
    static let heldLimit = 16_384
    private struct HeldNotification: Hashable, Sendable {
        var raw: [UInt8]
        var mtu: Int?

        /// Whether it may be the notification of `value` (cut at the MTU, its beginning).
        func isCopy(of value: [UInt8]) -> Bool {
            raw == value || (BirdLink.mayBeCut(raw, mtu: mtu) && value.starts(with: raw))
        }
    }

    /// Whether a notification of `raw` over a link of ATT MTU `mtu` may have
    /// been cut: it carries at most MTU − 3 bytes, and one that fills them
    /// may be the beginning of a longer value. Without an MTU nothing can be told.
    static func mayBeCut(_ raw: [UInt8], mtu: Int?) -> Bool {
        guard let mtu, mtu > 3 else { return false }
        return raw.count >= mtu - 3
    }

    /// Connect succeeded: the link, waiting for its services (`birdctl pair`: pairing at once).
    static func start(_ configuration: BirdCentral.Configuration, _ peripheral: Peripheral, bonded: Bool) -> (BirdLink, [Action]) {
        var link = BirdLink(configuration: configuration, state: .resolving(peripheral), bonded: bonded)
        guard configuration.mode == .pair else { return (link, [.report(.connected(peripheral))]) }
        let pairing = link.beginPairing(peripheral, then: .done)
        return (link, [.cancelTimer(.connect), .report(.connected(peripheral))] + pairing)
    }

    private init(configuration: BirdCentral.Configuration, state: State, bonded: Bool) {
        self.configuration = configuration
        self.state = state
        self.bonded = bonded
    }

    var peripheral: Peripheral {
        switch state {
        case .resolving(let p), .pairing(let p, _): p
        case .reading(let link, _), .writing(let link), .subscribing(let link, _), .streaming(let link): link.peripheral
        }
    }

    // MARK: Services

    /// How long after ServicesResolved the Bird characteristics may still be appearing.
    static let servicesGrace: Duration = .seconds(2)

    mutating func servicesResolved(device: ObjectPath, characteristics: [BirdField: ObjectPath]) -> Step {
        if peripheral.path == device { dropping = false }
        guard case .resolving(let peripheral) = state, peripheral.path == device else { return .next([]) }
        let missing = configuration.fields.filter { characteristics[$0] == nil }
        guard missing.isEmpty else {
            // BlueZ may announce ServicesResolved before the GATT objects: give
            // them a moment (the driver calls again as they appear).
            return .next([.cancelTimer(.connect), .armTimer(.services, Self.servicesGrace)])
        }
        // Only the fields asked for: another client's read of one we do not
        // watch shows as a change, and its removal is not ours to react to.
        let watched = characteristics.filter { configuration.fields.contains($0.key) }
        let link = Link(peripheral: peripheral, characteristics: watched)
        let actions: [Action] = [.cancelTimer(.connect), .cancelTimer(.services)]
        if case .write(let value) = configuration.mode {
            state = .writing(link)
            return .next(actions + [.write(value.field, characteristics[value.field]!, BirdCodec.encode(value))])
        }
        if streams { return .next(actions + beginSubscribing(link)) }
        return .next(actions + beginReading(link))
    }

    private mutating func beginSubscribing(_ link: Link) -> [Action] {
        state = .subscribing(link, pending: Set(configuration.fields))
        unsubscribed = []
        return configuration.fields.map { .startNotify($0, link.characteristics[$0]!) }
    }

    private mutating func beginReading(_ link: Link) -> [Action] {
        state = .reading(link, pending: Set(configuration.fields))
        heldNotifications = [:]
        return configuration.fields.map { .read($0, link.characteristics[$0]!) }
    }

    /// A characteristic left BlueZ's tree while the link stayed up (the
    /// peripheral's GATT database changed). If it is one of ours, a watch
    /// reports it and finds the bird again to resolve the services anew; a
    /// read or write fails.
    mutating func characteristicRemoved(_ path: ObjectPath) -> Step {
        guard !dropping else { return .next([]) }
        let link: Link
        let subscribed: Bool
        switch state {
        case .reading(let l, _): (link, subscribed) = (l, streams)
        case .writing(let l): (link, subscribed) = (l, false)
        case .subscribing(let l, _), .streaming(let l): (link, subscribed) = (l, true)
        default: return .next([])
        }
        guard let field = link.field(of: path) else { return .next([]) }
        let error = BlueZError(.doesNotExist, message: "the \(field) characteristic went away")
        let actions = BirdCentral.stopTimers() + cleanUp(link, subscribed: subscribed)
        guard configuration.reconnects else { return .finished(.failed(.failed("use \(field)", error)), actions) }
        return .findAgain(
            actions + [.report(.operationFailed(link.peripheral, "watch \(field)", error)), .report(.disconnected(link.peripheral))])
    }

    /// See `BirdCentral.servicesUnresolved`.
    mutating func servicesUnresolved(_ device: ObjectPath) -> Step {
        if peripheral.path == device, workingLink != nil { dropping = true }
        return .next([])
    }

    // MARK: Writing

    /// A watch that streams writes `value` on its link; the answer is a
    /// `written` report. Refused at once (a `written` report with the reason)
    /// while not streaming, with a write in flight, or for a field not watched.
    mutating func writeRequested(_ value: BirdValue) -> Step {
        let streamingLink: Link? =
            switch state {
            case .streaming(let link): link
            case .reading(let link, _) where streams: link  // subscribed, reading the values once
            default: nil
            }
        guard let link = streamingLink, !dropping else {
            return .next([.report(.written(peripheral, value, failure: BlueZError(.notReady, message: "the link is not ready")))])
        }
        guard streamWrite == nil else {
            return .next([.report(.written(peripheral, value, failure: BlueZError(.inProgress, message: "another write is in flight")))])
        }
        guard let path = link.characteristics[value.field] else {
            let error = BlueZError(.notSupported, message: "\(value.field) is not watched")
            return .next([.report(.written(peripheral, value, failure: error))])
        }
        streamWrite = value
        return .next([.write(value.field, path, BirdCodec.encode(value))])
    }

    /// The write (with response) of `set`, or one asked for while streaming, completed.
    mutating func writeCompleted(_ result: Result<Void, BlueZError>) -> Step {
        if let value = streamWrite {
            streamWrite = nil
            let failure: BlueZError? = if case .failure(let error) = result { error } else { nil }
            return .next([.report(.written(peripheral, value, failure: failure))])
        }
        guard case .writing(let link) = state, case .write(let value) = configuration.mode else { return .next([]) }
        switch result {
        case .failure(let error) where error.needsPairing:
            return securityRequired(link, then: .write(link), error)
        case .success:
            return .finished(.success, [.disconnect(link.peripheral.path)])
        case .failure(let error):
            return .finished(.failed(.failed("write \(value.field)", error)), [.disconnect(link.peripheral.path)])
        }
    }

    // MARK: Pairing

    /// A bird the user chose to bond with: one named on the command line or
    /// in `pairsWith`, or one BlueZ already holds a bond with. Anything else
    /// that asks for pairing may be a stranger (`watch --all` hears every
    /// device advertising the Bird Service) and is not bonded with.
    private func mayPair(_ peripheral: Peripheral) -> Bool {
        bonded || configuration.pairsWith.contains(peripheral.address)
    }

    /// A read, subscription or write was refused for want of security: pair
    /// and try again, once per link — unless pairing is off, or was just done,
    /// or the bird is not one the user named.
    private mutating func securityRequired(_ link: Link, then next: AfterPairing, _ error: BlueZError) -> Step {
        guard configuration.pairs, !pairedOnThisLink, mayPair(link.peripheral) else {
            let failure: CommandFailure =
                if pairedOnThisLink { .pairingFailed(error) }
                else if configuration.pairs { .pairingNotNamed(link.peripheral, error) }
                else { .pairingRequired(error) }
            return .finished(.failed(failure), BirdCentral.stopTimers() + cleanUp(link, subscribed: streams))
        }
        return .next(beginPairing(link.peripheral, then: next))
    }

    /// Pairing has a deadline of its own (Pair's reply may never come:
    /// bluetoothd 5.66), a little past the one Pair is sent with.
    private mutating func beginPairing(_ peripheral: Peripheral, then next: AfterPairing) -> [Action] {
        state = .pairing(peripheral, then: next)
        pairedOnThisLink = true
        return [
            .report(.pairing(peripheral)), .armTimer(.pairing, configuration.pairTimeout + BirdCentral.pairingGrace),
            .pair(peripheral.path),
        ]
    }

    /// The peripheral being paired with at `device`, if this link is pairing it.
    func pairing(_ device: ObjectPath) -> Peripheral? {
        if case .pairing(let peripheral, _) = state, peripheral.path == device { peripheral } else { nil }
    }

    /// Device1.Pair answered (or `Paired` turned true). Already paired counts as paired.
    mutating func pairCompleted(_ result: Result<Void, BlueZError>) -> Step {
        guard case .pairing(let peripheral, let next) = state else { return .next([]) }
        if case .failure(let error) = result, !error.isAlreadyPaired {
            // A pairing that timed out is still running in bluetoothd: cancel it.
            let cancel: [Action] = error.kind == .timeout ? [.cancelPairing(peripheral.path)] : []
            return .finished(.failed(.pairingFailed(error)), BirdCentral.stopTimers() + cancel + [.disconnect(peripheral.path)])
        }
        bonded = true
        let paired: [Action] = [.cancelTimer(.pairing), .report(.paired(peripheral))]
        switch next {
        case .subscribe(let link):
            return .next(paired + beginSubscribing(link))
        case .read(let link):
            return .next(paired + beginReading(link))
        case .write(let link):
            guard case .write(let value) = configuration.mode else { return .next([]) }
            state = .writing(link)
            return .next(paired + [.write(value.field, link.characteristics[value.field]!, BirdCodec.encode(value))])
        case .done:
            return .finished(.success, paired + [.disconnect(peripheral.path)])
        }
    }

    // MARK: Reading and streaming

    mutating func readCompleted(_ field: BirdField, _ result: Result<[UInt8], BlueZError>) -> Step {
        if let probing = quiet?.probing, probing == field { return probeCompleted(field, result) }
        guard case .reading(let link, _) = state else { return .next([]) }
        let settled = settleRead(field, result)
        guard case .next(var actions) = settled,
            var held = heldNotifications.removeValue(forKey: field), let path = link.characteristics[field]
        else { return settled }
        // The held ones sent before the read was served end with the value it
        // returned; those after are newer. Bytes cannot tell which copy of a
        // repeated value was that one: the last copy is taken, so nothing
        // older than the value read follows it (a newer value between two
        // copies is lost instead). A notification that may be cut at the MTU
        // is a copy when the value read begins with it. With no copy, the
        // read was served before them all.
        if case .success(let raw) = result, let same = held.lastIndex(where: { $0.isCopy(of: raw) }) {
            held.removeFirst(same + 1)
        }
        for (index, notification) in held.enumerated() {
            if case .reading(_, let pending) = state, pending.contains(field) {
                // One filled the MTU and is read again: those after it came
                // before that read, and are reported now (those that may be
                // cut too are superseded by it).
                for later in held[index...] where !Self.mayBeCut(later.raw, mtu: later.mtu) {
                    actions += report(field, later.raw, from: link, notified: true)
                }
                break
            }
            guard case .next(let more) = valueChanged(path, notification.raw, mtu: notification.mtu, ordered: false) else { break }
            actions += more
        }
        return .next(actions)
    }

    private mutating func settleRead(_ field: BirdField, _ result: Result<[UInt8], BlueZError>) -> Step {
        guard case .reading(let link, var pending) = state, pending.remove(field) != nil else { return .next([]) }
        var actions: [Action]
        switch result {
        case .success(let raw):
            actions = report(field, raw, from: link, notified: false)
        case .failure(let error) where error.needsPairing:
            return securityRequired(link, then: .read(link), error)
        case .failure(let error):
            if !configuration.isWatch {
                return .finished(.failed(.failed("read \(field)", error)), [.disconnect(link.peripheral.path)])
            }
            actions = [.report(.operationFailed(link.peripheral, "read \(field)", error))]
        }
        guard pending.isEmpty else {
            state = .reading(link, pending: pending)
            return .next(actions)
        }
        guard configuration.isWatch else {
            return .finished(anyBadValue ? .badValue : .success, actions + [.disconnect(link.peripheral.path)])
        }
        if configuration.polls { return .rest(link.peripheral, actions + [.disconnect(link.peripheral.path)]) }
        state = .streaming(link)
        return .next(actions + startWatching())
    }

    mutating func notifyStarted(_ field: BirdField, _ result: Result<Void, BlueZError>) -> Step {
        guard case .subscribing(let link, var pending) = state, pending.remove(field) != nil else { return .next([]) }
        var actions: [Action] = []
        if case .failure(let error) = result, error.needsPairing {
            return securityRequired(link, then: .subscribe(link), error)
        }
        if case .failure(let error) = result {
            // One field that cannot be subscribed is reported; the others stream.
            // With none left there is nothing to watch.
            unsubscribed.insert(field)
            guard unsubscribed.count < configuration.fields.count else {
                return .finished(.failed(.failed("subscribe to \(field)", error)), cleanUp(link, subscribed: true))
            }
            actions.append(.report(.operationFailed(link.peripheral, "subscribe to \(field)", error)))
        }
        guard pending.isEmpty else {
            state = .subscribing(link, pending: pending)
            return .next(actions)
        }
        return .next(actions + beginReading(link))
    }

    /// See `BirdCentral.valueChanged`.
    mutating func valueChanged(_ characteristic: ObjectPath, _ raw: [UInt8], mtu: Int?, ordered: Bool) -> Step {
        let link: Link
        let unread: Set<BirdField>
        switch state {
        case .streaming(let l): (link, unread) = (l, [])
        case .reading(let l, let pending) where streams: (link, unread) = (l, pending)
        default: return .next([])
        }
        guard let field = link.field(of: characteristic) else { return .next([]) }
        quiet?.notified()
        // A probe out: anything the bird says answers it.
        let answered = quiet?.probing != nil ? probeAnswered(link.peripheral) : []
        if unread.contains(field) {
            if !ordered {
                heldNotifications[field, default: []].append(HeldNotification(raw: raw, mtu: mtu))
                if heldNotifications[field]!.count > Self.heldLimit { heldNotifications[field]!.removeFirst() }
            }
            return .next(answered)
        }
        if Self.mayBeCut(raw, mtu: mtu) {
            state = .reading(link, pending: unread.union([field]))
            return .next(answered + [.read(field, characteristic)])
        }
        if answered.isEmpty { return .next(report(field, raw, from: link, notified: true)) }
        return .next(answered + report(field, raw, from: link, notified: true))
    }

    /// A notification while streaming that changes nothing of the link (a
    /// value that decodes and cannot have been cut at the MTU, no probe
    /// out): its report, or nil when `valueChanged` must handle it. The
    /// caller counts it for the watchdog (`notified(_:)` before the next event).
    func plainNotification(_ characteristic: ObjectPath, _ raw: [UInt8], mtu: Int?) -> [Action]? {
        guard case .streaming(let link) = state, quiet?.probing == nil, let field = link.field(of: characteristic) else {
            return nil
        }
        if Self.mayBeCut(raw, mtu: mtu) { return nil }
        guard case .success(let value) = BirdCodec.decode(field, raw) else { return nil }
        return [.report(.reading(link.peripheral, value, raw: raw, notified: true))]
    }

    /// Notifications taken by `plainNotification`, for the watchdog.
    mutating func notified(_ count: Int) { quiet?.notified(count) }

    mutating func report(_ field: BirdField, _ raw: [UInt8], from link: Link, notified: Bool) -> [Action] {
        switch BirdCodec.decode(field, raw) {
        case .success(let value):
            return [.report(.reading(link.peripheral, value, raw: raw, notified: notified))]
        case .failure(let error):
            anyBadValue = true
            return [.report(.badValue(link.peripheral, error))]
        }
    }

    // MARK: Losing the link, stopping

    /// Connected went false, or the device left BlueZ's tree: a watch that
    /// reconnects finds the bird again; anything else fails.
    mutating func linkLost() -> Step {
        let actions = BirdCentral.stopTimers() + [.report(.disconnected(peripheral))]
        guard configuration.reconnects else { return .finished(.failed(.connectionLost), actions) }
        return .findAgain(actions)
    }

    mutating func timerFired(_ timer: BirdCentral.Timer) -> Step {
        switch (timer, state) {
        case (.connect, .resolving(let peripheral)):
            let actions = BirdCentral.stopTimers() + [.disconnect(peripheral.path), .report(.disconnected(peripheral))]
            guard configuration.reconnects else { return .finished(.failed(.connectTimeout), actions) }
            return .findAgain(actions)
        case (.services, .resolving(let peripheral)):
            return .finished(
                .failed(.serviceMissing(configuration.fields)),
                BirdCentral.stopTimers() + [.disconnect(peripheral.path), .report(.disconnected(peripheral))])
        case (.pairing, .pairing):
            return pairCompleted(.failure(BlueZError(.timeout, message: "no answer to Pair")))
        case (.quiet, _):
            return quietWindowEnded()
        case (.probe, _):
            return probeDeadlinePassed()
        default:
            return .next([])
        }
    }

    /// What undoes the link's work (SIGINT, the end of the command): StopNotify
    /// what was subscribed, cancel a pairing, Disconnect.
    var stopActions: [Action] {
        switch state {
        case .resolving(let p): [.disconnect(p.path)]
        case .pairing(let p, _): [.cancelPairing(p.path), .disconnect(p.path)]
        case .reading(let link, _): cleanUp(link, subscribed: streams)
        case .writing(let link): cleanUp(link, subscribed: false)
        case .subscribing(let link, _), .streaming(let link): cleanUp(link, subscribed: true)
        }
    }

    /// StopNotify what we subscribed to, then Disconnect.
    func cleanUp(_ link: Link, subscribed: Bool) -> [Action] {
        let stops = subscribed ? configuration.fields.compactMap { link.characteristics[$0].map(Action.stopNotify) } : []
        return stops + [.disconnect(link.peripheral.path)]
    }

    /// The link's work as far as it got, for a watch stopping at `--count`.
    var workingLink: Link? {
        switch state {
        case .reading(let link, _), .writing(let link), .subscribing(let link, _), .streaming(let link): link
        case .resolving, .pairing: nil
        }
    }
}
