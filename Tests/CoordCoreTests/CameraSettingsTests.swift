import Testing
@testable import CoordCore

@Suite struct CameraSettingsProblemTests {
    let caps = CameraCapabilities(
        name: "cam0", source: "v4l2", device: "/dev/video0",
        formats: [
            CameraFormat(pixelFormat: "yuyv422", width: 640, height: 480, minFramePeriodMicroseconds: 16_667, maxFramePeriodMicroseconds: 1_000_000),
            CameraFormat(pixelFormat: "mjpeg", width: 1280, height: 720, minFramePeriodMicroseconds: 33_333, maxFramePeriodMicroseconds: 200_000),
            CameraFormat(pixelFormat: "yuyv422", width: 1280, height: 720, minFramePeriodMicroseconds: 100_000, maxFramePeriodMicroseconds: 200_000),
        ],
        codecs: [.mjpeg, .ffv1])

    func settings(width: Int = 640, height: Int = 480, fps: Int = 30, codec: VideoCodec = .mjpeg, ordinal: Int = 0) -> CameraSettings {
        CameraSettings(camera: "cam0", ordinal: ordinal, width: width, height: height, fps: fps, codec: codec)
    }

    @Test func supportedSettingsHaveNoProblem() {
        #expect(settings().problem(on: "node-a", with: caps) == nil)
        #expect(settings(fps: 60).problem(on: "node-a", with: caps) == nil)
        #expect(settings(fps: 1).problem(on: "node-a", with: caps) == nil)
        #expect(settings(width: 1280, height: 720, fps: 30, codec: .ffv1).problem(on: "node-a", with: caps) == nil)
        #expect(settings(width: 1280, height: 720, fps: 5).problem(on: "node-a", with: caps) == nil)
        #expect(settings(ordinal: 255).problem(on: "node-a", with: caps) == nil)
    }

    @Test func unknownCameraNamesNodeAndCamera() throws {
        let p = try #require(settings().problem(on: "node-a", with: nil))
        #expect(p.contains("node-a") && p.contains("cam0"), "\(p)")
    }

    @Test func unsupportedCodecNamesCameraCodecAndWhatIsOffered() throws {
        let p = try #require(settings(codec: .h264).problem(on: "node-a", with: caps))
        #expect(p.contains("node-a") && p.contains("cam0") && p.contains("h264"), "\(p)")
        #expect(p.contains("mjpeg") && p.contains("ffv1"), "\(p)")
    }

    @Test func unsupportedSizeNamesCameraSizeAndWhatIsOffered() throws {
        let p = try #require(settings(width: 800, height: 600).problem(on: "node-a", with: caps))
        #expect(p.contains("node-a") && p.contains("cam0") && p.contains("800x600"), "\(p)")
        #expect(p.contains("640x480") && p.contains("1280x720"), "\(p)")
    }

    @Test(arguments: [(641, 480), (640, 481), (102, 64), (104, 62), (0, 480), (-640, 480)])
    func oddOrTinySizeNamesCameraAndSize(width: Int, height: Int) throws {
        let p = try #require(settings(width: width, height: height).problem(on: "node-a", with: caps))
        #expect(p.contains("node-a/cam0") && p.contains("\(width)x\(height)"), "\(p)")
    }

    @Test(arguments: [0, -30])
    func nonPositiveFrameRateNamesTheRate(fps: Int) throws {
        let p = try #require(settings(fps: fps).problem(on: "node-a", with: caps))
        #expect(p.contains("node-a/cam0") && p.contains("\(fps)"), "\(p)")
    }

    @Test(arguments: [-1, 256])
    func ordinalOutsideAByteIsRefused(ordinal: Int) throws {
        let p = try #require(settings(ordinal: ordinal).problem(on: "node-a", with: caps))
        #expect(p.contains("node-a/cam0") && p.contains("\(ordinal)"), "\(p)")
    }

    @Test func tooFastFrameRateNamesCameraSizeAndRate() throws {
        let p = try #require(settings(fps: 61).problem(on: "node-a", with: caps))
        #expect(p.contains("node-a/cam0") && p.contains("640x480") && p.contains("61 fps"), "\(p)")
        let q = try #require(settings(width: 1280, height: 720, fps: 120).problem(on: "node-b", with: caps))
        #expect(q.contains("node-b/cam0") && q.contains("1280x720") && q.contains("120 fps"), "\(q)")
    }

    /// The rate the sentence offers as the fastest must itself be accepted, and one more must not be.
    @Test func statedFastestRateIsTheRealLimit() throws {
        for minPeriod in [Int64(16_667), 16_666, 33_333, 33_334, 40_000, 41_667, 8_333, 100_000, 16_000, 9_999] {
            let c = CameraCapabilities(name: "cam0", source: "synthetic",
                                       formats: [CameraFormat(pixelFormat: "yuv420p", width: 640, height: 480,
                                                              minFramePeriodMicroseconds: minPeriod, maxFramePeriodMicroseconds: 1_000_000)],
                                       codecs: [.mjpeg])
            let p = try #require(settings(fps: 1_000).problem(on: "n", with: c))
            let marker = "its fastest is "
            let range = try #require(p.range(of: marker), "\(p)")
            let stated = try #require(Int(p[range.upperBound...].prefix { $0.isNumber }), "\(p)")
            #expect(settings(fps: stated).problem(on: "n", with: c) == nil,
                    "min period \(minPeriod) µs: the sentence says \(stated) fps is possible, but it is refused: \(p)")
            #expect(settings(fps: stated + 1).problem(on: "n", with: c) != nil, "min period \(minPeriod) µs: \(stated + 1) fps also runs")
        }
    }
}
