import CoordCore
import Foundation
import Testing
import V4L2
@testable import Capture
@testable import LibAV
@testable import Pixels

// The pure parts of the camera sources: centre estimates, grid anchors, pixel conversions, the format choice;
// and the writer's MJPEG passthrough, read back by ffprobe and ffmpeg.

@Suite struct CentreEstimateTests {
    @Test func startOfExposureAddsHalfTheExposure() {
        #expect(TimestampMeaning.startOfExposure.center(timestamp: 1_000_000, exposureMicroseconds: 10_000) == 1_005_000)
    }

    @Test func endOfFrameTakesOffTheReadoutAndHalfTheExposure() {
        let eof = TimestampMeaning.endOfFrame(readoutMicroseconds: 16_667)
        #expect(eof.center(timestamp: 1_000_000, exposureMicroseconds: 10_000) == 1_000_000 - 16_667 - 5_000)
    }

    @Test func bothMeaningsAgreeOnOneFrame() {
        // A frame exposed from 0 for 8 ms and read out over 12 ms: SOE stamps 0, EOF stamps 20 ms.
        let soe = TimestampMeaning.startOfExposure.center(timestamp: 0, exposureMicroseconds: 8_000)
        let eof = TimestampMeaning.endOfFrame(readoutMicroseconds: 12_000).center(timestamp: 20_000, exposureMicroseconds: 8_000)
        #expect(soe == 4_000 && eof == 4_000)
    }

    @Test func aCaptureStampsItsCentreByItsMeaning() {
        let capture = Capture(payload: .jpeg([0xFF]), sequence: 3, timestampLocal: 500_000,
                              timestampMeaning: .endOfFrame(readoutMicroseconds: 1_000), exposureMicroseconds: 2_000,
                              durationMicroseconds: 33_333)
        #expect(capture.stampedCenterLocal == 500_000 - 1_000 - 1_000)
    }

    @Test func theNextGridInstantIsAtOrAfterTheTime() {
        let anchor = GridAnchor(instantLocal: 1_000_000, periodMicroseconds: 40_000)
        #expect(anchor.nextInstant(atOrAfter: 1_000_000) == 1_000_000)
        #expect(anchor.nextInstant(atOrAfter: 1_000_001) == 1_040_000)
        #expect(anchor.nextInstant(atOrAfter: 960_000) == 960_000)
        #expect(anchor.nextInstant(atOrAfter: 30_000) == 40_000)
    }
}

