// The pure parts of the GenICam camera: pixel formats to yuv420p (Bayer demosaic), the device-clock line and the
// formats a camera offers the planner. No camera needed.
import CoordCore
import Pixels
import Testing
@testable import GenICam

private func convert(_ bytes: [UInt8], _ format: GenICamPixelFormat, width: Int, height: Int) -> PlanarFrame? {
    let frame = PlanarFrame(width: width, height: height)
    let ok = bytes.withUnsafeBytes { GenICamConversion.convert($0, format: format, into: frame) }
    return ok ? frame : nil
}

/// A Bayer mosaic of one flat colour, in the order `format` names.
private func mosaic(_ format: GenICamPixelFormat, width: Int, height: Int, rgb: (UInt8, UInt8, UInt8)) -> [UInt8] {
    let cell = format.bayerCell!
    return (0..<(width * height)).map { i in
        let x = i % width, y = i / width
        switch cell[(y & 1) * 2 + (x & 1)] {
        case 0: return rgb.0
        case 1: return rgb.1
        default: return rgb.2
        }
    }
}

@Suite struct GenICamPixelTests {
    @Test func mono8IsGreyWithLimitedRangeLuma() throws {
        let frame = try #require(convert([0, 255, 128, 64, 0, 255, 128, 64], .mono8, width: 4, height: 2))
        #expect(Array(frame.luma) == [16, 235, 126, 71, 16, 235, 126, 71])
        #expect(frame.cb.allSatisfy { $0 == 128 } && frame.cr.allSatisfy { $0 == 128 })
    }

    @Test func mono16TakesItsHighByte() throws {
        // Little-endian 0xFF00 and 0x0080: white and black.
        let frame = try #require(convert([0x00, 0xFF, 0x80, 0x00, 0x00, 0xFF, 0x80, 0x00], .mono16, width: 2, height: 2))
        #expect(Array(frame.luma) == [235, 16, 235, 16])
    }

    @Test func shortBufferIsRefusedAndTheFrameUntouched() {
        #expect(convert([UInt8](repeating: 0, count: 10), .rgb8, width: 4, height: 2) == nil)
        #expect(convert([UInt8](repeating: 0, count: 7), .mono8, width: 4, height: 2) == nil)
    }

    @Test(arguments: [(UInt8(255), UInt8(0), UInt8(0)), (0, 255, 0), (0, 0, 255), (200, 200, 200)])
    func rgb8AndEveryBayerOrderAgreeOnAFlatColour(r: UInt8, g: UInt8, b: UInt8) throws {
        let width = 8, height = 6
        let rgb = try #require(convert((0..<(width * height)).flatMap { _ in [r, g, b] }, .rgb8, width: width, height: height))
        // BT.601 limited range of the colour itself.
        let y = 16 + (66 * Int(r) + 129 * Int(g) + 25 * Int(b) + 128) >> 8
        #expect(rgb.luma.allSatisfy { Int($0) == y })
        for format in [GenICamPixelFormat.bayerRG8, .bayerGR8, .bayerGB8, .bayerBG8] {
            let bayer = try #require(convert(mosaic(format, width: width, height: height, rgb: (r, g, b)), format, width: width, height: height))
            // A flat colour demosaics to itself everywhere, edges included.
            #expect(Array(bayer.luma) == Array(rgb.luma), "\(format)")
            #expect(Array(bayer.cb) == Array(rgb.cb), "\(format)")
            #expect(Array(bayer.cr) == Array(rgb.cr), "\(format)")
        }
    }

    @Test func bayerOrderMatters() throws {
        // A red mosaic read as blue-first is blue: the order is not ignored.
        let red = mosaic(.bayerRG8, width: 4, height: 4, rgb: (255, 0, 0))
        let asRG = try #require(convert(red, .bayerRG8, width: 4, height: 4))
        let asBG = try #require(convert(red, .bayerBG8, width: 4, height: 4))
        #expect(asRG.cr[0] > 200 && asRG.cb[0] < 128)
        #expect(asBG.cb[0] > 200 && asBG.cr[0] < 128)
    }

    @Test func formatsByNameAndCode() {
        #expect(GenICamPixelFormat(name: "RGB8Packed") == .rgb8)
        #expect(GenICamPixelFormat(name: "YUV422Packed") == nil)
        #expect(GenICamPixelFormat(code: 0x0108_0009) == .bayerRG8)
        #expect(GenICamPixelFormat.preferred(among: ["Mono16", "Mono8", "BayerGB8"]) == .bayerGB8)
        #expect(GenICamPixelFormat.preferred(among: ["Mono16", "Mono8"]) == .mono8)
        #expect(GenICamPixelFormat.preferred(among: ["YUV422Packed"]) == nil)
        #expect(GenICamPixelFormat.rgb8.name(among: ["Mono8", "RGB8Packed"]) == "RGB8Packed")
        #expect(GenICamPixelFormat.mono16.imageBytes(width: 640, height: 480) == 614_400)
    }
}

