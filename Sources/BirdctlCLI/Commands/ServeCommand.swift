import Formats
import Bird
import DBus
import Glibc

/// `birdctl serve`: be a Bird peripheral through BlueZ.
enum ServeCommand {
    static let command = Command(
        name: "serve", summary: "be a Bird peripheral (through BlueZ)", operands: "",
        details: """
            Publishes the Bird Service on an adapter (GATT application and LE
            advertisement) and serves reads, writes and notifications until Ctrl-C.
            Lines on stdin change values and notify subscribers: "alpha 55",
            "color #00FF00", "name Wren". Writes from centrals are checked like any
            reading: a bad one is refused and the value stays. Prints one line per event.
            """,
        options: [.name, .color, .alpha, .animate, .adapter, .powerOn, .metrics, .json, .verbose, .help],
        run: run)

    static func run(_ arguments: Arguments) throws(UsageError) -> ExitStatus {
        let common = try CommonOptions(arguments)
        guard arguments.positionals.isEmpty else { throw UsageError("serve takes no arguments") }
        let alpha = arguments.birdValue(.alpha)
        let animated = arguments.has(.animate)
        let metrics = try MetricsService.requested(in: arguments, for: .serve)

        return try Session.run(json: common.json, verbose: common.verbose) { session in
            let formatter = session.formatter
            let stdout = session.stdout
            return BirdPeripheral(
                connection: session.connection, name: arguments.birdValue(.name), color: arguments.birdValue(.color),
                alpha: alpha, options: common.adapterOptions,
                onEvent: { event in
                    metrics?.record(event)
                    stdout.line(line(for: event, formatter))
                },
                onFinish: { outcome in session.finish(exitStatus(for: outcome)) })
        } start: { session, peripheral in
            let loop = session.connection.loop
            guard MetricsService.start(metrics, in: session) else { return }
            peripheral.start()
            readStdin(on: loop, into: peripheral)
            if animated, case .alpha(let percent) = alpha {
                animate(peripheral, on: loop, from: Int(percent), step: 0)
            }
        }
    }

    /// `field value` lines from stdin, until EOF. Bad lines are reported and skipped.
    static func readStdin(on loop: EventLoop, into peripheral: BirdPeripheral) {
        let reader = LineReader(fd: 0)
        var token: AnyObject?
        token = loop.watchReadable(0) {
            let (lines, ended) = reader.read()
            for line in lines {
                switch BirdAssignment.parse(line) {
                case .success(let value): peripheral.set(value)
                case .failure(let problem): Diagnostics.error("stdin: \(problem)")
                case nil: break
                }
            }
            if ended, let token { loop.unwatch(token) }
        }
    }

    /// Every second: alpha climbs by 5 (wrapping at 100) and the hue turns.
    static func animate(_ peripheral: BirdPeripheral, on loop: EventLoop, from start: Int, step: Int) {
        loop.schedule(after: .seconds(1)) {
            let next = step + 1
            peripheral.set(.alpha(percent: UInt8((start + next * 5) % 101)))
            peripheral.set(.color(hue(Double(next % 36) * 10)))
            animate(peripheral, on: loop, from: start, step: next)
        }
    }

    /// A saturated colour at `degrees` on the colour wheel.
    static func hue(_ degrees: Double) -> RGBColor {
        let sector = Int(degrees / 60) % 6
        let rising = UInt8((degrees.truncatingRemainder(dividingBy: 60) / 60 * 255).rounded())
        let falling = 255 - rising
        switch sector {
        case 0: return RGBColor(red: 255, green: rising, blue: 0)
        case 1: return RGBColor(red: falling, green: 255, blue: 0)
        case 2: return RGBColor(red: 0, green: 255, blue: rising)
        case 3: return RGBColor(red: 0, green: falling, blue: 255)
        case 4: return RGBColor(red: rising, green: 0, blue: 255)
        default: return RGBColor(red: 255, green: 0, blue: falling)
        }
    }

    static func line(for event: BirdPeripheral.Event, _ formatter: ReportFormatter) -> String {
        var object = JSONObject()
        object.add("time", Timestamp.iso8601())
        let text: String
        switch event {
        case .advertising(let adapter):
            object.add("event", "advertising")
            object.add("adapter", adapter)
            text = "advertising the Bird Service on \(adapter)"
        case .stoppedAdvertising:
            object.add("event", "stopped_advertising")
            text = "bluetoothd went: not advertising until it is back"
        case .valueChanged(let value, let byCentral):
            object.add("event", byCentral ? "written" : "value")
            object.add("field", value.field.rawValue)
            object.add("value", ReportFormatter.jsonValue(value))
            text = "\(formatter.pad(value.field.rawValue, 5))  \(formatter.styled(value))" + (byCentral ? "  (written by a central)" : "")
        case .refusedWrite(let error):
            object.add("event", "refused_write")
            object.add("field", error.field.rawValue)
            object.add("error", error.reason)
            object.add("raw", error.rawHex)
            text = "refused a write: \(error)"
        case .subscription(let field, let subscribed):
            object.add("event", subscribed ? "subscribed" : "unsubscribed")
            object.add("field", field.rawValue)
            text = "a central \(subscribed ? "subscribed to" : "unsubscribed from") \(field)"
        }
        return formatter.json ? object.rendered : "\(formatter.dim(Timestamp.clock()))  \(text)"
    }
}

/// Lines from a file descriptor, read as they come (loop-confined).
final class LineReader {
    private let fd: Int32
    private var pending: [UInt8] = []

    init(fd: Int32) { self.fd = fd }

    /// What is readable now, split into complete lines; `ended` at EOF or error.
    func read() -> (lines: [String], ended: Bool) {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(fd, &chunk, chunk.count)
        guard count > 0 else {
            let rest = pending.isEmpty ? [] : [String(decoding: pending, as: UTF8.self)]
            pending.removeAll()
            return (rest, true)
        }
        pending.append(contentsOf: chunk[0..<count])
        var lines: [String] = []
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            lines.append(String(decoding: pending[..<newline], as: UTF8.self))
            pending.removeSubrange(...newline)
        }
        return (lines, false)
    }
}
