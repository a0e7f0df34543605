/// Text from a peer (advertised names, GATT values, error messages that quote
/// them) made safe to print. Any phone in range chooses its own name: written
/// raw, `ESC [ 2 J` clears the screen, `ESC ] 52` writes the clipboard on some
/// terminals, U+009B is a one-character CSI, bidi overrides make text read
/// differently from what it is, and invisible format characters (U+200B, a
/// soft hyphen, tag characters) make one name look like another. Every such
/// scalar is written visibly escaped, on stdout and stderr, to a terminal or
/// not; JSON escapes the same set as `\uXXXX` (`JSONObject.quoted`).
///
/// The rule, reversible: a backslash from the peer is written `\\`, so every
/// other backslash in the output starts an escape birdctl wrote — `\t`, `\n`,
/// `\r`, `\xHH` (below U+0080), `\uHHHH`, `\u{HHHHH}` (above U+FFFF). A peer
/// that names itself `\x1b` is shown as `\\x1b`, never like an escaped ESC.
public enum SafeText {
    /// Scalars that must never reach a terminal or a text stream raw.
    public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x20..<0x7F: false  // printable ASCII, the common case
        case 0x00...0x1F, 0x7F...0x9F: true  // C0, DEL, C1
        case 0x2028, 0x2029: true  // line and paragraph separators
        // Format characters (Unicode category Cf): bidi marks, embeddings,
        // overrides and isolates, zero-width spaces and joiners, the soft
        // hyphen, word joiner and invisible operators (U+2060–2064), the
        // byte-order mark U+FEFF, tag characters (U+E0000–E007F)…
        default: scalar.properties.generalCategory == .format
        }
    }

    /// `text` with every backslash doubled and every unsafe scalar escaped:
    /// `\t`, `\n`, `\r`, `\x1b` below U+0080, `\u009b` and `\u202e` up to
    /// U+FFFF, `\u{e0041}` above. Text without either comes back as it is
    /// (the common case, checked first).
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0 == "\\" || isUnsafe($0) }) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                out.append(contentsOf: #"\\"#.unicodeScalars)
                continue
            }
            guard isUnsafe(scalar) else {
                out.append(scalar)
                continue
            }
            switch scalar {
            case "\t": out.append(contentsOf: #"\t"#.unicodeScalars)
            case "\n": out.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": out.append(contentsOf: #"\r"#.unicodeScalars)
            default:
                let escape =
                    scalar.value < 0x80 ? #"\x"# + hex(scalar.value, digits: 2)
                    : scalar.value <= 0xFFFF ? #"\u"# + hex(scalar.value, digits: 4)
                    : #"\u{"# + hex(scalar.value, digits: 1) + "}"
                out.append(contentsOf: escape.unicodeScalars)
            }
        }
        return String(out)
    }

    /// `value` as lower-case hex, zero-padded to `digits`.
    public static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