@Suite struct GenICamSequenceTests {
    @Test func blockIDsUnwrapPastGigEVisionsSixteenBits() {
        #expect(GenICamCamera.sequenceStep(from: 65_401, to: 65_402) == 1)
        #expect(GenICamCamera.sequenceStep(from: 65_534, to: 65_535) == 1)
        // 65535 → 1 (0 is skipped) is one frame; 65535 → 3 lost two.
        #expect(GenICamCamera.sequenceStep(from: 65_535, to: 1) == 1)
        #expect(GenICamCamera.sequenceStep(from: 65_535, to: 3) == 3)
        #expect(GenICamCamera.sequenceStep(from: 65_530, to: 2) == 7)
        // USB3 Vision's 64-bit ids just count; a restart counts as the next frame.
        #expect(GenICamCamera.sequenceStep(from: 1_000_000, to: 1_000_004) == 4)
        #expect(GenICamCamera.sequenceStep(from: 500, to: 1) == 1)
    }
}

@Suite struct DeviceClockFitTests {
    /// Frames every 20 ms on a device clock 50 ppm slow and 3 s off, arriving 1.1–1.4 ms late (readout, transfer), one
    /// of them only 1 ms.
    @Test func findsTheRateAndTheLeastDelayedArrival() throws {
        var fit = DeviceClockFit()
        var random = SeededRandom(seed: 7)
        let offset = 3_000_000.0, rate = 1 + 50e-6
        for k in 0..<200 {
            let device = 1e12 + Double(k) * 20_000
            let delay = k == 120 ? 1_000 : Double.random(in: 1_100...1_400, using: &random)
            fit.add(deviceMicroseconds: device, arrivedLocal: offset + (device - 1e12) * rate + delay)
        }
        #expect(abs(fit.rateErrorPPM - 50) < 20)
        // The line runs through the soonest arrival: the truth plus 1 ms, within what the rate error adds.
        let mapped = try #require(fit.local(ofDevice: 1e12 + 120 * 20_000))
        #expect(abs(mapped - (offset + 120 * 20_000 * rate + 1_000)) < 50)
    }

    @Test func shortSpansKeepTheNominalRate() {
        var fit = DeviceClockFit()
        #expect(fit.local(ofDevice: 5) == nil)
        for k in 0..<10 { fit.add(deviceMicroseconds: Double(k) * 10_000, arrivedLocal: Double(k) * 10_000 * 1.01 + 500) }
        #expect(fit.slope == 1)
        #expect(fit.local(ofDevice: 0) == 500)
    }

    @Test func aWildSlopeIsLimitedToACrystalsError() {
        var fit = DeviceClockFit(capacity: 32)
        for k in 0..<100 { fit.add(deviceMicroseconds: Double(k) * 100_000, arrivedLocal: Double(k) * 100_000 * 1.5) }
        #expect(fit.count == 32)
        #expect(abs(fit.rateErrorPPM - 1000) < 1e-6)
    }
}

@Suite struct GenICamDescriptionTests {
    private let fake = GenICamDescription(
        identity: DeviceIdentity(driver: "aravis", transport: "GigEVision", vendor: "Aravis", model: "Fake", serial: "GV01"),
        pixelFormats: ["Mono8", "Mono16", "BayerGR8", "YUV422Packed"], widthRange: 1...2048, heightRange: 1...2048,
        frameRateRange: 1...100, controlRanges: ControlRanges())

