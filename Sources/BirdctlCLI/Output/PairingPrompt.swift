import Bird
import BlueZ
import DBus
import Glibc

/// `--confirm-pairing`: asks the person at the terminal to confirm the
/// passkey both sides show, without blocking the loop (the answer is read
/// when /dev/tty is readable). Loop-confined.
final class PairingPrompt: @unchecked Sendable {
    private let loop: EventLoop
    private let tty: Int32
    /// Who is being paired with (from the `pairing` report), for the question.
    var label = "the bird"

    /// nil when there is no terminal to ask on.
    init?(loop: EventLoop) {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        self.loop = loop
        self.tty = fd
    }

    deinit { close(tty) }

    var confirm: PairingAgent.Confirm {
        { [self] _, passkey, answer in
            let digits = String(passkey)
            let question = "birdctl: does \(SafeText.escaped(label)) show the passkey "
                + String(repeating: "0", count: max(0, 6 - digits.count)) + digits + "? [y/N] "
            let bytes = Array(question.utf8)
            _ = write(tty, bytes, bytes.count)
            let reader = LineReader(fd: tty)
            var token: AnyObject?
            token = loop.watchReadable(tty) { [loop] in
                let (lines, ended) = reader.read()
                guard let line = lines.first ?? (ended ? "" : nil) else { return }
                if let token { loop.unwatch(token) }
                let reply = line.lowercased().trimmingSpaces
                answer(reply == "y" || reply == "yes")
            }
        }
    }
}
