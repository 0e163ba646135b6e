// What a USB webcam's isochronous stream reserves of its bus, as uvcvideo picks the alternate setting (issue 36
// item 4), and the budget that counts it: the figures are the lab gadget's (3072 B per microframe).
import Testing
@testable import CoordCore

/// Descriptor bytes laid out as a UVC gadget's: device, configuration, then per function an association, the
/// control interface with its class header listing the streaming interface, and the streaming interface's
/// alternate settings (0 without an endpoint, the rest each with one isochronous IN endpoint).
func uvcDescriptors(functions: [(control: UInt8, streaming: UInt8, alts: [(mps: Int, interval: UInt8)])],
                    superSpeedBytes: [Int]? = nil, configurationValue: UInt8 = 1) -> [UInt8] {
    var body: [UInt8] = []
    for (f, function) in functions.enumerated() {
        body += [8, 0x0b, function.control, 2, 0x0e, 3, 0, 0]                           // interface association
        body += [9, 4, function.control, 0, 1, 0x0e, 1, 0, 0]                           // VC interface
        body += [13, 0x24, 1, 0x10, 0x01, 0x40, 0, 0x00, 0x6c, 0xdc, 0x02, 1, function.streaming]  // VC_HEADER
        body += [7, 5, 0x83 + UInt8(f), 3, 16, 0, 8]                                     // interrupt endpoint
        body += [9, 4, function.streaming, 0, 0, 0x0e, 2, 0, 0]                         // VS alt 0: no bandwidth
        body += [14, 0x24, 1, 1, 0, 0, 0x81, 0, 0, 0, 0, 0, 0, 0]                        // VS_INPUT_HEADER
        for (a, alt) in function.alts.enumerated() {
            body += [9, 4, function.streaming, UInt8(a + 1), 1, 0x0e, 2, 0, 0]
            body += [7, 5, 0x81 + UInt8(f), 0x05, UInt8(alt.mps & 0xff), UInt8(alt.mps >> 8), alt.interval]
            if let ss = superSpeedBytes?[a] { body += [6, 0x30, 0, 0, UInt8(ss & 0xff), UInt8(ss >> 8)] }
        }
    }
    let total = 9 + body.count
    let device: [UInt8] = [18, 1, 0x00, 0x02, 0xef, 2, 1, 64, 0x6b, 0x1d, 0x04, 0x01, 0, 1, 1, 2, 3, 1]
    return device + [9, 2, UInt8(total & 0xff), UInt8(total >> 8), UInt8(2 * functions.count), configurationValue, 0, 0xc0, 1] + body
}

@Suite struct UsbIsochronousTests {
    @Test func aHighBandwidthEndpointReservesItsPacketTimesItsMultiplierEveryMicroframe() {
        // The lab gadget's: 1024 B, two more transactions (bits 11-12 = 2), every microframe.
        let alt = UsbIsoAltSetting(alternateSetting: 1, endpointAddress: 0x81, wMaxPacketSize: 0x1400, bInterval: 1)
        #expect(alt.bytesPerInterval(.high) == 3072)
        #expect(alt.intervalSeconds(.high) == 125e-6)
        #expect(alt.bytesPerSecond(.high) == 24_576_000)
        // bInterval 4: every 2^3 microframes.
        let slow = UsbIsoAltSetting(alternateSetting: 1, endpointAddress: 0x81, wMaxPacketSize: 512, bInterval: 4)
        #expect(slow.bytesPerSecond(.high) == 512_000)
        // Full speed: 1 ms frames, no multiplier.
        let full = UsbIsoAltSetting(alternateSetting: 1, endpointAddress: 0x81, wMaxPacketSize: 1023, bInterval: 1)
        #expect(full.bytesPerSecond(.full) == 1_023_000)
        // SuperSpeed: the companion's bytes per interval.
        let ss = UsbIsoAltSetting(alternateSetting: 1, endpointAddress: 0x81, wMaxPacketSize: 1024, bInterval: 1, bytesPerIntervalSS: 24_576)
        #expect(ss.bytesPerSecond(.superSpeed) == 196_608_000)
    }