    @Test func offersCommonSizesInRangeAndItsLargest() {
        let formats = fake.handshakeFormats
        #expect(formats.allSatisfy { $0.pixelFormat == "BayerGR8" && $0.minFramePeriodMicroseconds == 10_000 && $0.maxFramePeriodMicroseconds == 1_000_000 })
        let sizes = formats.map { "\($0.width)x\($0.height)" }
        #expect(sizes.contains("320x240") && sizes.contains("1920x1080") && sizes.contains("2048x2048"))
        #expect(!sizes.contains("2448x2048"))
        // The planner accepts 640x480 at 30 fps and refuses 200 fps with the camera's fastest.
        let caps = CameraCapabilities(name: "cam0", source: "genicam", formats: formats, codecs: [.ffv1])
        #expect(CameraSettings(camera: "cam0", ordinal: 0, width: 640, height: 480, fps: 30, codec: .ffv1).problem(on: "n", with: caps) == nil)
        #expect(CameraSettings(camera: "cam0", ordinal: 0, width: 640, height: 480, fps: 200, codec: .ffv1).problem(on: "n", with: caps)?
            .contains("fastest is 100 fps") == true)
    }

    @Test func listingMarksWhatIsRecorded() {
        let device = GenICamDevice(deviceID: "Aravis-Fake-GV01", protocolName: "GigEVision", vendor: "Aravis", model: "Fake",
                                   serial: "GV01", address: "127.0.0.1")
        let lines = fake.lines(device: device)
        #expect(lines.first == "genicam Aravis-Fake-GV01")
        #expect(lines.contains("    BayerGR8 (recorded)"))
        #expect(lines.contains("    YUV422Packed — not recordable by coord"))
        #expect(fake.formatProblem(deviceID: "x") == nil)
        var mono = fake
        mono.pixelFormats = ["YUV422Packed"]
        #expect(mono.handshakeFormats.isEmpty)
        #expect(mono.formatProblem(deviceID: "x")?.contains("offers no pixel format coord can record") == true)
    }
}

@Suite struct GenICamBudgetTests {
    /// `count` GenICam cameras on one node, all on bus `bus`, Bayer at `size` and `fps`.
    private func node(_ count: Int, bus: Bus, width: Int, height: Int, fps: Int, format: String = "BayerRG8") -> PlannedNode {
        let formats = [CameraFormat(pixelFormat: format, width: width, height: height, minFramePeriodMicroseconds: 1_000,
                                    maxFramePeriodMicroseconds: 1_000_000)]
        let cameras = (0..<count).map { i in
            PlannedCamera(node: "n1", settings: CameraSettings(camera: "mv\(i)", ordinal: i, width: width, height: height, fps: fps, codec: .ffv1),
                          capabilities: CameraCapabilities(name: "mv\(i)", source: "genicam", formats: formats, codecs: [.ffv1], bus: bus.id))
        }
        return PlannedNode(name: "n1", resources: NodeResources(buses: [bus]), cameras: cameras)
    }

    @Test func aGigELinkIsNinetyPercentOfItsRateAndGuessesGigabitWhenTheNICDoesNotSay() {
        #expect(Bus.gigE(interface: "eth1", megabitsPerSecond: 1000) == Bus(id: "gige-eth1", kind: "gige", bandwidthBytesPerSecond: 112_500_000))
        #expect(Bus.gigE(interface: "lo", megabitsPerSecond: nil).bandwidthBytesPerSecond == 112_500_000)
        #expect(Bus.gigE(interface: "enp1s0", megabitsPerSecond: 10_000).kind == "10gige")
        #expect(Bus.usb3Vision(id: "Basler-1").bandwidthBytesPerSecond == 400e6)
        #expect(PixelFormats.bytesPerPixel("BayerGR8") == 1 && PixelFormats.bytesPerPixel("Mono16") == 2 && PixelFormats.bytesPerPixel("RGB8") == 3)
    }

    @Test func camerasOnOneNICAreSummedAgainstItsLink() throws {
        let link = Bus.gigE(interface: "eth1", megabitsPerSecond: 1000)
        // One 1920x1200 Bayer camera at 40 fps: 92 MB/s of 112.5, fits; two on one NIC: 184 MB/s, refused.
        #expect(Budget.evaluate([node(1, bus: link, width: 1920, height: 1200, fps: 40)]).fits)
        let two = Budget.evaluate([node(2, bus: link, width: 1920, height: 1200, fps: 40)])
        #expect(!two.fits)
        let refusal = try #require(two.refusal())
        #expect(refusal.contains("bus gige-eth1 (gige)"), "\(refusal)")
        // One camera in RGB8 needs three times the bytes: the format is what the link carries.
        let rgb = Budget.evaluate([node(1, bus: link, width: 1920, height: 1200, fps: 40, format: "RGB8")])
        #expect(!rgb.fits)
        // USB3 Vision: 400 MB/s carries the two Bayer cameras.
        #expect(Budget.evaluate([node(2, bus: .usb3Vision(id: "u"), width: 1920, height: 1200, fps: 40)]).fits)
    }
}