@Suite struct PixelConversionTests {
    /// A YUYV image whose every pixel pair is (Y0, U, Y1, V) with values from its position.
    private func yuyv(width: Int, height: Int, stride: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0xEE, count: stride * height)
        for y in 0..<height {
            for pair in 0..<(width / 2) {
                let i = y * stride + 4 * pair
                bytes[i] = UInt8(2 * pair)            // Y0
                bytes[i + 1] = UInt8(10 * y + pair)   // U
                bytes[i + 2] = UInt8(2 * pair + 1)    // Y1
                bytes[i + 3] = UInt8(100 + y)         // V
            }
        }
        return bytes
    }

    @Test(arguments: [0, 16, 24])
    func yuyvBecomesPlanarWithChromaAveragedOverLinePairs(padding: Int) {
        let (w, h) = (6, 4)
        let stride = padding == 0 ? 0 : 2 * w + padding
        let source = yuyv(width: w, height: h, stride: stride == 0 ? 2 * w : stride)
        let frame = PlanarFrame(width: w, height: h)
        let ok = source.withUnsafeBytes { PixelConversion.convert($0, layout: .yuyv, bytesPerLine: stride, into: frame) }
        #expect(ok)
        for y in 0..<h { #expect(Array(frame.luma[(y * w)..<((y + 1) * w)]) == [0, 1, 2, 3, 4, 5]) }
        // Chroma row r averages lines 2r and 2r+1 (rounding half up).
        #expect(Array(frame.cb[0..<3]) == [5, 6, 7])       // (0+10+1)/2, (1+11+1)/2, (2+12+1)/2
        #expect(Array(frame.cb[3..<6]) == [25, 26, 27])    // lines 2 and 3
        #expect(Array(frame.cr[0..<3]) == [101, 101, 101]) // (100+101+1)/2
        #expect(Array(frame.cr[3..<6]) == [103, 103, 103])
    }

    @Test func aBufferTooShortForTheImageLeavesTheFrameUntouched() {
        let frame = PlanarFrame(width: 8, height: 4)
        let short = [UInt8](repeating: 200, count: 8 * 2 * 4 - 1)
        #expect(!short.withUnsafeBytes { PixelConversion.convert($0, layout: .yuyv, bytesPerLine: 0, into: frame) })
        #expect(frame.luma.allSatisfy { $0 == 16 })
    }

    @Test func nv12AndYU12BecomePlanar() {
        let (w, h) = (4, 2)
        let nv12: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8, /* UV */ 50, 60, 51, 61]
        let yu12: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8, /* U */ 50, 51, /* V */ 60, 61]
        for (bytes, layout) in [(nv12, RawPixelLayout.nv12), (yu12, .yu12)] {
            let frame = PlanarFrame(width: w, height: h)
            #expect(bytes.withUnsafeBytes { PixelConversion.convert($0, layout: layout, bytesPerLine: 0, into: frame) })
            #expect(Array(frame.luma) == [1, 2, 3, 4, 5, 6, 7, 8])
            #expect(Array(frame.cb) == [50, 51] && Array(frame.cr) == [60, 61], "\(layout)")
        }
    }

    @Test func packingAndConvertingYUYVGivesTheStripeBack() throws {
        let frame = PlanarFrame(width: 160, height: 96)
        TestPattern.paint(into: frame, frameCounter: 7, ordinal: 3)
        let stripe = SyncStripe(ordinal: 3, frameCounter: 7, trueCenterMicroseconds: 123_456_789)
        stripe.paint(into: frame)
        var packed = [UInt8](repeating: 0, count: 160 * 96 * 2)
        let used = packed.withUnsafeMutableBytes { PixelConversion.packYUYV(frame, into: $0) }
        #expect(used == packed.count)
        let back = PlanarFrame(width: 160, height: 96)
        #expect(packed.withUnsafeBytes { PixelConversion.convert($0, layout: .yuyv, bytesPerLine: 0, into: back) })
        #expect(Array(back.luma) == Array(frame.luma))
        #expect(Array(back.cb) == Array(frame.cb) && Array(back.cr) == Array(frame.cr))
        #expect(SyncStripe.decode(luma: UnsafeBufferPointer(back.luma), stride: 160) == stripe)
    }
}

/// A UVC webcam's formats as V4L2Device enumerates them (the scripted C920's, plus what the tests vary).
private func webcamFormats(emulatedYU12: Bool = false) -> [V4L2Format] {
    func sizes(_ list: [(UInt32, UInt32, [UInt32])]) -> [V4L2FrameSize] {
        list.map { V4L2FrameSize(width: $0.0, height: $0.1, intervals: $0.2.map { V4L2FrameInterval(numerator: 1, denominator: $0) },
                                 intervalKind: .discrete) }
    }
    var formats = [
        V4L2Format(fourcc: "YUYV", pixelFormat: 0x5659_5559, description: "YUYV 4:2:2", isCompressed: false, isEmulated: false,
                   sizes: sizes([(640, 480, [30, 24, 20, 15, 10, 5]), (1280, 720, [10, 5])]), sizeKind: .discrete),
        V4L2Format(fourcc: "MJPG", pixelFormat: 0x4750_4A4D, description: "Motion-JPEG", isCompressed: true, isEmulated: false,
                   sizes: sizes([(640, 480, [30, 24, 20, 15, 10, 5]), (1280, 720, [30, 15])]), sizeKind: .discrete),
    ]
    if emulatedYU12 {
        formats.append(V4L2Format(fourcc: "YU12", pixelFormat: 0x3231_5559, description: "Planar YUV 4:2:0", isCompressed: false,
                                  isEmulated: true, sizes: sizes([(1280, 720, [30, 15])]), sizeKind: .discrete))
    }
    return formats
}

@Suite struct FormatChoiceTests {
    private func choose(_ formats: [V4L2Format], _ w: Int, _ h: Int, fps: Double, _ codec: VideoCodec)
        -> Result<V4L2FormatChoice, CameraSourceError> {
        V4L2FormatChoice.choose(from: formats, width: w, height: h, periodMicroseconds: 1_000_000 / fps, codec: codec,
                                device: "/dev/video0")
    }

