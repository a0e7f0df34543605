import Bird
import FuzzSupport

/// Any bytes, as each field: a value decodes or is an error naming the field
/// and carrying the exact bytes; a decoded value re-encodes to bytes that
/// decode to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBirdValues(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for field in BirdField.allCases {
        switch BirdCodec.decode(field, bytes) {
        case .success(let value):
            require(value.field == field, "\(field) decoded as \(value.field)")
            let encoded = BirdCodec.encode(value)
            let again = BirdCodec.decode(field, encoded)
            require(again == .success(value), "\(field) \(hexString(bytes)): \(value) → \(again)")
            require(encoded.count <= BirdCodec.maximumLength, "\(value) encodes to \(encoded.count) bytes")
            if case .alpha(let percent) = value { require(percent <= 100) }
            _ = value.text
        case .failure(let error):
            require(error.field == field && error.raw == bytes, "\(error) lost the field or the bytes")
            require(error.rawHex == hexString(bytes))
            _ = error.description
        }
    }
    return 0
}
