import CLoop
import Glibc

extension EventLoop {
    /// Blocks these signals in the calling thread and every thread it creates
    /// afterwards, so that only `watchSignals` receives them. Call first thing
    /// in `main`, before any thread exists.
    public static func blockSignals(_ signals: [Int32]) {
        var mask = sigset_t()
        sigemptyset(&mask)
        for signal in signals { sigaddset(&mask, signal) }
        pthread_sigmask(SIG_BLOCK, &mask, nil)
    }

    /// Delivers these (blocked) signals to `handler` on the loop, through a
    /// signalfd. Loop only.
    public func watchSignals(_ signals: [Int32], handler: @escaping (Int32) -> Void) {
        assertInLoop()
        var mask = sigset_t()
        sigemptyset(&mask)
        for signal in signals { sigaddset(&mask, signal) }
        let fd = signalfd(-1, &mask, Int32(SFD_CLOEXEC | SFD_NONBLOCK))
        precondition(fd >= 0, "signalfd failed: errno \(errno)")
        watchReadable(fd) {
            var info = signalfd_siginfo()
            while read(fd, &info, MemoryLayout<signalfd_siginfo>.size) == MemoryLayout<signalfd_siginfo>.size {
                handler(Int32(info.ssi_signo))
            }
        }
    }
}
