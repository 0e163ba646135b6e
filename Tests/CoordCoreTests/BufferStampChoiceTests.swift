import Foundation
import Testing
@testable import CoordCore

/// The node's choice of a V4L2 camera's buffer stamp (issue 36): uvcvideo's module parameter and the buffer flags,
/// with the lab's measured figures, give the stamp, what it marks, how late it is believed and the uncertainty.
@Suite struct BufferStampChoiceTests {
    let period = 33_333.0
    let figures = BufferStampChoice.Figures(firstPacketLateMax: 250_000, deviceClockP99: 2_000)

    @Test func uvcvideoWithHardwareTimestampsUsesTheDeviceClock() {
        let c = BufferStampChoice.choose(driver: "uvcvideo", hwTimestamps: 1, monotonic: true, marks: .startOfExposure,
                                         periodMicroseconds: period, figures: figures)
        #expect(c.stamp == .deviceClock && c.marks == .startOfExposure)
        #expect(c.lateMicroseconds == 0 && c.uncertaintyMicroseconds == 1_000 && c.hwTimestamps == 1)
        #expect(c.warning(node: "n1", camera: "cam0")?.contains("hwtimestamps=1") == true)
    }

    /// Debian's default: the first packet's stamp, after the exposure, with the uncertainty widened so ±2σ covers the
    /// most lateness seen, and never less than two frames.
    @Test func uvcvideoWithoutThemIsTheFirstPacketAndItsLatenessIsCovered() {
        for hw in [0] {
            let c = BufferStampChoice.choose(driver: "uvcvideo", hwTimestamps: hw, monotonic: true, marks: .startOfExposure,
                                             periodMicroseconds: period, figures: figures)
            #expect(c.stamp == .firstPacket && c.marks == .endOfExposure && c.hwTimestamps == 0)
            #expect(c.lateMicroseconds == 250_000 && 2 * c.uncertaintyMicroseconds >= c.lateMicroseconds)
            let warning = c.warning(node: "n1", camera: "cam0") ?? ""
            #expect(warning.contains("250.0 ms late") && warning.contains("hwtimestamps=0"))
        }
        let slow = BufferStampChoice.choose(driver: "uvcvideo", hwTimestamps: 0, monotonic: true, marks: nil,
                                            periodMicroseconds: 200_000, figures: figures)
        #expect(slow.lateMicroseconds == 400_000)
    }

    /// Another driver's stamp is taken as its flags say, adding nothing; a stamp on another clock is replaced by the
    /// arrival, later than the first packet by up to a frame.
    @Test func otherDriversKeepTheirFlagsAndAnotherClockFallsBackToArrival() {
        let vivid = BufferStampChoice.choose(driver: "vivid", hwTimestamps: 1, monotonic: true, marks: .endOfFrame,
                                             periodMicroseconds: period, figures: figures)
        #expect(vivid == BufferStampChoice(stamp: .driver, marks: .endOfFrame, lateMicroseconds: 0, uncertaintyMicroseconds: 0))
        #expect(vivid.warning(node: "n1", camera: "cam0") == nil)
        // uvcvideo not loaded on this box: a device that only says it is (a scripted one) keeps its flags.
        let scripted = BufferStampChoice.choose(driver: "uvcvideo", hwTimestamps: nil, monotonic: true, marks: .startOfExposure,
                                                periodMicroseconds: period, figures: figures)
        #expect(scripted.stamp == .driver && scripted.marks == .startOfExposure && scripted.uncertaintyMicroseconds == 0)
        let other = BufferStampChoice.choose(driver: "uvcvideo", hwTimestamps: 1, monotonic: false, marks: nil,
                                             periodMicroseconds: period, figures: figures)
        #expect(other.stamp == .arrival && other.lateMicroseconds == 250_000 + period)
        #expect(other.uncertaintyMicroseconds == other.lateMicroseconds / 2)
    }

    /// A device-clock stamp later than its frame's arrival (uvcvideo's clock recovery jumping) is not trusted; the
    /// first packet's stamp is never after the arrival, and other stamps are not judged.
    @Test func aDeviceClockStampAfterItsArrivalIsNotTrusted() {
        let device = BufferStampChoice.choose(driver: "uvcvideo", hwTimestamps: 1, monotonic: true, marks: nil, periodMicroseconds: period)
        #expect(device.trusts(stampMicroseconds: 1_000, arrivalMicroseconds: 40_000))
        #expect(!device.trusts(stampMicroseconds: 2_040_000, arrivalMicroseconds: 40_000))
        let first = BufferStampChoice.choose(driver: "uvcvideo", hwTimestamps: 0, monotonic: true, marks: nil, periodMicroseconds: period)
        #expect(first.trusts(stampMicroseconds: 2_040_000, arrivalMicroseconds: 40_000))
    }

    /// The manifest's `device.timestamp` keys.
    @Test func theManifestKeysAreTheDocumentedOnes() throws {
        var device = DeviceIdentity(driver: "uvcvideo", card: "cam", busInfo: "usb-1")
        device.timestamp = BufferStampChoice.choose(driver: "uvcvideo", hwTimestamps: 0, monotonic: true, marks: nil,
                                                    periodMicroseconds: period, figures: figures)
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(device)) as? [String: Any]
        let t = json?["timestamp"] as? [String: Any]
        #expect(t?["stamp"] as? String == "first-packet" && t?["marks"] as? String == "endOfExposure")
        #expect(t?["late_us"] as? Double == 250_000 && t?["uncertainty_us"] as? Double == 125_000 && t?["hwtimestamps"] as? Int == 0)
        #expect(try JSONDecoder().decode(DeviceIdentity.self, from: JSONEncoder().encode(device)) == device)
    }
}
