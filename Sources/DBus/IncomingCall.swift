import CDBus
import Threads

extension Connection {
    /// The reply this connection would send to `call` had it arrived from the
    /// bus from `sender`: the access rules, then the exported objects, run on
    /// the loop as for a call off the wire, the reply handed back instead of
    /// sent (nil: none now; a deferred method sends its own later). For the
    /// exported-objects fuzz target (fuzz/), which feeds calls faster than a
    /// round trip through dbus-daemon. Waits for the loop: not on the loop.
    public func replyToIncoming(_ call: Message, from sender: String) -> Message? {
        precondition(!loop.isInLoop, "replyToIncoming waits for the loop")
        // libdbus aborts on an invalid name rather than refusing it.
        guard call.kind == .methodCall, dbus_validate_bus_name(sender, nil) != 0,
            dbus_message_set_sender(call.raw, sender) != 0
        else { return nil }
        // Every call off the wire has a serial (a reply refers to it).
        if dbus_message_get_serial(call.raw) == 0 { dbus_message_set_serial(call.raw, 1) }
        let box = ReplyBox()
        let done = ThreadGate()
        loop.execute { [self] in
            box.reply = refusal(of: call) ?? exports.handle(call, on: self)
            done.open()
        }
        done.wait()
        return box.reply
    }
}

private final class ReplyBox: @unchecked Sendable {
    var reply: Message?
}
