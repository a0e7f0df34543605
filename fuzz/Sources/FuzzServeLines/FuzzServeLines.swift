import Bird
import FuzzSupport

/// Any text as `serve` stdin lines: each is skipped, refused with a reason,
/// or assigns a value that the central would decode back to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServeLines(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        switch BirdAssignment.parse(String(line)) {
        case nil:
            break
        case .success(let value):
            let onTheAir = BirdCodec.encode(value)
            require(BirdCodec.decode(value.field, onTheAir) == .success(value), "\(line) → \(value)")
        case .failure(let problem):
            require(!problem.description.isEmpty)
        }
    }
    return 0
}