@Suite struct GenICamSizeRangeTests {
    private func camera(widths: ClosedRange<Int>, heights: ClosedRange<Int>, widthStep: Int, heightStep: Int) -> GenICamDescription {
        GenICamDescription(identity: DeviceIdentity(driver: "aravis", transport: "GigEVision"), pixelFormats: ["BayerRG8"],
                           widthRange: widths, heightRange: heights, widthStep: widthStep, heightStep: heightStep,
                           frameRateRange: 1...100, controlRanges: ControlRanges())
    }
    private func settings(_ width: Int, _ height: Int) -> CameraSettings {
        CameraSettings(camera: "cam0", ordinal: 0, width: width, height: height, fps: 30, codec: .ffv1)
    }
    private func capabilities(_ d: GenICamDescription) -> CameraCapabilities {
        CameraCapabilities(name: "cam0", source: "genicam", device: "Aravis-Fake-GV01", formats: d.handshakeFormats, codecs: [.ffv1])
    }

    @Test func anySizeInsideTheRangesPlansTheFakesOwn512x512Included() {
        let fake = capabilities(camera(widths: 1...2048, heights: 1...2048, widthStep: 1, heightStep: 1))
        for (w, h) in [(512, 512), (104, 64), (2048, 2048), (1000, 750), (2046, 66)] {
            #expect(settings(w, h).problem(on: "n1", with: fake) == nil, "\(w)x\(h)")
        }
    }

    @Test func aSizeOutsideTheRangesIsOneSentenceNamingCameraSizeAndRanges() throws {
        let fake = capabilities(camera(widths: 1...2048, heights: 1...2048, widthStep: 1, heightStep: 1))
        let problem = try #require(settings(4096, 512).problem(on: "n1", with: fake))
        #expect(problem == "camera n1/cam0 (Aravis-Fake-GV01) cannot be 4096x512: it takes width 1…2048 (step 1), height 1…2048 (step 1).")
    }

    @Test func aSizeOffTheStepsIsRefusedAndOneOnThemPlans() throws {
        // A sensor whose Width starts at 64 and moves by 16, Height by 8 from 32.
        let d = camera(widths: 64...1936, heights: 32...1216, widthStep: 16, heightStep: 8)
        let caps = capabilities(d)
        #expect(settings(1920, 1080).problem(on: "n1", with: caps) == nil)
        #expect(settings(512, 512).problem(on: "n1", with: caps) == nil)
        let off = try #require(settings(520, 512).problem(on: "n1", with: caps))
        #expect(off.contains("cannot be 520x512") && off.contains("width 64…1936 (step 16), height 32…1216 (step 8)"), "\(off)")
        #expect(d.sizeProblem(deviceID: "X", width: 520, height: 512) == "X cannot be 520x512: it takes width 64…1936 (step 16), height 32…1216 (step 8)")
        #expect(d.sizeProblem(deviceID: "X", width: 1936, height: 1216) == nil)
        #expect(d.takes(width: 64, height: 32) && !d.takes(width: 48, height: 32) && !d.takes(width: 1952, height: 32))
    }

    @Test func theLargestSizeCarriesTheRangeAndIsEvenOnTheSteps() throws {
        let d = camera(widths: 1...2591, heights: 1...1943, widthStep: 1, heightStep: 1)
        #expect(d.largestSize == (2590, 1942))
        let formats = d.handshakeFormats
        let ranged = try #require(formats.last)
        #expect(ranged.width == 2590 && ranged.height == 1942)
        #expect(ranged.sizeRange == CameraFormat.SizeRange(minWidth: 1, minHeight: 1, widthStep: 1, heightStep: 1))
        #expect(formats.dropLast().allSatisfy { $0.sizeRange == nil })
        // A step of 4 from 8: the top on the steps, 2588 is not above 2591 and even.
        #expect(camera(widths: 8...2591, heights: 8...1943, widthStep: 4, heightStep: 4).largestSize == (2588, 1940))
    }

    @Test func aRangeFormatOffersOnlyWhatItsStepsHold() {
        let f = CameraFormat(pixelFormat: "BayerRG8", width: 1936, height: 1216, minFramePeriodMicroseconds: 10_000,
                             maxFramePeriodMicroseconds: 1_000_000,
                             sizeRange: CameraFormat.SizeRange(minWidth: 64, minHeight: 32, widthStep: 16, heightStep: 8))
        #expect(f.offers(width: 1936, height: 1216) && f.offers(width: 64, height: 32) && f.offers(width: 1280, height: 720))
        #expect(!f.offers(width: 1952, height: 1216) && !f.offers(width: 1930, height: 1216) && !f.offers(width: 48, height: 32))
        let plain = CameraFormat(pixelFormat: "yuyv422", width: 640, height: 480, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 33_333)
        #expect(plain.offers(width: 640, height: 480) && !plain.offers(width: 320, height: 240))
    }

