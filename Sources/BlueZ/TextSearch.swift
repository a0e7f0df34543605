/// Finding a piece of text in BlueZ's error messages.
///
/// Not `contains(_:)` or `firstRange(of:)` with a String argument: those are
/// _StringProcessing's, and using either anywhere links that library and its
/// regex parser into birdctl (code a read maps, and more conformance records
/// for the Swift runtime to scan the first time it checks a type's
/// conformance; see docs/performance.md, 'What a read maps'). The install
/// test fails if they come back.
extension StringProtocol {
    /// The first occurrence of `part`.
    func firstOccurrence(of part: String) -> Range<Index>? {
        var start = startIndex
        while true {
            if self[start...].hasPrefix(part) { return start..<index(start, offsetBy: part.count) }
            if start == endIndex { return nil }
            start = index(after: start)
        }
    }

    /// Whether `part` occurs in this text.
    func includes(_ part: String) -> Bool { firstOccurrence(of: part) != nil }
}
