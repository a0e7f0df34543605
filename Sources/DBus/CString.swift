import Glibc

/// A string kept as a NUL-terminated C string, made once. Signal routing
/// compares header fields with libdbus per notification; a Swift string
/// handed to C is copied into a temporary array on every call when it is
/// small (":1.42", "Disconnected"), which made those comparisons allocate.
public struct CString: Hashable, Sendable {
    let bytes: ContiguousArray<CChar>

    public init(_ string: String) {
        bytes = string.utf8CString
    }

    func withPointer<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        bytes.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// The length without the terminating NUL.
    var count: Int { bytes.count - 1 }
}

extension CString: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self.init(value) }
}
