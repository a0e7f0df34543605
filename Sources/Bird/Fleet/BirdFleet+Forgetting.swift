import BlueZ
import DBus

/// `watch --all` among strangers: birds no longer heard are forgotten, so
/// nothing the fleet keeps grows with every address ever heard.
extension BirdFleet {
    /// `all`: one tick on: machines whose bird was neither heard nor
    /// connected for `ticksToForget` ticks are dropped (reported as
    /// `forgotten`), and declined birds are given another chance.
    mutating func forgetUnheard() -> [Action] {
        guard outcome == nil, let forgetAfter else { return [] }
        tick += 1
        let horizon = tick - Self.ticksToForget
        declined = declined.filter { $0.value > horizon }
        var actions: [Action] = []
        // A bird connected (or being connected to) counts as heard: it may not advertise while held.
        for (id, central) in machines where central.currentDevice != nil { lastHeard[id] = tick }
        for (id, central) in machines where lastHeard[id, default: tick] <= horizon {
            var stopped = central
            let stop = stopped.stopRequested().filter { if case .finish = $0 { false } else { true } }
            actions += translate(stop, from: id)
            drop(id)
            if let address = central.configuration.address { actions += [.report(.forgotten(address: address)), .uncache(address)] }
        }
        return actions + [.armTimer(.forgetTick, forgetAfter / Self.ticksToForget)]
    }
}
