import Formats
import Bird
import DBus
import Glibc

/// What `watch --all` keeps across restarts (`--state-dir`, or systemd's
/// `StateDirectory=`): each adapter's learned link limit, by the adapter's
/// address, so a restart does not learn them again from connects that never
/// come; and the birds it followed, with when each was last read, so a link
/// to one left up by a run that was killed is adopted, not left alone as
/// another program's. A small text file, written whole and renamed into place:
///
///     birdctl-state 1
///     limit ADAPTER-ADDRESS LINKS
///     bird BIRD-ADDRESS SECONDS-SINCE-1970
struct RememberedState: Equatable {
    /// Learned link limits by adapter address.
    var limits: [BluetoothAddress: Int] = [:]
    /// When each bird followed was last read (seconds since 1970), by address.
    var birds: [BluetoothAddress: Int64] = [:]

    static let header = "birdctl-state 1"
    static let maximumAdapters = 64
    /// As many as the fleet follows at most; past it the longest unread go.
    static let maximumBirds = 1024
    static let maximumBytes = 64 * 1024
    static let limits = 1...64

    init(limits: [BluetoothAddress: Int] = [:], birds: [BluetoothAddress: Int64] = [:]) {
        self.limits = limits
        self.birds = birds
    }

    /// The file's text; anything else than what `text` writes is refused
    /// whole (a corrupt or foreign file teaches nothing).
    init(parsing text: String) throws(StateFileError) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last == "" { lines.removeLast() }
        guard lines.first == Substring(Self.header) else { throw StateFileError("it is not a birdctl state file (\(Self.header))") }
        for (number, line) in lines.enumerated().dropFirst() {
            let words = line.split(separator: " ", omittingEmptySubsequences: false)
            guard words.count == 3, let address = BluetoothAddress(words[1]) else { throw Self.badLine(number) }
            switch words[0] {
            case "limit":
                guard let limit = Int(words[2]), Self.limits.contains(limit), limits[address] == nil else { throw Self.badLine(number) }
                limits[address] = limit
            case "bird":
                guard let read = Int64(words[2]), read >= 0, birds[address] == nil else { throw Self.badLine(number) }
                birds[address] = read
            default:
                throw Self.badLine(number)
            }
        }
        guard limits.count <= Self.maximumAdapters else { throw StateFileError("it names more than \(Self.maximumAdapters) adapters") }
        guard birds.count <= Self.maximumBirds else { throw StateFileError("it names more than \(Self.maximumBirds) birds") }
    }

    private static func badLine(_ index: Int) -> StateFileError {
        StateFileError("line \(index + 1) is neither \"limit ADAPTER-ADDRESS N\" (N 1 to 64) nor \"bird ADDRESS SECONDS\", each address once")
    }

    var text: String {
        let lines = [Self.header] + limits.sorted { $0.key < $1.key }.map { "limit \($0.key) \($0.value)" }
            + birds.sorted { $0.key < $1.key }.map { "bird \($0.key) \($0.value)" }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `address` read at `time`: true if it is a bird new to the state (the
    /// longest unread one goes when the state holds `maximumBirds`).
    mutating func read(_ address: BluetoothAddress, at time: Int64) -> Bool {
        let new = birds[address] == nil
        if new, birds.count >= Self.maximumBirds, let oldest = birds.min(by: { $0.value < $1.value })?.key {
            birds[oldest] = nil
        }
        birds[address] = time
        return new
    }

    /// These adapters as they are now: a limit learned replaces the one
    /// kept. One no longer known is kept all the same: bluetoothd restarting
    /// or the adapter powered off makes birdctl learn limits again, which says
    /// nothing of the controller; a limit disproved (a connection past it) is
    /// checked again after the next start as any learned limit. At most
    /// `maximumAdapters`: an adapter new to a full file is not kept.
    func updated(with adapters: [AdapterHealth]) -> RememberedState {
        var updated = self
        for adapter in adapters {
            guard let address = adapter.address, adapter.limitLearned, let limit = adapter.limit, Self.limits.contains(limit)
            else { continue }
            if updated.limits[address] != nil || updated.limits.count < Self.maximumAdapters { updated.limits[address] = limit }
        }
        return updated
    }

    /// The fleet forgot `address` (neither heard nor connected for
    /// `--forget-after`): a link to it at the next start is not ours.
    mutating func forget(_ address: BluetoothAddress) -> Bool { birds.removeValue(forKey: address) != nil }
}

struct StateFileError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The state file in its directory: read once at start, written whole
/// (a temporary file, synced, renamed over the old one) when what it keeps
/// changes. Loop-confined after its start.
final class StateKeeper: @unchecked Sendable {
    let directory: String
    private(set) var state: RememberedState
    /// Each adapter as the driver has it now; set once the driver exists.
    var adapters: () -> [AdapterHealth] = { [] }
    private var saidWriteFailed = false

    var path: String { directory + "/state" }

    /// Reads the state kept in `directory`; a missing file is an empty state,
    /// a corrupt or foreign one is said (`warn`) and ignored.
    init(directory: String, warn: (String) -> Void) {
        self.directory = directory
        state = RememberedState()
        switch Self.read(path) {
        case .success(nil): break
        case .success(let text?):
            do throws(StateFileError) {
                state = try RememberedState(parsing: text)
            } catch {
                warn("ignoring the state file \(path): \(error)")
            }
        case .failure(let error): warn("ignoring the state file \(path): \(error)")
        }
    }

    /// Whether `directory` is one birdctl can keep its state in: nil if so, else why not.
    static func problem(with directory: String) -> String? {
        var status = stat()
        guard stat(directory, &status) == 0 else { return "\(directory): \(String(cString: strerror(errno)))" }
        guard status.st_mode & S_IFMT == S_IFDIR else { return "\(directory) is not a directory" }
        guard access(directory, W_OK | X_OK) == 0 else { return "\(directory): \(String(cString: strerror(errno)))" }
        return nil
    }

    /// A report went by: a limit learned is written at once; birds new to
    /// the state or forgotten within `soon` (a crowd of strangers costs one
    /// write, not one each); readings of birds it has every `interval`, and
    /// as the command ends. The time kept is that of a bird's last read (a
    /// poll) or its first notification since the last write: a notification
    /// after that costs one dictionary lookup (this runs for every one).
    func record(_ report: BirdCentral.Report) {
        switch report {
        case .links:
            let updated = state.updated(with: adapters())
            if updated != state {
                state = updated
                save()
            }
        case .reading(let bird, _, _, let notified):
            if notified && readSinceSaved[bird.address] != nil { return }
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            readSinceSaved[bird.address] = Int64(now.tv_sec)
            if state.birds[bird.address] == nil { saveSoon() } else { unsaved = true }
        case .forgotten(let address):
            readSinceSaved[address] = nil
            if state.forget(address) { saveSoon() }
        default:
            break
        }
    }

    /// Birds read since the state was last written, with when (seconds since 1970).
    private var readSinceSaved: [BluetoothAddress: Int64] = [:]

    /// How often readings of known birds are written (an SD card is not worn by every reading).
    static let interval = Duration.seconds(600)
    /// How long a bird new to the state waits to be written.
    static let soon = Duration.seconds(10)

    /// From now on, on `loop`: every `interval`, what is not written yet.
    func start(on loop: EventLoop) {
        self.loop = loop
        _ = loop.schedule(after: Self.interval) { [self] in
            if unsaved { save() }
            start(on: loop)
        }
    }

    /// The command ends: what is not written yet is (a run killed loses
    /// the readings since the last write, at most `interval`'s).
    func finish() {
        if unsaved { save() }
    }

    private var loop: EventLoop?
    private var unsaved = false
    private var savingSoon = false

    private func saveSoon() {
        unsaved = true
        guard !savingSoon, let loop else { return }
        savingSoon = true
        _ = loop.schedule(after: Self.soon) { [self] in
            savingSoon = false
            if unsaved { save() }
        }
    }

    private func save() {
        unsaved = false
        for (address, time) in readSinceSaved { _ = state.read(address, at: time) }
        readSinceSaved.removeAll()
        if let failure = Self.write(state.text, to: path) {
            if !saidWriteFailed { Diagnostics.say("warning: cannot keep state in \(path): \(failure)") }
            saidWriteFailed = true
        }
    }

    /// The file's text, nil if there is none; bounded (`maximumBytes`).
    private static func read(_ path: String) -> Result<String?, StateFileError> {
        // Non-blocking: a FIFO put there must not hang the start.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        if fd < 0 {
            return errno == ENOENT ? .success(nil) : .failure(StateFileError(String(cString: strerror(errno))))
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return .failure(StateFileError("it is not a regular file")) }
        // A regular file's read returns all it asks for that is there.
        var bytes = [UInt8](repeating: 0, count: RememberedState.maximumBytes + 1)
        let count = Glibc.read(fd, &bytes, bytes.count)
        guard count >= 0 else { return .failure(StateFileError(String(cString: strerror(errno)))) }
        guard count <= RememberedState.maximumBytes else {
            return .failure(StateFileError("it is larger than \(RememberedState.maximumBytes) bytes"))
        }
        guard let text = String(validating: bytes[..<count], as: UTF8.self) else { return .failure(StateFileError("it is not UTF-8 text")) }
        return .success(text)
    }

    /// Writes `text` to `path` atomically (a new file, synced, renamed over
    /// the old one): nil, or why it could not.
    private static func write(_ text: String, to path: String) -> String? {
        let temporary = path + ".new"
        unlink(temporary)  // one left by a run that was killed: made afresh, ours alone
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        let bytes = Array(text.utf8)
        errno = 0
        var failure: String?
        if Glibc.write(fd, bytes, bytes.count) != bytes.count {
            failure = errno == 0 ? "the disk took only part of it" : String(cString: strerror(errno))
        } else if fsync(fd) != 0 {
            failure = String(cString: strerror(errno))
        }
        if close(fd) != 0 && failure == nil { failure = String(cString: strerror(errno)) }
        if failure == nil && rename(temporary, path) != 0 { failure = String(cString: strerror(errno)) }
        if failure != nil { unlink(temporary) }
        return failure
    }
}
