/// Writes asked of a watch on the links it holds (the MQTT gateway's
/// `…/set` commands): the answer is the machine's `written` report.
extension BirdFleet {
    /// The bird at `address` is written `value` on the link a machine holds;
    /// nil (and nothing done) if none has a link to it.
    public mutating func writeRequested(_ address: BluetoothAddress, _ value: BirdValue) -> [Action]? {
        guard outcome == nil, let id = machines.first(where: { $0.central.linkedAddress == address })?.id else { return nil }
        return on(id) { $0.writeRequested(value) }
    }
}