    @Test func anMJPEGTakeMuxesTheCamerasMJPEG() throws {
        let choice = try choose(webcamFormats(), 640, 480, fps: 30, .mjpeg).get()
        #expect(choice.fourcc == "MJPG" && choice.passthrough && choice.layout == nil)
        #expect(choice.interval == V4L2FrameInterval(numerator: 1, denominator: 30))
    }

    @Test(arguments: [VideoCodec.ffv1, .h264])
    func anotherCodecTakesTheRawFormat(codec: VideoCodec) throws {
        let choice = try choose(webcamFormats(), 640, 480, fps: 15, codec).get()
        #expect(choice.fourcc == "YUYV" && !choice.passthrough && choice.layout == .yuyv)
        #expect(choice.interval == V4L2FrameInterval(numerator: 1, denominator: 15))
    }

    @Test func aRawFormatTooSlowForTheRateIsRefusedSayingWhatIsOffered() {
        guard case .failure(let error) = choose(webcamFormats(), 1280, 720, fps: 30, .ffv1) else {
            Issue.record("1280x720 YUYV runs at most 10 fps")
            return
        }
        #expect(error.sentence == "/dev/video0 cannot deliver 1280x720 at 30 fps for ffv1 (at 1280x720 it offers YUYV at 10, 5 fps; MJPG at 30, 15 fps; its MJPG stream can be recorded only with codec mjpeg, which muxes it as it is)")
    }

    @Test func aRateTheCameraDoesNotListIsRefusedNotApproximated() {
        // 25 fps is inside the 5…30 range, but a camera runs only the intervals it lists and cannot be steered.
        guard case .failure(let error) = choose(webcamFormats(), 640, 480, fps: 25, .mjpeg) else {
            Issue.record("25 fps is not offered")
            return
        }
        #expect(error.sentence.hasPrefix("/dev/video0 cannot deliver 640x480 at 25 fps for mjpeg (at 640x480 it offers"))
    }

    @Test func anUnknownSizeNamesTheSizesOffered() {
        guard case .failure(let error) = choose(webcamFormats(), 800, 600, fps: 30, .mjpeg) else {
            Issue.record("800x600 is not offered")
            return
        }
        #expect(error.sentence == "/dev/video0 cannot deliver 800x600 at 30 fps for mjpeg (it offers no 800x600 format; its sizes are 1280x720, 640x480)")
    }

    @Test func aFormatLibv4l2ConvertsIsTheLastResort() throws {
        let choice = try choose(webcamFormats(emulatedYU12: true), 1280, 720, fps: 30, .h264).get()
        #expect(choice.fourcc == "YU12" && choice.layout == .yu12)
    }

    @Test func aContinuousRangeTakesTheExactPeriod() throws {
        let format = V4L2Format(
            fourcc: "NV12", pixelFormat: 0x3231_564E, description: "Y/CbCr 4:2:0", isCompressed: false, isEmulated: false,
            sizes: [V4L2FrameSize(width: 64, height: 64, intervals: [V4L2FrameInterval(numerator: 1, denominator: 120),
                                                                     V4L2FrameInterval(numerator: 1, denominator: 1)],
                                  intervalKind: .continuous),
                    V4L2FrameSize(width: 4096, height: 3072, intervals: [V4L2FrameInterval(numerator: 1, denominator: 30),
                                                                         V4L2FrameInterval(numerator: 1, denominator: 1)],
                                  intervalKind: .continuous)],
            sizeKind: .stepwise)
        let choice = try choose([format], 1920, 1080, fps: 25, .ffv1).get()
        #expect(choice.layout == .nv12 && choice.interval == V4L2FrameInterval(numerator: 1, denominator: 25))
        let capped = try choose([format], 1920, 1080, fps: 7.5, .ffv1).get()
        #expect(capped.interval == V4L2FrameInterval(numerator: 133_333, denominator: 1_000_000))
    }

    @Test func theHandshakePutsMJPEGFirstAtEverySize() {
        let formats = V4L2FormatChoice.cameraFormats(webcamFormats())
        #expect(formats.map { "\($0.pixelFormat) \($0.width)x\($0.height) \($0.minFramePeriodMicroseconds)-\($0.maxFramePeriodMicroseconds)" } == [
            "MJPG 640x480 33333-200000", "YUYV 640x480 33333-200000",
            "MJPG 1280x720 33333-66667", "YUYV 1280x720 100000-200000",
        ])
    }

    @Test func ratesReadAsPeopleSayThem() {
        #expect(V4L2FormatChoice.fpsText(33_333.333) == "30")
        #expect(V4L2FormatChoice.fpsText(133_333.333) == "7.5")
        #expect(V4L2FormatChoice.fpsText(1_001_000.0 / 30) == "29.97")
    }
}

