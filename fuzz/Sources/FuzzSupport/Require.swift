/// A broken invariant: a crash libFuzzer keeps, with a message that
/// survives -O (precondition's does not).
public func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
    if !condition { fatalError(message()) }
}