    @Test func theBusLeavesEightyPercentOfAMicroframeToPeriodicTransfers() {
        #expect(UsbSpeed.high.periodicBytesPerSecond == 48_000_000)
        #expect(UsbSpeed.full.periodicBytesPerSecond == 1_350_000)
        #expect(UsbSpeed(megabitsPerSecond: 480) == .high)
        #expect(UsbSpeed(megabitsPerSecond: 12) == .full)
        #expect(UsbSpeed(megabitsPerSecond: 7) == nil)
        // Two of the lab's webcams on one high-speed bus claim more than it has.
        #expect(2 * 24_576_000 > UsbSpeed.high.periodicBytesPerSecond)
    }

    @Test func uvcvideoPicksTheSmallestPacketAtLeastThePayload() throws {
        let sizes = [128, 512, 1024, 0x0c00 /* 2 × 1024 */, 1024]
        let stream = UsbIsoStream(speed: .high, altSettings: sizes.enumerated().map {
            UsbIsoAltSetting(alternateSetting: $0.offset + 1, endpointAddress: 0x81, wMaxPacketSize: $0.element, bInterval: 1)
        })
        #expect(stream.uvcChoice(payload: 600)?.alternateSetting == 5)   // 1024 twice: the later one, as `<=` keeps it
        #expect(stream.uvcChoice(payload: 512)?.alternateSetting == 2)
        #expect(stream.uvcChoice(payload: 0)?.alternateSetting == 1)     // null bandwidth: the lowest
        #expect(stream.uvcChoice(payload: 1025)?.bytesPerInterval(.high) == 2048)
        #expect(stream.uvcChoice(payload: 4000) == nil)                   // "No fast enough alt setting"
        // Without the payload, the node expects the largest.
        #expect(stream.worstCase?.alternateSetting == 4)
        #expect(stream.reservedBytesPerSecond == 2048 * 8000)
        #expect(UsbIsoStream(speed: .high, altSettings: []).reservedBytesPerSecond == 0)
    }

    @Test func theDescriptorsGiveEachControlInterfaceItsOwnStreamingSettings() throws {
        let bytes = uvcDescriptors(functions: [(0, 1, [(0x1400, 1)]), (2, 3, [(512, 1), (0x0a00, 1)])])
        let first = UsbDescriptors.uvcStreams(bytes, configuration: 1, controlInterface: 0)
        #expect(first == [1: [UsbIsoAltSetting(alternateSetting: 1, endpointAddress: 0x81, wMaxPacketSize: 0x1400, bInterval: 1)]])
        let second = try #require(UsbDescriptors.uvcStreams(bytes, controlInterface: 2)[3])
        #expect(second.map(\.alternateSetting) == [1, 2])
        #expect(UsbIsoStream(speed: .high, altSettings: second).reservedBytesPerSecond == 2 * 512 * 8000)
        // Without a control interface: every streaming interface.
        #expect(UsbDescriptors.uvcStreams(bytes).keys.sorted() == [1, 3])
        // A configuration that is not there: the first.
        #expect(UsbDescriptors.uvcStreams(bytes, configuration: 7, controlInterface: 0).keys.sorted() == [1])
    }

    @Test func aSuperSpeedCompanionGivesTheBytesPerInterval() throws {
        let bytes = uvcDescriptors(functions: [(0, 1, [(1024, 1)])], superSpeedBytes: [8192])
        let alts = try #require(UsbDescriptors.uvcStreams(bytes, controlInterface: 0)[1])
        #expect(alts.first?.bytesPerIntervalSS == 8192)
        #expect(UsbIsoStream(speed: .superSpeed, altSettings: alts).reservedBytesPerSecond == 8192 * 8000)
    }

    @Test(arguments: [[], [18, 1], [9, 2, 200, 0, 1, 1, 0, 0xc0], [1, 2, 3], [0, 0, 0, 0, 0, 0, 0, 0, 0]] as [[UInt8]])
    func malformedDescriptorsGiveNoStreams(bytes: [UInt8]) {
        #expect(UsbDescriptors.uvcStreams(bytes, controlInterface: 0).isEmpty)
    }

    @Test func truncatedDescriptorsKeepWhatWasWhole() {
        let bytes = uvcDescriptors(functions: [(0, 1, [(0x1400, 1)]), (2, 3, [(512, 1)])])
        for cut in stride(from: 0, to: bytes.count, by: 7) {
            _ = UsbDescriptors.uvcStreams(Array(bytes[..<cut]), controlInterface: 2)  // never traps
        }
    }
}