@Suite struct PassthroughTests {
    private func scratch() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("coord-passthrough-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private func tool(_ name: String, _ arguments: [String]) throws -> (status: Int32, output: Data) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [name] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, data)
    }

    /// A JPEG of a painted frame, as a scripted MJPEG camera delivers it.
    private func jpeg(_ encoder: JPEGEncoder, counter: UInt32) throws -> [UInt8] {
        let frame = PlanarFrame(width: encoder.width, height: encoder.height)
        TestPattern.paint(into: frame, frameCounter: counter, ordinal: 9)
        SyncStripe(ordinal: 9, frameCounter: counter, trueCenterMicroseconds: 1_000 + Int64(counter)).paint(into: frame)
        var buffer = [UInt8](repeating: 0, count: encoder.width * encoder.height * 2)
        let used = try buffer.withUnsafeMutableBytes { try encoder.encode(frame, into: $0) }
        return Array(buffer[0..<used])
    }

    @Test func packetsAreMuxedAsTheyCameAndRepeatsAndPicturesMixIn() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("pass.mkv").path
        let encoder = try JPEGEncoder(width: 320, height: 240)
        let writer = try MatroskaWriter(path: path, width: 320, height: 240, fps: 30, codec: .mjpeg)
        var packets: [[UInt8]] = []
        for i in 0..<4 {
            let packet = try jpeg(encoder, counter: UInt32(i))
            #expect(packet.starts(with: [0xFF, 0xD8]), "a JPEG starts with SOI")
            packets.append(packet)
            try writer.writePacket(packet, ptsMicroseconds: Int64(i) * 2 * 33_333)
            try writer.writeRepeat(ptsMicroseconds: Int64(i) * 2 * 33_333 + 33_333)
        }
        let picture = PlanarFrame(width: 320, height: 240)
        SyncStripe(ordinal: 9, frameCounter: 99, trueCenterMicroseconds: 5).paint(into: picture)
        try writer.write(picture, ptsMicroseconds: 8 * 33_333)
        try writer.finish()
        #expect(writer.framesWritten == 9)

        let probe = try tool("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                         "stream=nb_read_frames,codec_name", "-of", "csv=p=0", path])
        #expect(probe.status == 0)
        #expect(String(decoding: probe.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "mjpeg,9")
        // The first packet in the file is byte for byte the camera's JPEG: no decode, no re-encode.
        let first = try tool("ffmpeg", ["-v", "error", "-i", path, "-frames:v", "1", "-c", "copy", "-f", "mjpeg", "-"])
        #expect(first.status == 0 && Array(first.output) == packets[0])
        // Every frame decodes, with the stripe painted into it (repeats repeat it).
        let gray = try tool("ffmpeg", ["-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        let size = 320 * 240
        #expect(gray.status == 0 && gray.output.count == 9 * size)
        let counters: [UInt32?] = gray.output.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            return (0..<9).map { SyncStripe.decode(luma: UnsafeBufferPointer(rebasing: bytes[($0 * size)..<(($0 + 1) * size)]), stride: 320)?.frameCounter }
        }
        #expect(counters == [0, 0, 1, 1, 2, 2, 3, 3, 99])
    }

    @Test func onlyAnMJPEGRecordingTakesPackets() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let writer = try MatroskaWriter(path: dir.appendingPathComponent("f.mkv").path, width: 320, height: 240, fps: 30, codec: .ffv1)
        #expect(throws: MediaError.self) { try writer.writePacket([0xFF, 0xD8, 0xFF, 0xD9], ptsMicroseconds: 0) }
        let mjpeg = try MatroskaWriter(path: dir.appendingPathComponent("m.mkv").path, width: 320, height: 240, fps: 30, codec: .mjpeg)
        #expect(throws: MediaError.self) { try mjpeg.writePacket([], ptsMicroseconds: 0) }
        try mjpeg.writePacket([0xFF, 0xD8, 0xFF, 0xD9], ptsMicroseconds: 10)
        // Times still only go forward.
        #expect(throws: MediaError.self) { try mjpeg.writePacket([0xFF, 0xD8, 0xFF, 0xD9], ptsMicroseconds: 10) }
        try mjpeg.finish()
        try writer.finish()
    }
}
