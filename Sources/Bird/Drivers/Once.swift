/// A closure that runs at most once, whichever caller comes first (loop-confined).
public final class Once: @unchecked Sendable {
    private var body: (() -> Void)?
    public init(_ body: @escaping () -> Void) { self.body = body }
    public func run() {
        let body = self.body
        self.body = nil
        body?()
    }
}
