import BirdctlCLI
import DBus
import Glibc

// birdctl with the proxy linked (see `ProxyEngine`): birdctl runs this in
// its place for `watch --all --proxy`; otherwise the same as birdctl.
ProxyEngines.installed = LinkedProxyEngine.self
EventLoop.blockSignals([SIGINT, SIGTERM])
signal(SIGPIPE, SIG_IGN)

exit(Birdctl.run(Array(CommandLine.arguments.dropFirst())))
