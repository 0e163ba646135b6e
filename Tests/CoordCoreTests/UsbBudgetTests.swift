// The plan's USB bus budget counts what the controller reserves for an isochronous webcam, not its frames' bytes
// (issue 36 item 4): two of the lab's gadget webcams (3072 B per microframe each) cannot share a USB 2 bus.
import Testing
@testable import CoordCore

private let labReservation = UsbIsoStream(speed: .high, altSettings: [
    UsbIsoAltSetting(alternateSetting: 1, endpointAddress: 0x81, wMaxPacketSize: 0x1400, bInterval: 1),
]).reservedBytesPerSecond

private func webcam(_ name: String, reserved: Double, width: Int = 320, height: Int = 180) -> PlannedCamera {
    var capabilities = CameraCapabilities(name: name, source: "v4l2", formats: [
        CameraFormat(pixelFormat: "yuyv422", width: 640, height: 360, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 66_667),
        CameraFormat(pixelFormat: "yuyv422", width: 320, height: 180, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 66_667),
    ], codecs: [.mjpeg, .ffv1, .h264], bus: "usb3")
    capabilities.usbReservedBytesPerSecond = reserved
    return PlannedCamera(node: "vm1", settings: CameraSettings(camera: name, ordinal: 0, width: width, height: height, fps: 30,
                                                               codec: .mjpeg),
                         capabilities: capabilities)
}

private func rig(_ cameras: [PlannedCamera]) -> [PlannedNode] {
    let calibration = Calibration(diskWriteBytesPerSecond: 1e10, encode: ["mjpeg": .init(pixelsPerSecond: 1e10, bytesPerPixel: 0.3)],
                                  heatingCelsiusPerSecond: nil, cpuCount: 2, measuredAt: "2026-01-01T00:00:00Z")
    return [PlannedNode(name: "vm1", resources: NodeResources(buses: [Bus.usb(number: 3, megabitsPerSecond: 480)],
                                                              calibration: calibration, freeDiskBytes: 1 << 40,
                                                              diskTotalBytes: 1 << 40, cpuCount: 2),
                        cameras: cameras)]
}

@Suite struct UsbBudgetTests {
    @Test func theLabsWebcamReservesItsWholeAlternateSetting() {
        #expect(labReservation == 24_576_000)
        let demand = Budget.demand(of: webcam("cam0", reserved: labReservation), calibration: nil)
        #expect(demand.busBytesPerSecond == 24_576_000)
        // The frames alone, as the budget counted them before: 320x180 YUYV at 30 fps.
        #expect(Budget.demand(of: webcam("cam0", reserved: 0), calibration: nil).busBytesPerSecond == 3_456_000)
    }

    @Test func twoWebcamsOnOneHighSpeedBusAreRefusedNamingTheBusAndCameras() throws {
        let budget = Budget.evaluate(rig([webcam("cam0", reserved: labReservation), webcam("cam1", reserved: labReservation)]))
        #expect(!budget.fits)
        let load = try #require(budget.limitingLoad)
        #expect(load.kind == .bus && load.detail == Budget.isochronousDetail)
        #expect(abs(load.cost - 49.152 / 48) < 1e-9)
        #expect(budget.refusal() == "node vm1 is over budget: bus usb3 (usb2) cannot reserve the isochronous bandwidth its "
            + "cameras' streams claim (cam0 24.6 MB/s and cam1 24.6 MB/s): 49.2 MB/s where it leaves 48.0 MB/s to "
            + "periodic transfers, a hardware cost of 1.02 (it must stay below 1.0).")
        #expect(budget.conflicts == ["vm1: cam0 and cam1 cannot run together at these settings: they need 49.2 MB/s on "
            + "bus usb3 (usb2), which carries 48.0 MB/s; at most 1 of them fits."])
        // The baseline: by their frames' bytes the same two cameras passed at a cost of 0.144.
        let before = Budget.evaluate(rig([webcam("cam0", reserved: 0), webcam("cam1", reserved: 0)]))
        #expect(before.fits && abs(before.cost - 6.912 / 48) < 1e-9)
    }

    @Test func oneWebcamFitsAndABulkCameraBesideItCountsItsFrames() {
        let budget = Budget.evaluate(rig([webcam("cam0", reserved: labReservation), webcam("cam1", reserved: 0, width: 640, height: 360)]))
        #expect(budget.fits)
        #expect(abs(budget.cost - (24.576 + 13.824) / 48) < 1e-9)
    }

    @Test func fitDisablesAWebcamRatherThanShrinkingSizesThatRelieveNothing() throws {
        let result = Budget.fit(rig([webcam("cam0", reserved: labReservation, width: 640, height: 360),
                                     webcam("cam1", reserved: labReservation, width: 640, height: 360)]))
        #expect(result.fits)
        #expect(result.changes.map(\.kind) == [.disable])
        #expect(result.nodes[0].cameras.map { "\($0.settings.width)x\($0.settings.height)" } == ["640x360"])
    }
}
