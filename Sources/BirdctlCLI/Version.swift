import BuildInfo

/// birdctl's version. The Makefile reads `number` and `date` from this file
/// (the .deb's version, the man page's date), so they are written once, here.
enum Version {
    static let number = "0.2.0"
    static let date = "2026-11-23"
    /// The git revision `make release` built from; empty in other builds.
    static let revision = String(cString: birdctl_revision())

    /// `birdctl 0.2.0 (git 1a2b3c4)`
    static var text: String {
        "birdctl \(number) (" + (revision.isEmpty ? "development build" : "git \(revision)") + ")"
    }
}
