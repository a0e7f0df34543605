/// A closure that runs at most once, whichever caller comes first (loop-confined).
final class Once: @unchecked Sendable {
    private var body: (() -> Void)?
    init(_ body: @escaping () -> Void) { self.body = body }
    func run() {
        let body = self.body
        self.body = nil
        body?()
    }
}
