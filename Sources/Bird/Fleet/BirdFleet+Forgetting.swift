import BlueZ
import DBus

/// `watch --all` among strangers: birds no longer heard are forgotten, so
/// nothing the fleet keeps grows with every address ever heard.
extension BirdFleet {
    /// `all`: one tick on: machines whose bird was neither heard nor
    /// connected for `ticksToForget` ticks are dropped (reported as
    /// `forgotten`), and declined birds are given another chance.
    mutating func forgetUnheard() -> [Action] {
        guard outcome == nil, var forgetting else { return [] }
        let unheard = forgetting.tickOn(machines.map { ($0.id, $0.central.currentDevice != nil) })
        self.forgetting = forgetting
        var actions: [Action] = []
        for id in unheard {
            guard var stopped = machines.central(id) else { continue }
            let stop = stopped.stopRequested().filter { if case .finish = $0 { false } else { true } }
            actions += translate(stop, from: id)
            drop(id)
            if let address = stopped.configuration.address { actions += [.report(.forgotten(address: address)), .uncache(address)] }
        }
        return actions + [.armTimer(.forgetTick, forgetting.interval)]
    }
}
