import Foundation
import Testing
@testable import CoordCore

@Suite struct LibcameraTimingTests {
    @Test func thePipelineIsReadFromTheCameraID() {
        #expect(LibcameraPipeline.of(cameraID: "/base/axi/pcie@120000/rp1/i2c@88000/imx708@1a") == .rpiPiSP)
        #expect(LibcameraPipeline.of(cameraID: "/base/soc/i2c0mux/i2c@1/imx708@1a") == .rpiVC4)
        #expect(LibcameraPipeline.of(cameraID: "\\_SB_.PCI0.XHC_.RHUB.HS04-4:1.0-046d:0825") == .uvcvideo)
        #expect(LibcameraPipeline.of(cameraID: "/base/pci@0/usb@1-1:1.0-1d6b:0102") == .uvcvideo)
        #expect(LibcameraPipeline.of(cameraID: "platform/vimc.0 Sensor B") == .other)
    }

    /// A Pi stamps the frame start (the first row's exposure has just ended): its centre is half an exposure
    /// earlier; a UVC camera's stamp is the start of exposure. A known rolling-shutter readout moves the centre to
    /// the middle row.
    @Test func theExposureCentreFollowsWhatTheTimestampMarks() {
        #expect(LibcameraPipeline.rpiPiSP.center(sensorTimestampMicroseconds: 100_000, exposureMicroseconds: 10_000) == 95_000)
        #expect(LibcameraPipeline.rpiVC4.center(sensorTimestampMicroseconds: 100_000, exposureMicroseconds: 10_000,
                                                readoutMicroseconds: 20_000) == 105_000)
        #expect(LibcameraPipeline.uvcvideo.center(sensorTimestampMicroseconds: 100_000, exposureMicroseconds: 10_000) == 105_000)
    }

    /// A camera that follows the asked durations `lag` frames later is found honouring them, with that lag; one whose
    /// intervals ignore them (libcamera's UVC pipeline) is found free-running.
    @Test func theHonourCheckMeasuresTheLagFromTheIntervals() {
        let p = 33_333.0, step = 1_667.0
        let asked = FrameDurationProbe.plan(nominal: p, step: step)
        var rng = SeededRandom(seed: 3)
        for lag in [1, 4, 6] {
            let intervals = (0..<(asked.count + 18)).map { j in
                (j - lag >= 0 && j - lag < asked.count ? asked[j - lag] : p) + rng.gaussian(standardDeviation: 40)
            }
            let verdict = FrameDurationProbe.verdict(asked: asked, intervals: intervals, nominal: p, step: step)
            #expect(verdict == .honoured(lagFrames: lag))
            #expect(verdict.timing == FrameDurationTiming(delayFrames: lag - 1, lineMicroseconds: 0))
        }
        let free = (0..<(asked.count + 18)).map { _ in p + rng.gaussian(standardDeviation: 40) }
        let verdict = FrameDurationProbe.verdict(asked: asked, intervals: free, nominal: p, step: step)
        #expect(verdict.timing == nil)
        if case .ignored(let why) = verdict { #expect(why.contains("did not follow")) } else { Issue.record("found honoured") }
        // Too few frames to tell: not honoured.
        #expect(FrameDurationProbe.verdict(asked: asked, intervals: [p, p], nominal: p, step: step).timing == nil)
    }

    @Test func theHandshakeOffersEveryYUV420SizeWithinTheDurationLimits() {
        let listing = "YUV420 640x480,1280x720,1536x864; MJPEG 640x480; NV12 320x240-1920x1080"
        let formats = LibcameraStreamFormats.handshake(listing, frameDurationLimits: 8_000...120_000_000)
        #expect(formats.map { "\($0.width)x\($0.height)" } == ["640x480", "1280x720", "1536x864"])
        #expect(formats.allSatisfy { $0.pixelFormat == "yuv420p" && $0.minFramePeriodMicroseconds == 8_000 })
        #expect(LibcameraStreamFormats.yuv420Sizes("YUV420 320x240-1920x1080").map(\.width) == [320, 1920])
        #expect(LibcameraStreamFormats.handshake("MJPEG 640x480", frameDurationLimits: nil).isEmpty)
        #expect(LibcameraStreamFormats.handshake("YUV420 640x480", frameDurationLimits: nil).first?.maxFramePeriodMicroseconds == 33_333)
    }

    @Test func aUVCWebcamThroughLibcameraIsRecordedFromItsYUYVStreamWhenItListsNoYUV420() {
        // What the lab's gadget webcam lists through libcamera 0.0.3's UVC pipeline.
        let listing = "YUYV 320x180,640x360"
        #expect(LibcameraStreamFormats.recordedFormat(listing) == "YUYV")
        #expect(LibcameraStreamFormats.handshake(listing, frameDurationLimits: nil).map { "\($0.width)x\($0.height) \($0.pixelFormat)" }
                == ["320x180 yuv420p", "640x360 yuv420p"])
        // YUV420 is preferred where both are listed; its sizes alone are offered.
        #expect(LibcameraStreamFormats.recordedFormat("YUYV 1920x1080; YUV420 640x480") == "YUV420")
        #expect(LibcameraStreamFormats.handshake("YUYV 1920x1080; YUV420 640x480", frameDurationLimits: nil).map(\.width) == [640])
        #expect(LibcameraStreamFormats.recordedFormat("MJPEG 640x480; NV12 320x240") == nil)
    }

    /// libcamera's UVC pipeline stamps a frame with uvcvideo's own buffer stamp, so it is chosen as a `--v4l2`
    /// webcam's is (issue 36): hwtimestamps=0 (or uvcvideo's parameter unread) is the first packet's arrival, after
    /// the exposure, stated late by the lab's worst and widening the centre's uncertainty; hwtimestamps=1 the
    /// device's start of exposure. A Pi's stamp is taken as it is, with no choice and no warning.
    @Test func aUVCCameraThroughLibcameraIsReadByUvcvideosStamp() throws {
        let period = 33_333.0
        let firstPacket = try #require(LibcameraPipeline.uvcvideo.stampChoice(hwTimestamps: 0, periodMicroseconds: period))
        #expect(firstPacket.stamp == .firstPacket && firstPacket.marks == .endOfExposure && firstPacket.hwTimestamps == 0)
        #expect(firstPacket.lateMicroseconds == BufferStampChoice.Figures.lab.firstPacketLateMax)
        #expect(firstPacket.uncertaintyMicroseconds == firstPacket.lateMicroseconds / 2)
        #expect(LibcameraPipeline.uvcvideo.stampChoice(hwTimestamps: nil, periodMicroseconds: period) == firstPacket)
        let warning = try #require(firstPacket.warning(node: "vm1", camera: "cam0"))
        #expect(warning.contains("first USB packet")
                && warning.contains(String(format: "%.1f ms", BufferStampChoice.Figures.lab.firstPacketLateMax / 1000)))
        // The centre is half an exposure before a first-packet stamp, half after a device-clock one.
        #expect(LibcameraPipeline.uvcvideo.center(sensorTimestampMicroseconds: 100_000, exposureMicroseconds: 10_000,
                                                  stamp: firstPacket) == 95_000)
        let device = try #require(LibcameraPipeline.uvcvideo.stampChoice(hwTimestamps: 1, periodMicroseconds: period))
        #expect(device.stamp == .deviceClock && device.marks == .startOfExposure && device.lateMicroseconds == 0)
        #expect(LibcameraPipeline.uvcvideo.center(sensorTimestampMicroseconds: 100_000, exposureMicroseconds: 10_000,
                                                  stamp: device) == 105_000)
        for pi in [LibcameraPipeline.rpiPiSP, .rpiVC4, .other] {
            #expect(pi.stampChoice(hwTimestamps: 0, periodMicroseconds: period) == nil)
            #expect(pi.center(sensorTimestampMicroseconds: 100_000, exposureMicroseconds: 10_000, stamp: nil)
                    == pi.center(sensorTimestampMicroseconds: 100_000, exposureMicroseconds: 10_000))
        }
        // The manifest's device names the stamp beside the pipeline.
        var identity = DeviceIdentity(driver: "libcamera", model: "SYNCSTRIPE webcam", pipeline: "uvcvideo", cameraID: "x-1d6b:0102")
        identity.timestamp = firstPacket
        let json = String(decoding: try JSONEncoder().encode(identity), as: UTF8.self)
        #expect(json.contains("\"stamp\":\"first-packet\"") && json.contains("\"pipeline\":\"uvcvideo\""))
    }

    @Test func aLibcameraDeviceIsWrittenWithItsPipelineAndID() throws {
        let device = DeviceIdentity(driver: "libcamera", model: "imx708", pipeline: "rpi/pisp", cameraID: "/base/x/imx708@1a")
        let json = String(decoding: try JSONEncoder().encode(device), as: UTF8.self)
        #expect(json.contains("\"pipeline\":\"rpi\\/pisp\"") && json.contains("\"id\":\"\\/base\\/x\\/imx708@1a\"") && json.contains("\"model\":\"imx708\""))
    }
}
