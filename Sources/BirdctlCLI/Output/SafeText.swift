/// Text from a peer (advertised names, GATT values, error messages that quote
/// them) made safe to print. Any phone in range chooses its own name: written
/// raw, `ESC [ 2 J` clears the screen, `ESC ] 52` writes the clipboard on some
/// terminals, U+009B is a one-character CSI, and bidi overrides make text read
/// differently from what it is. Every such scalar is written visibly escaped,
/// on stdout and stderr, to a terminal or not; JSON escapes the same set as
/// `\uXXXX` (`JSONObject.quoted`).
public enum SafeText {
    /// Scalars that must never reach a terminal or a text stream raw.
    public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true  // C0, DEL, C1
        case 0x061C, 0x200E, 0x200F: true  // bidi marks (Arabic letter mark, LRM, RLM)
        case 0x2028, 0x2029: true  // line and paragraph separators
        case 0x202A...0x202E, 0x2066...0x2069: true  // bidi embeddings, overrides, isolates
        default: false
        }
    }

    /// `text` with every unsafe scalar escaped: `\t`, `\n`, `\r`, `\x1b` below
    /// U+0080, `\u009b` and `\u202e` above. Text without one comes back as it
    /// is (the common case, checked first), and escaping twice changes nothing.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard isUnsafe(scalar) else {
                out.append(scalar)
                continue
            }
            switch scalar {
            case "\t": out.append(contentsOf: #"\t"#.unicodeScalars)
            case "\n": out.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": out.append(contentsOf: #"\r"#.unicodeScalars)
            default:
                let short = scalar.value < 0x80
                out.append(contentsOf: (short ? #"\x"# : #"\u"#).unicodeScalars)
                out.append(contentsOf: hex(scalar.value, digits: short ? 2 : 4).unicodeScalars)
            }
        }
        return String(out)
    }

    /// `value` as lower-case hex, zero-padded to `digits`.
    static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
