import CoordCore
import Testing
import V4L2
@testable import Capture

/// V4L2 intervals at the rig's rational rates (CONTRACT §13).
@Suite struct RationalIntervalTests {
    let ntsc = FrameRate(numerator: 30000, denominator: 1001)!

    func camera(_ intervals: [V4L2FrameInterval], kind: V4L2RangeKind = .discrete) -> [V4L2Format] {
        [V4L2Format(fourcc: "MJPG", pixelFormat: 0x4750_4A4D, description: "Motion-JPEG", isCompressed: true, isEmulated: false,
                    sizes: [V4L2FrameSize(width: 640, height: 480, intervals: intervals, intervalKind: kind)], sizeKind: .discrete)]
    }

    func choose(_ formats: [V4L2Format], _ rate: FrameRate) -> V4L2FormatChoice? {
        try? V4L2FormatChoice.choose(from: formats, width: 640, height: 480, periodMicroseconds: rate.exactPeriodMicroseconds,
                                     codec: .mjpeg, device: "/dev/video0").get()
    }

    @Test func aSteppedCameraIsAskedForTheNTSCFraction() {
        #expect(V4L2FormatChoice.fraction(ntsc.exactPeriodMicroseconds) == V4L2FrameInterval(numerator: 1001, denominator: 30000))
        #expect(V4L2FormatChoice.fraction(FrameRate(numerator: 24000, denominator: 1001)!.exactPeriodMicroseconds)
                == V4L2FrameInterval(numerator: 1001, denominator: 24000))
        #expect(V4L2FormatChoice.fraction(FrameRate(30).exactPeriodMicroseconds) == V4L2FrameInterval(numerator: 1, denominator: 30))
        let stepped = camera([V4L2FrameInterval(numerator: 1, denominator: 60), V4L2FrameInterval(numerator: 1, denominator: 5)], kind: .stepwise)
        #expect(choose(stepped, ntsc)?.interval == V4L2FrameInterval(numerator: 1001, denominator: 30000))
    }

    /// A UVC camera states its rates in 100 ns units: 333333/10000000 for "30", 333667/10000000 for "29.97". Each
    /// is taken for the rig's rate it is a hair off (the file and grid run the rig's rational), not for the other.
    @Test func aCameraAHairOffTheRateRecordsAtTheRigsRate() {
        let uvc30 = camera([V4L2FrameInterval(numerator: 333_333, denominator: 10_000_000)])
        let uvc2997 = camera([V4L2FrameInterval(numerator: 333_667, denominator: 10_000_000)])
        #expect(choose(uvc30, FrameRate(30)) != nil)
        #expect(choose(uvc2997, ntsc)?.interval == V4L2FrameInterval(numerator: 333_667, denominator: 10_000_000))
        #expect(choose(camera([V4L2FrameInterval(numerator: 1001, denominator: 30000)]), ntsc) != nil)
        // 1000 ppm apart: a camera at 30 would walk off a 29.97 grid by a frame in 33 s.
        #expect(choose(uvc30, ntsc) == nil)
        #expect(choose(uvc2997, FrameRate(30)) == nil)
    }
}
