import Bird

/// The `quiet` event: a held bird heard nothing from for several of its
/// usual gaps between notifications, its probe read, and what came of it.
extension ReportFormatter {
    /// `{"event":"quiet","address":…,"probe":"sent","silent_s":4,"usual_gap_s":1}`, then
    /// `"probe":"answered"` (the link is kept) or `"probe":"unanswered","message":…` (it is ended).
    public func quietLine(_ p: Peripheral, _ probe: BirdCentral.QuietProbe) -> String {
        var object = event("quiet", p)
        switch probe {
        case .probing(let silentFor, let usualGap):
            object.add("probe", "sent")
            object.add("silent_s", .number(Self.secondsText(silentFor)))
            if let usualGap { object.add("usual_gap_s", .number(Self.secondsText(usualGap))) }
        case .answered:
            object.add("probe", "answered")
        case .unanswered(let error):
            object.add("probe", "unanswered")
            object.add("message", "\(error)")
        }
        return object.rendered
    }

    public func quietText(_ p: Peripheral, _ probe: BirdCentral.QuietProbe) -> String {
        switch probe {
        case .probing(let silentFor, let usualGap):
            "nothing from \(label(p)) for \(Self.secondsText(silentFor)) s"
                + (usualGap.map { " (usually every \(Self.secondsText($0)) s)" } ?? "") + "; reading it to see if the link is alive"
        case .answered:
            "\(label(p)) answered: the link is kept"
        case .unanswered(let error):
            "\(label(p)) did not answer (\(explained(error))): its link is ended"
        }
    }

    /// Seconds to the millisecond, without trailing zeros: `4`, `2.5`.
    public static func secondsText(_ duration: Duration) -> String {
        let milliseconds = Int64(duration.components.seconds) * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        let whole = milliseconds / 1000, fraction = milliseconds % 1000
        guard fraction != 0 else { return "\(whole)" }
        var digits = String(fraction + 1000).dropFirst()
        while digits.last == "0" { digits = digits.dropLast() }
        return "\(whole).\(digits)"
    }
}
