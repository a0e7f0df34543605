import BirdctlCLI
import DBus
import Glibc

// Signals are received through a signalfd on the event loop; block them before
// any thread exists so no other thread takes them. A closed stdout must give
// EPIPE, not kill us.
EventLoop.blockSignals([SIGINT, SIGTERM])
signal(SIGPIPE, SIG_IGN)

exit(Birdctl.run(Array(CommandLine.arguments.dropFirst())))
