/// A held link's watchdog (links that die quietly: the bird keeps its link
/// in BlueZ's eyes but nothing comes over it any more). It looks at the link
/// once per *window* of `multiple` × the bird's usual gap between
/// notifications: a window with notifications teaches it the gap (the
/// window's length ÷ the notifications in it, kept between `shortestGap` and
/// `longestGap`, averaged with the last ones); a window with none is quiet,
/// and the link gets a probe read. So a bird is probed after `multiple` to
/// 2 × `multiple` of its usual gaps of silence.
///
/// No clock: a window ends when its timer fires, and the timer was armed for
/// the window's length, so the machine stays pure. A notification costs one
/// addition. A value, no I/O: part of `BirdLink`.
struct QuietWatch: Hashable, Sendable {
    /// Gaps shorter than this count as this long: a bird notifying every
    /// 20 ms is not probed after 80 ms of a loaded machine's scheduling.
    static let shortestGap = Duration.seconds(1)
    /// And longer ones as this long: a bird that notifies only on change is
    /// still probed now and then (every `multiple` × 10 min at most).
    static let longestGap = Duration.seconds(600)

    /// How long a probe read may take. Not the connect deadline, which a
    /// user may cut to a second: a busy bluetoothd (a crowd of strangers
    /// being announced) was seen to take longer than that to answer a read
    /// over a healthy link, and the link was dropped for it.
    static let probeDeadline = Duration.seconds(10)

    let multiple: Int
    /// Notifications in the current window.
    private(set) var heard = 0
    /// The learned gap between notifications; nil until a window had any.
    private(set) var usualGap: Duration?
    /// Each answered probe (or, before a gap is learned, each quiet window)
    /// doubles the window, up to `multiple` × `longestGap`; a notification
    /// brings it back to `multiple` × the usual gap.
    private var stretch: Int64 = 1
    /// The current window's length (what its timer was armed with).
    private(set) var window: Duration
    /// The field a probe read is out for, if one is.
    var probing: BirdField?

    init(multiple: Int) {
        self.multiple = multiple
        window = Self.shortestGap * multiple
    }

    /// The longest window there is.
    private var longestWindow: Duration { Self.longestGap * multiple }

    /// A notification came over the link.
    @inline(__always) mutating func notified() { heard &+= 1 }

    /// Notifications counted outside the link (the machine's hot path).
    mutating func notified(_ count: Int) { heard &+= count }

    /// What the end of a window says.
    enum Verdict: Equatable {
        /// The link is alive (or nothing is known yet): look again after this.
        case calm(next: Duration)
        /// Nothing came during a whole window (`silentFor`): probe.
        case quiet(silentFor: Duration)
    }

    /// The window's timer fired.
    mutating func windowEnded() -> Verdict {
        guard heard == 0 else {
            let sample = min(max(window / heard, Self.shortestGap), Self.longestGap)
            // Averaged (a quarter of the new sample), as TCP smooths its round trips.
            usualGap = usualGap.map { $0 + (sample - $0) / 4 } ?? sample
            heard = 0
            stretch = 1
            window = (usualGap ?? Self.shortestGap) * multiple
            return .calm(next: window)
        }
        // Nothing learned yet and the window can still grow: a bird that has
        // said nothing since it was subscribed may just be slow; wait longer.
        if usualGap == nil, window < longestWindow {
            stretchWindow()
            return .calm(next: window)
        }
        return .quiet(silentFor: window)
    }

    /// The probe was answered: the bird is there, merely quiet. Look again
    /// after a window twice as long (no probe storm for a bird that slowed down).
    mutating func probeAnswered() -> Duration {
        probing = nil
        // What answered is not the bird's own pace (BlueZ echoes a value it
        // read as a change, before the read's reply).
        heard = 0
        stretchWindow()
        return window
    }

    private mutating func stretchWindow() {
        if stretch < 1 << 20 { stretch *= 2 }
        window = min((usualGap ?? Self.shortestGap) * multiple * stretch, longestWindow)
    }
}
