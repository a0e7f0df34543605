import DBus
import FakeBlueZSupport
import Glibc
import Synchronization
import TestProcesses
import Testing

@testable import Proxy

/// Device Found events off the kernel's management channel, as the proxy
/// passes them on: the advertisement's bytes as they came off the air.
@Suite("Advertisements as the kernel reports them")
struct KernelAdvertisementTests {
    /// Flags, the Battery Service's UUID, the name "Cell": as a Bumble battery device advertises.
    static let data: [UInt8] = [0x02, 0x01, 0x06, 0x03, 0x03, 0x0F, 0x18, 0x05, 0x09] + Array("Cell".utf8)

    /// A Device Found event (0x0012) on adapter `index`.
    static func event(
        code: UInt16 = 0x0012, index: UInt16 = 1, type: UInt8 = 2, rssi: Int8 = -60, data: [UInt8] = data,
        lengthSaid: Int? = nil, dataLengthSaid: Int? = nil
    ) -> [UInt8] {
        func word(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }
        // F0:B1:7D:00:00:01, least significant octet first.
        let fields: [UInt8] = [0x01, 0x00, 0x00, 0x7D, 0xB1, 0xF0, type, UInt8(bitPattern: rssi), 0, 0, 0, 0]
            + word(dataLengthSaid ?? data.count) + data
        return word(Int(code)) + word(Int(index)) + word(lengthSaid ?? fields.count) + fields
    }

    @Test func anLEAdvertisementAsItCame() throws {
        let (adapter, advertisement) = try #require(KernelAdvertisement.parse(Self.event()))
        #expect(adapter == 1)
        #expect(advertisement.address == 0xF0B1_7D00_0001 && advertisement.addressType == 1 && advertisement.rssi == -60)
        #expect(Array(advertisement.data) == Self.data)
        let publicOne = try #require(KernelAdvertisement.parse(Self.event(type: 1)))
        #expect(publicOne.advertisement.addressType == 0)
    }

    @Test func otherEventsBREDRAndLengthsThatDoNotAddUpAreNone() {
        #expect(KernelAdvertisement.parse(Self.event(code: 0x0013)) == nil)
        #expect(KernelAdvertisement.parse(Self.event(type: 0)) == nil)
        #expect(KernelAdvertisement.parse(Self.event(lengthSaid: 40)) == nil)
        #expect(KernelAdvertisement.parse(Self.event(dataLengthSaid: 99)) == nil)
        #expect(KernelAdvertisement.parse(Array(Self.event().prefix(19))) == nil)
        #expect(KernelAdvertisement.parse([]) == nil)
    }

    /// Past the bound, the data is cut after the last whole AD structure that fits.
    @Test func longDataIsCutAtAWholeStructure() throws {
        let structure: [UInt8] = [30, 0xFF] + [UInt8](repeating: 0xAB, count: 29)
        let long = Array([[UInt8]](repeating: structure, count: 20).joined())
        let (_, advertisement) = try #require(KernelAdvertisement.parse(Self.event(data: long)))
        #expect(advertisement.data.count == 16 * 31)
        #expect(Array(advertisement.data) == Array(long.prefix(16 * 31)))
        // A structure whose length runs past the data's end ends what is kept there.
        let overrun = Array(long.prefix(16 * 31)) + [0xFF, 0x16] + [UInt8](repeating: 0, count: 100)
        let cut = try #require(KernelAdvertisement.parse(Self.event(data: overrun)))
        #expect(cut.advertisement.data.count == 16 * 31)
    }

    /// The channel as a socket pair: an adapter in use whose advertisement
    /// came from the kernel is covered (its rebuilt ones are not passed on),
    /// one not in use is ignored, another event is nothing; when the channel
    /// ends, no adapter is covered any more.
    @Test func anAdapterHeardThroughTheChannelIsCoveredUntilItEnds() async throws {
        var fds: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        let heard = Mutex<[UInt64]>([])
        let (channel, kernelSide) = (fds[0], fds[1])
        let kernel = try await loop.runAndWait {
            KernelAdvertisements(fd: channel, loop: loop, inUse: { $0 == 1 }, heard: { advertisement in
                heard.withLock { $0.append(advertisement.address) }
            })
        }
        for event in [Self.event(index: 2), Self.event(code: 0x000B), Self.event(index: 1)] {
            #expect(send(kernelSide, event, event.count, 0) == event.count)
        }
        #expect(await poll { heard.withLock { $0 } == [0xF0B1_7D00_0001] })
        #expect(try await loop.runAndWait { [kernel.covers(adapter: "/org/bluez/hci1"), kernel.covers(adapter: "/org/bluez/hci2")] } == [true, false])
        close(kernelSide)
        #expect(try await poll { try await loop.runAndWait { !kernel.covers(adapter: "/org/bluez/hci1") } })
        try await loop.runAndWait { kernel.close() }
    }
}
