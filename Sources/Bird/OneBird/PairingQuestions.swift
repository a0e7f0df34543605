/// What a pairing may ask of a person (`--confirm-pairing`), about the bird
/// being paired: bluetoothd's questions to our agent, named by the device
/// they concern. Called on the loop.
public struct PairingQuestions: Sendable {
    /// Does the bird show this passkey (six digits)? Answer once, now or later.
    public var confirm: @Sendable (_ bird: BirdCentral.Peripheral, _ passkey: String, _ answer: @escaping @Sendable (Bool) -> Void) -> Void
    /// Type this passkey or PIN on the bird.
    public var display: @Sendable (_ bird: BirdCentral.Peripheral, _ code: String) -> Void
    /// bluetoothd withdrew the question it asked last.
    public var cancel: @Sendable () -> Void

    public init(
        confirm: @escaping @Sendable (BirdCentral.Peripheral, String, @escaping @Sendable (Bool) -> Void) -> Void,
        display: @escaping @Sendable (BirdCentral.Peripheral, String) -> Void, cancel: @escaping @Sendable () -> Void
    ) {
        self.confirm = confirm
        self.display = display
        self.cancel = cancel
    }
}
