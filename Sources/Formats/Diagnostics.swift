import Glibc

/// Diagnostics to stderr, unbuffered (they are rare and must not be lost).
/// Messages quote peers (names, BlueZ's error texts, `--verbose` traffic), so
/// every message is escaped here, in one place; only birdctl's own styling
/// and usage texts are written as they are.
public enum Diagnostics {
    public static let isTTY = isatty(2) == 1
    public static let useColor = isTTY && getenv("NO_COLOR") == nil

    public static func say(_ text: String) {
        raw("birdctl: " + SafeText.escaped(text))
    }

    public static func error(_ text: String) {
        raw("birdctl: " + (useColor ? "\u{1B}[31merror:\u{1B}[0m " : "error: ") + SafeText.escaped(text))
    }

    /// A line (or block, like a usage text) of birdctl's own, as it is.
    public static func raw(_ text: String) {
        let line = Array((text + "\n").utf8)
        _ = write(2, line, line.count)
    }
}