    @Test func theListingSaysTheRangesAndSteps() {
        let d = camera(widths: 64...1936, heights: 32...1216, widthStep: 16, heightStep: 8)
        let lines = d.lines(device: GenICamDevice(deviceID: "X-Y-1", protocolName: "GigEVision", vendor: "X", model: "Y", serial: "1", address: "10.0.0.2"))
        #expect(lines.contains("  width: 64…1936, step 16") && lines.contains("  height: 32…1216, step 8"), "\(lines)")
    }
}

@Suite struct GigEVisionAnnouncementTests {
    /// A DISCOVERY_ACK as the fake camera sends it (Aravis 0.8.26's arv-fake-gv-camera on 127.0.0.1).
    private func ack(vendor: String = "Aravis", model: String = "Fake", serial: String = "GV01", user: String = "",
                     mac: [UInt8] = [0, 0, 0, 0, 0, 0], ip: [UInt8] = [127, 0, 0, 1], status: UInt8 = 0) -> [UInt8] {
        var data = [UInt8](repeating: 0, count: 0xf8)
        func put(_ text: String, _ at: Int) { for (i, b) in text.utf8.enumerated() { data[at + i] = b } }
        data.replaceSubrange(0x0a..<0x10, with: mac)
        data.replaceSubrange(0x24..<0x28, with: ip)
        put(vendor, 0x48); put(model, 0x68); put("0.8.26", 0x88); put(serial, 0xd8); put(user, 0xe8)
        return [0, status, 0x00, 0x03, 0x00, 0xf8, 0xff, 0xff] + data
    }

    @Test func theFakesAnswerGivesAravisDeviceID() throws {
        let a = try #require(GigEVisionAnnouncement.parse(ack()))
        #expect(a.deviceID == "Aravis-Fake-GV01" && a.address == "127.0.0.1" && a.mac == "00:00:00:00:00:00")
        #expect(a.answers(to: "Aravis-Fake-GV01") && a.answers(to: "Aravis-GV01") && a.answers(to: "127.0.0.1"))
        #expect(!a.answers(to: "Aravis-Fake-GV02") && !a.answers(to: ""))
    }

    @Test func aUserNameAndMACNameTheCameraToo() throws {
        let a = try #require(GigEVisionAnnouncement.parse(ack(vendor: "Basler", model: "acA1920-40gc", serial: "21234567", user: "left",
                                                              mac: [0x00, 0x30, 0x53, 0x1a, 0x2b, 0x3c], ip: [192, 168, 7, 20])))
        #expect(a.deviceID == "Basler-acA1920-40gc-21234567")
        #expect(a.answers(to: "left") && a.answers(to: "00:30:53:1A:2B:3C") && a.answers(to: "192.168.7.20"))
    }

    @Test func aCameraWithoutSerialIsNamedByItsMAC() throws {
        let a = try #require(GigEVisionAnnouncement.parse(ack(serial: "", mac: [1, 2, 3, 4, 5, 6])))
        #expect(a.deviceID == "Aravis-Fake-01:02:03:04:05:06")
    }

    @Test func anythingButADiscoveryAckIsIgnored() {
        #expect(GigEVisionAnnouncement.parse(Array(ack().prefix(100))) == nil)
        #expect(GigEVisionAnnouncement.parse(ack(status: 1)) == nil)
        var other = ack()
        other[3] = 0x81  // READREG_ACK
        #expect(GigEVisionAnnouncement.parse(other) == nil)
        #expect(GigEVisionAnnouncement.parse(GigEVisionAnnouncement.discoveryCommand) == nil)
        #expect(GigEVisionAnnouncement.discoveryCommand == [0x42, 0x01, 0x00, 0x02, 0x00, 0x00, 0xff, 0xff])
    }

    @Test func controlCharactersLeaveTheID() throws {
        let a = try #require(GigEVisionAnnouncement.parse(ack(model: "Fa\u{1}ke\u{1b}", serial: "G\nV01")))
        #expect(a.deviceID == "Aravis-Fake-GV01")
    }

    @Test func anInterfaceThatIsNotThereIsOneSentence() {
        let missing = GigEVisionDiscovery.address(of: "nosuch0")
        guard case .failure(let error) = missing else { Issue.record("found an address on nosuch0"); return }
        #expect(error.description == "GenICam interface nosuch0 is not a network interface of this host (see ip link)")
        if case .success(let address) = GigEVisionDiscovery.address(of: "lo") { #expect(address == "127.0.0.1") }
    }
}
