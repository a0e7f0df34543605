import BlueZ
import DBus

/// What the fleet asks of its driver, and the timers it keeps.
extension BirdFleet {
    public enum Timer: Hashable, Sendable {
        /// `--all`: the fleet's own find deadline and duration.
        case fleet(BirdCentral.Timer)
        case machine(MachineID, BirdCentral.Timer)
        /// `--all`: one tick of the clock that forgets unheard birds (`forgetAfter`).
        case forgetTick
        /// `--all`: the gap after a connection attempt (see `LinkScheduler`).
        case connectGap
        /// `--all`: time to check the learned link limits (see `LinkScheduler`).
        case limitRecheck
        /// `--all` with several adapters: a bird new to the fleet has been
        /// listened to long enough for every adapter to hear it (see `AdapterPool`).
        case listen(BluetoothAddress)
        /// `--all`: a window of the discovery watchdog ended (see `DiscoveryWatchdog`).
        case discoveryWatch
        /// A guest's connect deadline (see `GuestLinks`).
        case guest(MachineID)
    }

    /// What the driver must do, in order.
    public enum Action: Hashable, Sendable {
        /// Discovery on; a refusal goes to `scanFailed` of that machine (nil:
        /// the fleet's). With `lookUpKnown`, first look for that address in
        /// BlueZ's cache and, if it is a Bird, give it to `deviceKnown` instead.
        case startScanning(MachineID?, lookUpKnown: BluetoothAddress?)
        case stopScanning
        /// `all`, as discovery first starts: devices an earlier run followed
        /// (`LinkPolicy.rememberedBirds`), on each adapter. BlueZ may still
        /// hold their links, which discovery does not show (a connected
        /// device does not advertise): each that is connected is given to
        /// `deviceSighted` (not live), to be adopted.
        case lookUpLinked([ObjectPath])
        case connect(MachineID, ObjectPath)
        /// Disconnect, or cancel a connection still being made.
        case disconnect(ObjectPath)
        /// A connect deadline passed: count it a timeout of the adapter and
        /// find the devices connected on it; answered by `connectDeadlinePassed`.
        case countLinks(MachineID, ObjectPath)
        case read(MachineID, BirdField, ObjectPath)
        case write(MachineID, ObjectPath, [UInt8])
        case startNotify(MachineID, BirdField, ObjectPath)
        case stopNotify(ObjectPath)
        /// Pair through our agent; answered by `pairCompleted`.
        case pair(MachineID, ObjectPath)
        case cancelPairing(ObjectPath)
        /// Have BlueZ forget the device at this address; answered by `forgetCompleted`.
        case forget(MachineID, BluetoothAddress)
        /// `all`: a bird forgotten (neither heard nor connected for
        /// `forgetAfter`). BlueZ keeps for good a device it was asked to
        /// connect to (Connect makes it non-temporary), with its GATT
        /// objects, in its memory and in ours: unless it is bonded or
        /// connected, have BlueZ drop it, as it drops a device it only heard.
        /// Heard again, BlueZ makes it anew. Not answered.
        case uncache(BluetoothAddress)
        /// `all`: power the adapter off and on, to unstick its connect path
        /// (see `LinkScheduler.deadlinePassed`); a failure goes to `adapterResetFailed`.
        case resetAdapter(ObjectPath)
        /// `all`: discovery off and on on this adapter, which heard nothing
        /// while a bird was looked for (see `DiscoveryWatchdog`); a failure
        /// goes to `discoveryRestartFailed`.
        case restartDiscovery(ObjectPath)
        /// `all`: the adapter is still deaf after a restart: count the devices
        /// BlueZ has connected on it (any program's), answered by `deafAdapterChecked`.
        case checkDeafAdapter(ObjectPath, silentFor: Duration)
        /// A guest's link is up, its services resolved (see `guestConnect`).
        case guestLinked(BluetoothAddress, ObjectPath)
        /// A guest's link could not be made.
        case guestFailed(BluetoothAddress, BlueZError)
        /// A guest's link went down.
        case guestUnlinked(BluetoothAddress)
        case armTimer(Timer, Duration)
        case cancelTimer(Timer)
        case report(BirdCentral.Report)
        /// The command is done once the cleanup actions before this one are
        /// answered (briefly).
        case finish(CommandOutcome)
    }
}
