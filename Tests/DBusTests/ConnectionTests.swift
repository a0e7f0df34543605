import FakeBlueZSupport
import Dispatch
import Foundation
@testable import DBus
import Testing

@Suite("Connection: calls, errors, signals")
struct ConnectionTests {
    @Test func errorNameAndMessageSurviveTheBus() async throws {
        let pair = try await EchoPair()
        do {
            _ = try await pair.client.call(
                destination: pair.server.uniqueName, path: "/echo", interface: "org.birdctl.Test", member: "Fail")
            Issue.record("expected an error")
        } catch {
            #expect(error.name == "org.birdctl.Test.Error.Custom")
            #expect(error.message == "it went wrong: ünïcode")
            #expect(error.kind == .other)
        }
    }

    @Test func missingServiceIsServiceUnknown() async throws {
        let pair = try await EchoPair()
        await #expect(throws: DBusError.self) {
            try await pair.client.call(destination: "org.nobody.Here", path: "/", interface: "org.x", member: "M")
        }
        do {
            _ = try await pair.client.call(destination: "org.nobody.Here", path: "/", interface: "org.x", member: "M")
        } catch {
            #expect(error.kind == .serviceUnknown)
        }
    }

    @Test func unknownObjectAndMethod() async throws {
        let pair = try await EchoPair()
        let server = pair.server.uniqueName
        do {
            _ = try await pair.client.call(destination: server, path: "/nothing", interface: "org.x", member: "M")
            Issue.record("expected an error")
        } catch { #expect(error.kind == .unknownObject) }
        do {
            _ = try await pair.client.call(destination: server, path: "/echo", interface: "org.birdctl.Test", member: "Nope")
            Issue.record("expected an error")
        } catch { #expect(error.kind == .unknownMethod) }
    }

    @Test func blockingCallFromAnotherThread() async throws {
        let pair = try await EchoPair()
        let message = try Message.methodCall(
            destination: pair.server.uniqueName, path: "/echo", interface: "org.birdctl.Test", member: "Echo",
            arguments: [.string("blocking")])
        let client = pair.client
        let reply = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try client.callBlocking(message).arguments() })
            }
        }
        #expect(reply == [.string("blocking")])
    }

    @Test func callbackRunsOnTheLoop() async throws {
        let pair = try await EchoPair()
        let message = try Message.methodCall(
            destination: pair.server.uniqueName, path: "/echo", interface: "org.birdctl.Test", member: "Echo")
        let loop = pair.client.loop
        let onLoop = await withCheckedContinuation { continuation in
            pair.client.call(message) { _ in continuation.resume(returning: loop.isInLoop) }
        }
        #expect(onLoop)
    }

    @Test func signalsAreRoutedByRule() async throws {
        let pair = try await EchoPair()
        let inbox = SignalInbox()
        pair.client.subscribe(
            MatchRule(interface: "org.birdctl.Test", member: "Tick", path: "/echo"), handler: inbox.handler)
        // A round trip to the bus makes sure the AddMatch is in place.
        _ = try await pair.client.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetId")
        pair.server.emitSignal("/other", interface: "org.birdctl.Test", member: "Tick", arguments: [.int32(0)])
        pair.server.emitSignal("/echo", interface: "org.birdctl.Test", member: "Tock", arguments: [.int32(1)])
        pair.server.emitSignal("/echo", interface: "org.birdctl.Test", member: "Tick", arguments: [.int32(2)])
        let message = await inbox.next()
        #expect(try message?.arguments() == [.int32(2)])
        #expect(message?.sender == pair.server.uniqueName)
    }

    @Test(.timeLimit(.minutes(1))) func ruleValuesWithQuotesReachTheDaemonIntact() async throws {
        let rule = MatchRule(interface: "org.birdctl.Test", member: "Tick", arg0: "it's")
        #expect(rule.description == "type='signal',interface='org.birdctl.Test',member='Tick',arg0='it'\\''s'")
        let pair = try await EchoPair()
        let inbox = SignalInbox()
        pair.client.subscribe(rule, handler: inbox.handler)
        _ = try await pair.client.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetId")
        // dbus-daemon sends only what the rule it parsed matches: a rule the
        // quote mangled is refused or matches another value, and "it's" never comes.
        pair.server.emitSignal("/echo", interface: "org.birdctl.Test", member: "Tick", arguments: [.string("its")])
        pair.server.emitSignal("/echo", interface: "org.birdctl.Test", member: "Tick", arguments: [.string("it's")])
        #expect(try await inbox.next()?.arguments() == [.string("it's")])
    }

    @Test func wellKnownSenderIsResolvedToItsOwner() async throws {
        let pair = try await EchoPair()
        let impostor = try pair.bus.connect()
        defer { impostor.close() }
        _ = try await pair.server.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "RequestName", arguments: [.string("org.birdctl.Owner"), .uint32(4)])
        let inbox = SignalInbox()
        pair.client.subscribe(MatchRule(sender: "org.birdctl.Owner", member: "Tick"), handler: inbox.handler)
        _ = try await pair.client.call(
            destination: "org.birdctl.Owner", path: "/echo", interface: "org.birdctl.Test", member: "Echo")
        // The client subscribes to ticks from "org.birdctl.Owner" only; the
        // impostor's are not delivered even though a second rule could match.
        let other = SignalInbox()
        pair.client.subscribe(MatchRule(member: "Tick"), handler: other.handler)
        _ = try await pair.client.call(
            destination: "org.birdctl.Owner", path: "/echo", interface: "org.birdctl.Test", member: "Echo")
        impostor.emitSignal("/x", interface: "org.birdctl.Test", member: "Tick", arguments: [.string("impostor")])
        #expect(try await other.next()?.arguments() == [.string("impostor")])
        pair.server.emitSignal("/x", interface: "org.birdctl.Test", member: "Tick", arguments: [.string("owner")])
        #expect(try await inbox.next()?.arguments() == [.string("owner")])
    }

    @Test(arguments: [false, true]) func pathNamespacesMatchWholeComponents(received: Bool) throws {
        // Built here, the fields are asked of libdbus each time; received
        // (here: from the wire), they are read once and kept.
        func header(_ path: ObjectPath) throws -> Message {
            let built = try Message.signal(path: path, interface: "org.x", member: "M")
            return received ? try Message.fromWire(built.wireBytes()) : built
        }
        #expect(try header("/org/bluez").isPath(in: "/org/bluez"))
        #expect(try header("/org/bluez/hci0/dev_1").isPath(in: "/org/bluez"))
        #expect(try !header("/org/bluezz").isPath(in: "/org/bluez"))
        #expect(try !header("/org").isPath(in: "/org/bluez"))
        #expect(try header("/anything").isPath(in: "/"))
        #expect(try header("/org/bluez").hasSender("") == false)
        #expect(try header("/org/bluez").hasInterface("org.x"))
        #expect(try !header("/org/bluez").hasInterface("org.xy"))
        #expect(try header("/org/bluez").hasMember("M"))
        #expect(try header("/org/bluez").hasPath("/org/bluez" as CString))
        #expect(try !header("/org/bluez").hasPath("/org" as CString))
        #expect(try header("/org/bluez").hasPath(ObjectPath("/org/bluez")))
        #expect(try !header("/org/bluez").hasPath(ObjectPath("/org/bluezz")))
    }

    @Test func idleLoopUsesNoCPU() async throws {
        let pair = try await EchoPair()
        let before = pair.client.loop.threadCPUTime()
        try await Task.sleep(for: .milliseconds(500))
        let used = pair.client.loop.threadCPUTime() - before
        // A loop that polled would burn the whole half second; a blocked one ~0.
        #expect(used < .milliseconds(20), "idle loop used \(used) of CPU in 0.5 s")
    }

    @Test func timersFireInOrderOnTheLoop() async throws {
        let pair = try await EchoPair()
        let loop = pair.client.loop
        let order = await withCheckedContinuation { (continuation: CheckedContinuation<[Int], Never>) in
            loop.execute {
                var fired: [Int] = []
                let cancelled = loop.schedule(after: .milliseconds(10)) { fired.append(99) }
                loop.schedule(after: .milliseconds(30)) {
                    fired.append(2)
                    continuation.resume(returning: fired)
                }
                loop.schedule(after: .milliseconds(5)) { fired.append(1) }
                loop.cancel(cancelled)
            }
        }
        #expect(order == [1, 2])
    }

    @Test func pendingCallsFailWhenClosed() async throws {
        let bus = try await PrivateBus.started()
        let connection = try bus.connect()
        connection.close()
        await #expect(throws: DBusError.self) {
            try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "GetId")
        }
    }
    /// dbus-daemon killed under a call waiting for its reply: the owner hears
    /// of the loss once, on the loop, before that call fails; one who asks
    /// later hears at once; nothing can be sent any more. Before the loss was
    /// reported, nobody learnt of it and `birdctl watch` waited for ever.
    @Test func aBusThatGoesAwayIsReportedBeforeTheCallsWaitingFail() async throws {
        let bus = try await PrivateBus.started()
        let server = try bus.connect()
        let client = try bus.connect()
        defer {
            client.close()
            server.close()
        }
        let (arrived, arrival) = AsyncStream<Void>.makeStream()
        server.export("/hold", [
            ExportedInterface("org.birdctl.Test", deferredMethods: ["Hold": { _, _ in arrival.yield() }])
        ])
        let held = try Message.methodCall(
            destination: server.uniqueName, path: "/hold", interface: "org.birdctl.Test", member: "Hold")
        let record = EventRecord()
        client.onLoss { loss in record.add("lost, \(loss.unansweredCalls) unanswered, on the loop: \(client.loop.isInLoop)") }
        let failure = await withCheckedContinuation { (continuation: CheckedContinuation<DBusError?, Never>) in
            client.call(held, timeout: .seconds(20)) { result in
                if case .failure(let error) = result { record.add("call failed: \(error.kind)") }
                continuation.resume(returning: result.failure)
            }
            Task {
                var iterator = arrived.makeAsyncIterator()
                await iterator.next()
                bus.stop()  // SIGKILL
            }
        }
        #expect(failure?.kind == .disconnected, "\(String(describing: failure))")
        #expect(record.events == ["lost, 1 unanswered, on the loop: true", "call failed: disconnected"])

        let late = await withCheckedContinuation { continuation in client.onLoss { continuation.resume(returning: $0) } }
        #expect(late == ConnectionLoss(unansweredCalls: 1))
        await #expect(throws: DBusError.self) {
            try await client.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                  interface: "org.freedesktop.DBus", member: "GetId")
        }
    }

    /// A connection dropped without `close()` on another thread than its
    /// loop's: its loop ends before libdbus, closing, takes its watches off
    /// the loop (in a debug build the loop-thread check traps if not). In a
    /// child process, which such a trap ends (an exit test: Swift 6.2 on).
    #if compiler(>=6.2)
    @Test func aConnectionLetGoOffItsLoopEndsItsLoopBeforeClosing() async {
        await #expect(processExitsWith: .success) {
            let bus = try await PrivateBus.started()
            // Nothing posted to the loop holds it: the last reference goes here.
            for _ in 0..<3 { _ = try bus.connect() }
        }
    }
    #endif

    @Test func aClosedConnectionIsNotALostOne() async throws {
        let bus = try await PrivateBus.started()
        let connection = try bus.connect()
        let record = EventRecord()
        connection.onLoss { _ in record.add("lost") }
        connection.close()
        // The loop has ended: this runs here and now, and finds no loss.
        connection.onLoss { _ in record.add("lost, asked after close") }
        #expect(record.events.isEmpty)
    }
}

/// What happened, in order (appended on a connection's loop, read after).
private final class EventRecord: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [String] = []
    func add(_ event: String) { lock.withLock { recorded.append(event) } }
    var events: [String] { lock.withLock { recorded } }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
