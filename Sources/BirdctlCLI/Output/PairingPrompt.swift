import Formats
import Bird
import DBus
import Glibc

/// `--confirm-pairing`: asks the person at the terminal to confirm the
/// passkey both sides show, and shows the codes to type on a bird, naming
/// the bird bluetoothd asks about. Never blocks the loop: the answer is read
/// when /dev/tty is readable. One question at a time (bluetoothd asks so
/// too); one that bluetoothd withdraws (Cancel) is closed. Loop-confined.
final class PairingPrompt: @unchecked Sendable {
    private let loop: EventLoop
    private let tty: Int32
    private let label: @Sendable (BirdCentral.Peripheral) -> String

    private struct Question {
        var text: String
        var answer: @Sendable (Bool) -> Void
    }
    /// The question on the terminal, and those waiting for it.
    private var open: (question: Question, token: AnyObject)?
    private var waiting: [Question] = []

    /// nil when there is no terminal to ask on.
    init?(loop: EventLoop, label: @escaping @Sendable (BirdCentral.Peripheral) -> String) {
        let fd = Glibc.open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        self.loop = loop
        self.tty = fd
        self.label = label
    }

    deinit { Glibc.close(tty) }

    var questions: PairingQuestions {
        PairingQuestions(
            confirm: { [self] bird, passkey, answer in
                ask(Question(text: "birdctl: does \(SafeText.escaped(label(bird))) show the passkey \(passkey)? [y/N] ", answer: answer))
            },
            display: { [self] bird, code in
                say("birdctl: type \(SafeText.escaped(code)) on \(SafeText.escaped(label(bird))) to pair with it\n")
            },
            cancel: { [self] in withdraw() })
    }

    private func ask(_ question: Question) {
        loop.assertInLoop()
        guard open == nil else { return waiting.append(question) }
        say(question.text)
        let reader = LineReader(fd: tty)
        let token = loop.watchReadable(tty) { [self] in
            let (lines, ended) = reader.read()
            guard let line = lines.first ?? (ended ? "" : nil) else { return }
            let reply = line.lowercased().trimmingSpaces
            finish(answering: reply == "y" || reply == "yes")
        }
        open = (question, token)
    }

    /// bluetoothd no longer waits for the answer (the pairing timed out or was cancelled).
    private func withdraw() {
        loop.assertInLoop()
        guard open != nil else { return }
        say("\nbirdctl: the question was withdrawn (the pairing was cancelled)\n")
        finish(answering: false)
    }

    private func finish(answering accepted: Bool) {
        guard let (question, token) = open else { return }
        loop.unwatch(token)
        open = nil
        question.answer(accepted)
        if !waiting.isEmpty { ask(waiting.removeFirst()) }
    }

    private func say(_ text: String) {
        let bytes = Array(text.utf8)
        _ = write(tty, bytes, bytes.count)
    }
}
