@testable import Bird
import BlueZ
import DBus
import Testing

private let robinAddress: BluetoothAddress = "F0:0D:B1:7D:00:01"
private let wren: BluetoothAddress = "F0:0D:B1:7D:00:02"
private let otherAdapter: ObjectPath = "/org/bluez/hci1"

@Suite struct FleetMachinesTests {
    @Test func idsFollowTheOrderMachinesStartedInAndDropsKeepIt() {
        var machines = FleetMachines()
        let ids = (0..<5).map { _ in machines.add(Machine(.watch(reconnect: true)).central) }
        #expect(ids == [0, 1, 2, 3, 4])
        machines.drop(1)
        machines.drop(3)
        #expect(machines.map(\.id) == [0, 2, 4])
        #expect(machines.index(of: 4) == 2 && machines.index(of: 3) == nil && machines.index(of: 9) == nil)
        // An id is never given twice.
        #expect(machines.add(Machine().central) == 5)
    }

    @Test func aMachineFollowingABirdIsFoundByItsAddressUntilDropped() {
        var machines = FleetMachines()
        let id = machines.add(Machine().central, for: robinAddress, seen: birdSighting)
        #expect(machines.id(of: robinAddress) == id && machines.id(of: wren) == nil)
        #expect(machines.address(of: device) == robinAddress && machines.sightings[id] == birdSighting)
        machines.drop(id)
        #expect(machines.id(of: robinAddress) == nil && machines.sightings.isEmpty && machines.address(of: device) == nil)
    }

    @Test func onlyTheFirstScanOfAMachineLooksInTheCache() {
        var machines = FleetMachines()
        let id = machines.add(Machine().central)
        let (first, second) = (machines.firstLookUp(id), machines.firstLookUp(id))
        #expect(first && !second)
    }

    @Test func aNotificationGoesToTheMachineLinkedToItsDeviceRememberedUntilDropped() {
        var machines = FleetMachines()
        _ = machines.add(Machine().scanning().central)
        let linked = machines.add(Machine().connecting().central)
        let alpha = characteristics[.alpha]!
        let found = machines.owner(of: alpha)
        let again = machines.owner(of: alpha)
        #expect(found == machines.index(of: linked) && again == found)
        let nobodys = machines.owner(of: "/org/bluez/hci0/dev_F0_0D_B1_7D_00_02/service000a/char000f")
        #expect(nobodys == nil)
        machines.drop(linked)
        let dropped = machines.owner(of: alpha)
        #expect(dropped == nil)
    }

    @Test func linksUpCountLinksAndConnectsMadeButNotThoseWaiting() {
        var machines = FleetMachines()
        let connecting = machines.add(Machine().connecting().central)
        #expect(machines.linksUp(waiting: { _ in false }) == 1)
        #expect(machines.linksUp(waiting: { $0 == connecting }) == 0)
        // Its link up counts once; a link still going down on another adapter counts too.
        machines.linkUp(device)
        machines.linkUp(ObjectPath("\(otherAdapter)/dev_F0_0D_B1_7D_00_02"))
        #expect(machines.linksUp(waiting: { _ in false }) == 2)
        #expect(machines.linksUp(on: adapter.path, waiting: { _ in false }) == (1, 1))
        machines.linksGone(on: otherAdapter)
        #expect(machines.linksUp(on: otherAdapter, waiting: { _ in false }) == (0, 0))
        machines.linkDown(device)
        #expect(machines.linksUp(on: adapter.path, waiting: { _ in false }) == (1, 0))
        machines.linkUp(device)
        machines.linksGone(on: nil)
        #expect(machines.linked.isEmpty)
    }

    @Test func removingAllForgetsEveryMachineAndWhatWasKeptOfIt() {
        var machines = FleetMachines()
        let id = machines.add(Machine().connecting().central, for: robinAddress, seen: birdSighting)
        _ = machines.owner(of: characteristics[.alpha]!)
        machines.removeAll()
        #expect(machines.isEmpty && machines.id(of: robinAddress) == nil && machines.sightings[id] == nil)
        let lookUp = machines.firstLookUp(id)
        #expect(lookUp)
    }
}
