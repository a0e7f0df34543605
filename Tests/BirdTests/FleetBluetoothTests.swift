@testable import Bird
import BlueZ
import DBus
import Testing

private let off = AdapterChoice(path: "/org/bluez/hci0", name: "hci0", powered: false)

@Suite struct FleetBluetoothTests {
    @Test func withoutAUsableAdapterBeforeEverReadyTheCommandFailsAfterItWaits() {
        var bluetooth = FleetBluetooth()
        #expect(bluetooth.ready(requested: "hci3") == .failed(.noAdapter("hci3")))
        bluetooth.adapter = off
        #expect(bluetooth.ready(requested: nil) == .failed(.adapterOff("hci0")))
        bluetooth.adapter = adapter
        #expect(bluetooth.ready(requested: nil) == .discovery(first: true))
        bluetooth.lost(off)
        #expect(!bluetooth.discovering && bluetooth.everReady && bluetooth.adapter == off)
        #expect(bluetooth.ready(requested: nil) == .nothing)
    }

    @Test func discoveryGoesOnOnceAndAgainAfterALoss() {
        var bluetooth = FleetBluetooth()
        bluetooth.adapter = adapter
        let first = bluetooth.ready(requested: nil)
        let twice = bluetooth.ready(requested: nil)
        #expect(first == .discovery(first: true) && twice == .nothing && bluetooth.discovering)
        bluetooth.lost(nil)
        #expect(bluetooth.adapter == nil && !bluetooth.discovering)
        bluetooth.adapter = adapter
        #expect(bluetooth.ready(requested: nil) == .discovery(first: false))
    }

    /// A window in which a bird is looked for and hci0, which heard a Bird
    /// before, hears none: deaf, unless it went (its past forgotten) or the
    /// fleet's discovery is off.
    @Test func theWatchdogHearsOnlyLiveAdvertisementsAndForgetsAnAdapterGone() {
        var bluetooth = FleetBluetooth(watchdog: .seconds(60))
        bluetooth.adapter = adapter
        _ = bluetooth.ready(requested: nil)
        let adapters = [adapter.path]
        _ = bluetooth.windowEnded(adapters, lookingFor: true)
        bluetooth.heard(birdSighting, live: true)
        #expect(bluetooth.windowEnded(adapters, lookingFor: true)?.isEmpty == true)
        // From BlueZ's cache, or without an RSSI: no sign that the adapter hears.
        bluetooth.heard(birdSighting, live: false)
        var quiet = birdSighting
        quiet.rssi = nil
        bluetooth.heard(quiet, live: true)
        #expect(bluetooth.windowEnded(adapters, lookingFor: true)?.map(\.adapter) == adapters)
        bluetooth.lost(adapter)
        #expect(bluetooth.windowEnded(adapters, lookingFor: true)?.isEmpty == true)
        bluetooth.adapter = adapter
        _ = bluetooth.ready(requested: nil)
        #expect(bluetooth.windowEnded(adapters, lookingFor: true)?.map(\.adapter) == adapters)
        bluetooth.lost(nil)
        bluetooth.adapter = adapter
        _ = bluetooth.ready(requested: nil)
        #expect(bluetooth.windowEnded(adapters, lookingFor: true)?.isEmpty == true)
    }

    @Test func withoutAWatchdogNoWindowEnds() {
        var bluetooth = FleetBluetooth()
        bluetooth.adapter = adapter
        _ = bluetooth.ready(requested: nil)
        #expect(bluetooth.windowEnded([adapter.path], lookingFor: true) == nil && bluetooth.watchdog == nil)
    }
}
