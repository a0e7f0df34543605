import Bird
import BlueZ
import Gateway
import Testing

private let robin: BluetoothAddress = "F0:0D:B1:7D:00:01"
private let half = BirdValue.alpha(percent: 50)

@Suite("Writes from MQTT, through events")
struct GatewayCommandsTests {
    private func streaming() -> GatewayCommands {
        var commands = GatewayCommands(.init(timeToLive: .seconds(10)))
        _ = commands.streams(robin)
        return commands
    }

    @Test func aWriteForAStreamingBirdGoesOutAtOnceAndItsAnswerIsTheResult() {
        var commands = streaming()
        #expect(commands.requested(robin, .alpha, .success(half), now: .zero) == [.write(address: robin, half)])
        #expect(commands.written(robin, half, failure: nil) == [.result(address: robin, .alpha, .written(half))])
        #expect(!commands.hasPending)
        // A refusal is the result too.
        _ = commands.requested(robin, .alpha, .success(half), now: .zero)
        let refused = BlueZError(.notPermitted, name: "org.bluez.Error.NotPermitted", message: "Not permitted")
        #expect(commands.written(robin, half, failure: refused) == [.result(address: robin, .alpha, .failed("\(refused)"))])
    }

    @Test func twoFieldsOfOneBirdAreWrittenOneAfterTheOther() {
        var commands = streaming()
        let wren = BirdValue.name("Wren")
        #expect(commands.requested(robin, .name, .success(wren), now: .zero) == [.write(address: robin, wren)])
        #expect(commands.requested(robin, .alpha, .success(half), now: .zero) == [])
        #expect(commands.written(robin, wren, failure: nil) == [
            .result(address: robin, .name, .written(wren)), .write(address: robin, half),
        ])
    }

    @Test func aBadValueIsAResultAtOnce() {
        var commands = streaming()
        let bad = BirdCodec.parse(.color, "purple")
        let actions = commands.requested(robin, .color, bad, now: .zero)
        #expect(actions.count == 1)
        guard case .result(robin, .color, .failed(let reason))? = actions.first else {
            Issue.record("\(actions)")
            return
        }
        #expect(reason.contains("not a hex colour"), "\(reason)")
        #expect(!commands.hasPending)
    }

    @Test func aWriteWaitsForItsBirdThenGoesOnceOrFailsAfterItsTimeToLive() {
        var commands = GatewayCommands(.init(timeToLive: .seconds(10)))
        #expect(commands.requested(robin, .alpha, .success(half), now: .zero) == [])
        #expect(commands.tick(now: .seconds(9)) == [])
        #expect(commands.streams(robin) == [.write(address: robin, half)])
        #expect(commands.streams(robin) == [])  // in flight: once
        var late = GatewayCommands(.init(timeToLive: .seconds(10)))
        _ = late.requested(robin, .alpha, .success(half), now: .zero)
        #expect(late.tick(now: .seconds(10)) == [.result(address: robin, .alpha, .failed("the bird was not connected in time"))])
        #expect(late.streams(robin) == [])
    }

    @Test func aNewerValueReplacesOneWaitingAndFollowsOneInFlight() {
        var waiting = GatewayCommands()
        _ = waiting.requested(robin, .alpha, .success(half), now: .zero)
        #expect(waiting.requested(robin, .alpha, .success(.alpha(percent: 20)), now: .zero) == [
            .result(address: robin, .alpha, .failed("replaced by a newer value"))
        ])
        #expect(waiting.streams(robin) == [.write(address: robin, .alpha(percent: 20))])

        var inFlight = streaming()
        _ = inFlight.requested(robin, .alpha, .success(half), now: .zero)
        #expect(inFlight.requested(robin, .alpha, .success(.alpha(percent: 20)), now: .zero) == [])
        #expect(inFlight.written(robin, half, failure: nil) == [
            .result(address: robin, .alpha, .written(half)), .write(address: robin, .alpha(percent: 20)),
        ])
    }

    @Test func aLostLinkFailsTheWriteInFlightAndAHandoverFailsEveryWrite() {
        var commands = streaming()
        _ = commands.requested(robin, .alpha, .success(half), now: .zero)
        #expect(commands.disconnected(robin) == [
            .result(address: robin, .alpha, .failed("the link was lost before the bird answered"))
        ])
        _ = commands.requested(robin, .name, .success(.name("Wren")), now: .zero)
        #expect(commands.handedOver(robin) == [.result(address: robin, .name, .failed("another gateway holds the bird now"))])
        #expect(!commands.hasPending)
    }

    @Test func writesWaitingForABirdAnotherGatewayCameToHoldGoWithoutAResult() {
        var commands = GatewayCommands()
        _ = commands.requested(robin, .alpha, .success(half), now: .zero)
        commands.answeredElsewhere(robin)
        #expect(!commands.hasPending)
        #expect(commands.tick(now: .seconds(3600)) == [])
    }

    @Test(arguments: [BlueZError.Kind.notReady, .inProgress])
    func aWriteRefusedAsNotReadyOrBusyIsTriedAgainAtTheNextReading(_ kind: BlueZError.Kind) {
        var commands = streaming()
        _ = commands.requested(robin, .alpha, .success(half), now: .zero)
        #expect(commands.written(robin, half, failure: BlueZError(kind, message: "not now")) == [])
        #expect(commands.streams(robin) == [.write(address: robin, half)])
    }

    @Test func aWriteNoMachineCouldCarryOutWaitsForTheNextReading() {
        var commands = streaming()
        #expect(commands.requested(robin, .alpha, .success(half), now: .zero) == [.write(address: robin, half)])
        #expect(commands.notWritten(robin, half) == [])
        #expect(commands.hasPending)
        #expect(commands.streams(robin) == [.write(address: robin, half)])
    }

    @Test func aPayloadIsDecodedWithSetsRulesAndRefusedUnreadAboveItsBound() throws {
        var commands = streaming()
        #expect(commands.requested(robin, .alpha, payload: Array("50".utf8), now: .zero) == [.write(address: robin, half)])
        let tooLong = commands.requested(robin, .name, payload: Array(repeating: UInt8(ascii: "a"), count: 1025), now: .zero)
        guard case .result(_, .name, .failed(let reason))? = tooLong.first else { Issue.record("\(tooLong)"); return }
        #expect(tooLong.count == 1 && reason.contains("over 1024 bytes"))
        let bad = commands.requested(robin, .color, payload: Array("purple".utf8), now: .zero)
        #expect(bad.count == 1 && { if case .result(_, .color, .failed) = bad[0] { true } else { false } }())
    }

    @Test func birdsWithWritesWaitingAreBounded() {
        var commands = GatewayCommands(.init(maximumBirds: 2))
        for index in 1...2 { _ = commands.requested(BluetoothAddress(value: 0xF00D_B17D_0000 + UInt64(index))!, .alpha, .success(half), now: .zero) }
        #expect(commands.requested("F0:0D:B1:7D:00:09", .alpha, .success(half), now: .zero) == [
            .result(address: "F0:0D:B1:7D:00:09", .alpha, .failed("too many birds with writes waiting"))
        ])
    }
}
