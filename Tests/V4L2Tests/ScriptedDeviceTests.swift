// V4L2Device driven by the scripted driver: the capture path's own code (open, enumerate, configure, mmap
// streaming, drops, unplug, controls) runs against a device that answers like uvcvideo, in real time.
import Foundation
import Testing
import V4L2
import V4L2Simulator

#if canImport(Glibc)
import Glibc
#endif


@Suite struct ScriptedDeviceTests {
    // ---- open ----

    @Test func opensAScriptedWebcam() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        #expect(device.path == "/dev/video0")
        device.close()
        device.close()  // a second close does nothing
    }

    @Test(arguments: [("EBUSY", EBUSY, "Device or resource busy"), ("ENODEV", ENODEV, "No such device"),
                      ("EACCES", EACCES, "Permission denied")])
    func openFailsWithTheScriptedErrno(name: String, code: Int32, words: String) throws {
        let (driver, _) = scripted(["/dev/video2": webcam { $0.openError = name }])
        let error = try #require(v4l2Error { _ = try V4L2Device(path: "/dev/video2", driver: driver) })
        #expect(error.errno == code)
        #expect(error.description == "cannot open /dev/video2: \(words) (errno \(code)).")
        expectOneSentence(error, device: "/dev/video2", operation: "open")
    }

    @Test func aPathOutsideTheScriptThatExistsIsNotACharacterDevice() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("video-\(UUID().uuidString)").path
        try Data("not a camera".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        #expect(driver.isCharacterDevice(file) == 0)
        let error = try #require(v4l2Error { _ = try V4L2Device(path: file, driver: driver) })
        #expect(error.errno == ENODEV)
        #expect(error.description == "cannot open \(file): it is not a character device, so not a V4L2 device (errno 19).")
    }

    @Test func aMissingPathIsENOENT() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let error = try #require(v4l2Error { _ = try V4L2Device(path: "/dev/video7", driver: driver) })
        #expect(error.errno == ENOENT)
        #expect(error.description == "cannot open /dev/video7: No such file or directory (errno 2).")
    }

    // ---- QUERYCAP ----

    @Test func queryCapOfTheWebcam() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        let caps = try device.capabilities()
        #expect(caps.driver == "uvcvideo")
        #expect(caps.card == "HD Pro Webcam C920")
        #expect(caps.busInfo == "usb-0000:00:14.0-1")
        #expect(caps.isVideoCapture)
        #expect(caps.canStream)
        #expect(caps.version >> 16 == 6)
    }

    @Test func queryCapOfTheMetadataNode() throws {
        let (driver, _) = scripted(["/dev/video1": Scripted.metadataNode])
        let device = try V4L2Device(path: "/dev/video1", driver: driver)
        let caps = try device.capabilities()
        #expect(caps.driver == "uvcvideo")
        #expect(caps.busInfo == "usb-0000:00:14.0-1")
        #expect(!caps.isVideoCapture)
        #expect(caps.canStream)
        #expect(try device.formats().isEmpty)  // ENUM_FMT of VIDEO_CAPTURE is EINVAL at index 0
        let error = try #require(v4l2Error { try device.setFormat(width: 640, height: 480, pixelFormat: yuyv) })
        #expect(error.errno == EINVAL)
        expectOneSentence(error, device: "/dev/video1", operation: "VIDIOC_S_FMT")
    }

    // ---- enumeration ----

    @Test func enumeratesFormatsSizesAndIntervalsExactlyAsTheProfile() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        let formats = try device.formats()
        func size(_ w: UInt32, _ h: UInt32, _ fps: [UInt32]) -> V4L2FrameSize {
            V4L2FrameSize(width: w, height: h, intervals: fps.map { V4L2FrameInterval(numerator: 1, denominator: $0) },
                          intervalKind: .discrete)
        }
        let all: [UInt32] = [30, 24, 20, 15, 10, 5]
        #expect(formats == [
            V4L2Format(fourcc: "YUYV", pixelFormat: yuyv, description: "YUYV 4:2:2", isCompressed: false,
                       isEmulated: false,
                       sizes: [size(640, 480, all), size(1280, 720, [10, 5]), size(1920, 1080, [5])],
                       sizeKind: .discrete),
            V4L2Format(fourcc: "MJPG", pixelFormat: mjpg, description: "Motion-JPEG", isCompressed: true,
                       isEmulated: false,
                       sizes: [size(640, 480, all), size(1280, 720, all), size(1920, 1080, all)],
                       sizeKind: .discrete),
        ])
    }

    // ---- configuration ----

    @Test func setFormatSnapsToTheNearestOfferedSize() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)

        let odd = try device.setFormat(width: 1200, height: 700, pixelFormat: yuyv)
        #expect(odd.width == 1280 && odd.height == 720 && odd.pixelFormat == yuyv)
        #expect(odd.bytesPerLine == 2560)
        #expect(odd.sizeImage == 1280 * 720 * 2)
        // S_FMT resets the interval to the size's default, its fastest.
        #expect(try device.frameInterval() == V4L2FrameInterval(numerator: 1, denominator: 10))

        let big = try device.setFormat(width: 4000, height: 3000, pixelFormat: mjpg)
        #expect(big.width == 1920 && big.height == 1080 && big.pixelFormat == mjpg)
        #expect(big.bytesPerLine == 0)
        #expect(big.sizeImage == 1920 * 1080 * 2)  // uvcvideo's bound for a compressed frame

        let small = try device.setFormat(width: 160, height: 120, pixelFormat: mjpg)
        #expect(small.width == 640 && small.height == 480)

        // A format the camera lacks is adjusted to its default, as real drivers do.
        let nv12 = try device.setFormat(width: 640, height: 480, pixelFormat: V4L2Device.pixelFormat("NV12"))
        #expect(nv12.pixelFormat == yuyv)
        let current = try device.currentFormat()
        #expect(current.width == 640 && current.height == 480 && current.pixelFormat == yuyv)
    }

    @Test func setFrameIntervalSnapsToTheNearestOfferedInterval() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        try device.setFormat(width: 640, height: 480, pixelFormat: mjpg)
        #expect(try device.frameInterval() == V4L2FrameInterval(numerator: 1, denominator: 30))
        for (asked, chosen) in [(28, 30), (22, 24), (60, 30), (11, 10), (1, 5), (15, 15)] as [(UInt32, UInt32)] {
            let got = try device.setFrameInterval(V4L2FrameInterval(numerator: 1, denominator: asked))
            #expect(got == V4L2FrameInterval(numerator: 1, denominator: chosen), "asked 1/\(asked)")
            #expect(try device.frameInterval() == got)
        }
        // 1001/30000 (29.97 fps) is nearest 1/30.
        #expect(try device.setFrameInterval(V4L2FrameInterval(numerator: 1001, denominator: 30000))
            == V4L2FrameInterval(numerator: 1, denominator: 30))
        try device.setFormat(width: 1280, height: 720, pixelFormat: yuyv)
        #expect(try device.setFrameInterval(V4L2FrameInterval(numerator: 1, denominator: 30))
            == V4L2FrameInterval(numerator: 1, denominator: 10))
    }

    @Test(arguments: [("EBUSY", EBUSY), ("EINVAL", EINVAL)])
    func setFormatFailsWithTheScriptedErrno(name: String, code: Int32) throws {
        let (driver, _) = scripted(["/dev/video0": webcam { $0.sFmtError = name }])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        let error = try #require(v4l2Error { try device.setFormat(width: 640, height: 480, pixelFormat: mjpg) })
        #expect(error.errno == code)
        expectOneSentence(error, device: "/dev/video0", operation: "VIDIOC_S_FMT")
        if code == EBUSY {
            #expect(error.description == "VIDIOC_S_FMT on /dev/video0 failed: Device or resource busy (errno 16).")
        }
    }

    @Test func formatAndIntervalAreBusyWhileStreaming() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        try device.startStreaming()
        defer { device.close() }
        let format = try #require(v4l2Error { try device.setFormat(width: 1280, height: 720, pixelFormat: mjpg) })
        #expect(format.errno == EBUSY)
        let interval = try #require(v4l2Error {
            try device.setFrameInterval(V4L2FrameInterval(numerator: 1, denominator: 15))
        })
        #expect(interval.errno == EBUSY)
        expectOneSentence(interval, device: "/dev/video0", operation: "VIDIOC_S_PARM")
    }

    @Test func aSecondOpenCannotTakeTheQueue() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let first = try V4L2Device(path: "/dev/video0", driver: driver)
        let second = try V4L2Device(path: "/dev/video0", driver: driver)
        try first.startStreaming()
        let error = try #require(v4l2Error { try second.startStreaming() })
        #expect(error.errno == EBUSY)
        expectOneSentence(error, device: "/dev/video0", operation: "VIDIOC_REQBUFS")
        #expect(try second.capabilities().isVideoCapture)  // querying still works beside the streaming fd
        first.close()
        try second.startStreaming()  // the owner's close freed the queue
        second.close()
    }

    @Test(arguments: [("ENOSPC", ENOSPC), ("EBUSY", EBUSY)])
    func streamOnFailsWithTheScriptedErrno(name: String, code: Int32) throws {
        let (driver, _) = scripted(["/dev/video0": webcam { $0.streamonError = name }])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        let error = try #require(v4l2Error { try device.startStreaming() })
        #expect(error.errno == code)
        expectOneSentence(error, device: "/dev/video0", operation: "VIDIOC_STREAMON")
        if code == ENOSPC {
            #expect(error.description == "VIDIOC_STREAMON on /dev/video0 failed: not enough USB bandwidth left for "
                + "this format and frame rate (No space left on device) (errno 28).")
        }
        // The failed start released its buffers, so the format can change again.
        try device.setFormat(width: 1280, height: 720, pixelFormat: mjpg)
        device.close()
    }

    // ---- streaming ----

    @Test func streamsTwentyFramesAt30FpsWithHonestTimestamps() throws {
        let (driver, log) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        let chosen = try device.setFormat(width: 640, height: 480, pixelFormat: mjpg)
        try device.setFrameInterval(V4L2FrameInterval(numerator: 1, denominator: 30))
        let started = Date()
        try device.startStreaming(bufferCount: 8)
        var seen: [(sequence: UInt32, timestampUs: Int64, bytes: Int)] = []
        let frames = try capture(device, count: 20) { frame in
            // Checked while the buffer is still ours: what the painter wrote, as many bytes as it said.
            #expect(frame.bytes.count == 1000 + Int(frame.sequence))
            #expect(frame.bytes.first == 0xff && frame.bytes[1] == 0xd8 && frame.bytes.last == 0xd9)
            #expect(frame.timestampIsMonotonic)
            #expect(frame.timestampSource == .startOfExposure)
            #expect(!frame.hasError)
            // A timestamp is never in the future of the moment the frame is handed over.
            #expect(frame.timestampUs <= Int64(monotonicNowUs()))
            seen.append((frame.sequence, frame.timestampUs, frame.bytes.count))
        }
        #expect(frames.count == 20)
        #expect(seen.map(\.sequence) == Array(0..<20))
        for (a, b) in zip(seen, seen.dropFirst()) {
            #expect(abs((b.timestampUs - a.timestampUs) - interval30Us) <= 2_000, "spacing \(b.timestampUs - a.timestampUs) µs")
        }
        // Real time: twenty frames at 30 fps take about two thirds of a second.
        #expect(Date().timeIntervalSince(started) > 0.6)
        let painted = log.all.filter { $0.sequence < 20 }
        #expect(painted.count == 20)
        #expect(painted.allSatisfy { $0.fourcc == "MJPG" && $0.width == Int(chosen.width) && $0.height == Int(chosen.height) })
        // SOE timestamps are the true starts of exposure when there is no jitter; exposure is half the interval.
        for s in seen {
            let entry = try #require(log.entry(sequence: s.sequence))
            #expect(entry.startOfExposureUs == s.timestampUs)
            #expect(entry.exposureUs == 16_667)
        }
    }

    @Test func yuyvFramesFillTheWholeImage() throws {
        let (driver, log) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        try device.setFormat(width: 640, height: 480, pixelFormat: yuyv)
        try device.startStreaming()
        _ = try capture(device, count: 3) { frame in
            #expect(frame.bytes.count == 640 * 480 * 2)
            #expect(frame.bytes.allSatisfy { $0 == UInt8(truncatingIfNeeded: frame.sequence) })
        }
        #expect(log.all.prefix(3).allSatisfy { $0.fourcc == "YUYV" && $0.width == 640 && $0.height == 480 })
    }

    @Test func scriptedDropsShowAsSequenceGaps() throws {
        let (driver, _) = scripted(["/dev/video0": webcam { $0.dropSequences = [3, 4, 9] }])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        try device.setFormat(width: 640, height: 480, pixelFormat: mjpg)
        try device.startStreaming(bufferCount: 8)
        let frames = try capture(device, count: 10)
        #expect(frames.map(\.sequence) == [0, 1, 2, 5, 6, 7, 8, 10, 11, 12])
        // The timestamps agree with the gap: three intervals between frames 2 and 5.
        let gap = Double(frames[3].timestampUs - frames[2].timestampUs)
        #expect(abs(gap - 3 * 1_000_000 / 30) <= 2)
    }

    @Test func framesDropWhenTheConsumerHoldsEveryBuffer() throws {
        let (driver, _) = scripted(["/dev/video0": Scripted.uvcWebcam])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        try device.setFormat(width: 640, height: 480, pixelFormat: mjpg)
        try device.startStreaming(bufferCount: 2)
        let a = try #require(try device.dequeueFrame(timeoutMs: 1000))
        let b = try #require(try device.dequeueFrame(timeoutMs: 1000))
        // Both buffers held: nothing can be filled, so poll times out while the sensor runs on.
        #expect(try device.dequeueFrame(timeoutMs: 200) == nil)
        try device.requeue(a)
        try device.requeue(b)
        let next = try #require(try device.dequeueFrame(timeoutMs: 1000))
        #expect([a.sequence, b.sequence] == [0, 1])
        #expect(next.sequence >= 6, "the frames captured while no buffer was queued are lost: got \(next.sequence)")
        let expected = Double(next.sequence - b.sequence) * 1_000_000 / 30
        #expect(abs(Double(next.timestampUs - b.timestampUs) - expected) <= 2)
    }

    @Test func dequeueWithoutAReadyFrameTimesOut() throws {
        let (driver, _) = scripted(["/dev/video0": webcam { $0.startPhaseUs = 300_000 }])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        try device.startStreaming()
        let before = Date()
        #expect(try device.dequeueFrame(timeoutMs: 50) == nil)
        #expect(try device.dequeueFrame(timeoutMs: 0) == nil)
        let waited = Date().timeIntervalSince(before)
        #expect(waited >= 0.045 && waited < 0.25)
        #expect(try device.dequeueFrame(timeoutMs: 1000) != nil)
    }

    @Test func eofTimestampsAreOneIntervalAfterTheStartOfExposure() throws {
        let (driver, log) = scripted(["/dev/video0": webcam { $0.timestampSource = "eof" }])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        try device.setFormat(width: 640, height: 480, pixelFormat: mjpg)
        try device.startStreaming(bufferCount: 8)
        let frames = try capture(device, count: 5) { frame in
            #expect(frame.timestampSource == .endOfFrame)
            #expect(frame.timestampIsMonotonic)
        }
        for frame in frames {
            let entry = try #require(log.entry(sequence: frame.sequence))
            #expect(abs(frame.timestampUs - entry.startOfExposureUs - interval30Us) <= 1)
        }
    }

    @Test func jitterAndClockErrorAreSeededAndApplied() throws {
        // 1000 ppm fast: 33.300 ms apart instead of 33.333; jitter of 300 µs drawn the same way for one seed.
        func offsets(seed: UInt64) throws -> (spacing: [Int64], noise: [Int64]) {
            let (driver, log) = scripted(["/dev/video0": webcam {
                $0.timestampJitterUs = 300
                $0.rateErrorPPM = 1000
                $0.startPhaseUs = 1000
            }], seed: seed)
            let device = try V4L2Device(path: "/dev/video0", driver: driver)
            defer { device.close() }
            try device.setFormat(width: 640, height: 480, pixelFormat: mjpg)
            try device.startStreaming(bufferCount: 8)
            let frames = try capture(device, count: 8)
            let truth = try frames.map { try #require(log.entry(sequence: $0.sequence)).startOfExposureUs }
            return (zip(truth, truth.dropFirst()).map { $1 - $0 },
                    zip(frames, truth).map { $0.timestampUs - $1 })
        }
        let one = try offsets(seed: 7)
        let again = try offsets(seed: 7)
        let other = try offsets(seed: 8)
        #expect(one.spacing.allSatisfy { abs($0 - 33_300) <= 1 }, "\(one.spacing)")
        // The same draws for one seed (to the microsecond the timestamps are rounded to), others for another.
        #expect(zip(one.noise, again.noise).allSatisfy { abs($0 - $1) <= 1 }, "\(one.noise) \(again.noise)")
        #expect(zip(one.noise, other.noise).contains { abs($0 - $1) > 1 }, "\(one.noise) \(other.noise)")
        #expect(one.noise.contains { $0 != 0 })
        #expect(one.noise.allSatisfy { abs($0) < 2_000 })
    }

    // ---- unplug ----

    @Test func anUnpluggedCameraFailsWithENODEVAndStillCloses() throws {
        let (driver, _) = scripted([
            "/dev/video0": webcam { $0.unplugAfterFrames = 5 },
            "/dev/video2": Scripted.uvcWebcam,
        ])
        let yanked = try V4L2Device(path: "/dev/video0", driver: driver)
        let other = try V4L2Device(path: "/dev/video2", driver: driver)
        try yanked.setFormat(width: 640, height: 480, pixelFormat: mjpg)
        try yanked.startStreaming()
        try other.startStreaming()
        let frames = try capture(yanked, count: 5)
        #expect(frames.map(\.sequence) == [0, 1, 2, 3, 4])
        let error = try #require(v4l2Error { _ = try yanked.dequeueFrame(timeoutMs: 1000) })
        #expect(error.errno == ENODEV)
        expectOneSentence(error, device: "/dev/video0", operation: "poll")
        #expect(error.description
            == "poll on /dev/video0 failed: No such device, the camera was unplugged or reset (errno 19).")
        // Every later call fails the same way, close works, and the node is gone.
        let query = try #require(v4l2Error { _ = try yanked.capabilities() })
        #expect(query.errno == ENODEV)
        expectOneSentence(query, device: "/dev/video0", operation: "VIDIOC_QUERYCAP")
        yanked.close()
        let reopen = try #require(v4l2Error { _ = try V4L2Device(path: "/dev/video0", driver: driver) })
        #expect(reopen.errno == ENOENT)
        // The other camera goes on.
        #expect(try capture(other, count: 3).count == 3)
        other.close()
    }

    @Test func unplugOnDemandWakesAWaitingPoll() throws {
        let (driver, _) = scripted(["/dev/video0": webcam { $0.startPhaseUs = 5_000_000 }])
        let device = try V4L2Device(path: "/dev/video0", driver: driver)
        defer { device.close() }
        try device.startStreaming()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { driver.unplug("/dev/video0") }
        let before = Date()
        let error = try #require(v4l2Error { _ = try device.dequeueFrame(timeoutMs: 3000) })
        #expect(error.errno == ENODEV)
        #expect(Date().timeIntervalSince(before) < 2)
    }

}
