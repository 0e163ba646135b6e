// V4L2Camera driven by the scripted UVC webcam: open, configure, stream, timestamps against the truth,
// drops, unplug, and each way a camera can refuse, all through the one V4L2Driver seam.
import CV4L2
import CoordCore
import Foundation
import Synchronization
import Platform
import Testing
import V4L2
import V4L2Simulator
@testable import Capture
@testable import Pixels
import ScriptedCameras

#if canImport(Glibc)
import Glibc
#endif

/// The true exposure centre of every frame the scripted camera painted, by sequence number; it paints as
/// `coord-node-scripted --v4l2-script` does (test pattern, stripe, YUYV or a real JPEG).
// Not Sendable: the painter runs under its driver's lock; the centres are read from the test's thread under their own.
private final class Truth {
    private let centres = Mutex<[UInt32: Int64]>([:])
    private let painter = ScriptedPainter(ordinal: StripeOrdinal())

    func paint(_ frame: ScriptedV4L2Driver.Frame) -> Int {
        let centre = frame.startOfExposureUs + frame.exposureUs / 2
        centres.withLock { $0[frame.sequence] = centre }
        return painter.paint(frame)
    }

    func centre(_ sequence: UInt32) -> Int64? {
        centres.withLock { $0[sequence] }
    }
}

private func driver(_ device: ScriptedV4L2Driver.Device, path: String = "/dev/video0") -> (ScriptedV4L2Driver, Truth) {
    let truth = Truth()
    return (ScriptedV4L2Driver(script: .init(devices: [path: device]), seed: 7, painter: truth.paint), truth)
}

private func open(_ driver: V4L2Driver, _ w: Int = 640, _ h: Int = 480, fps: Double = 30, codec: VideoCodec = .mjpeg,
                  path: String = "/dev/video0") throws -> V4L2Camera {
    try V4L2Camera(path: path, driver: driver, width: w, height: h, periodMicroseconds: 1_000_000 / fps, codec: codec,
                   localClock: { $0 })
}

private func frames(_ camera: V4L2Camera, count: Int, timeout: Int64 = 1_000_000) -> (captures: [Capture], ended: String?) {
    var captures: [Capture] = []
    while captures.count < count {
        switch camera.next(timeoutMicroseconds: timeout) {
        case .frame(let c): captures.append(c)
        case .none: return (captures, nil)
        case .ended(let why): return (captures, why)
        }
    }
    return (captures, nil)
}

private func openError(_ body: () throws -> V4L2Camera) -> String? {
    do {
        _ = try body()
        return nil
    } catch {
        return "\(error)"
    }
}

@Suite(.serialized) struct V4L2CameraTests {
    @Test func anMJPEGTakeOpensTheMJPEGStreamLocksControlsAndHandsOverJPEGs() throws {
        let (d, truth) = driver(.init(timestampJitterUs: 20))
        let camera = try open(d)
        defer { camera.stop() }
        #expect(camera.choice.fourcc == "MJPG" && camera.choice.passthrough)
        #expect(camera.controlNotes.isEmpty, "the C920 has every control coord locks")
        #expect(camera.exposureMicroseconds == 16_600, "half the frame interval, in the camera's 100 µs steps")
        #expect(!camera.canSteerPhase && camera.minPeriodMicroseconds == camera.maxPeriodMicroseconds)
        #expect(!camera.requestNextFramePeriod(30_000))
        try camera.start(alignedTo: nil)
        let (captures, ended) = frames(camera, count: 8)
        #expect(ended == nil && captures.count == 8)
        #expect(captures.map(\.sequence) == (0..<8).map { UInt32($0) })
        for c in captures {
            guard case .jpeg(let bytes) = c.payload else { Issue.record("MJPEG must pass through"); continue }
            #expect(bytes.starts(with: [0xFF, 0xD8]) && bytes.suffix(2) == [0xFF, 0xD9])
            #expect(c.timestampMeaning == .startOfExposure && c.exposureMicroseconds == 16_600)
            #expect(c.durationMicroseconds == 1_000_000.0 / 30)
            // The timestamp-derived centre is the true one, within the driver's noise.
            let error = c.stampedCenterLocal - Double(truth.centre(c.sequence)!)
            #expect(abs(error) < 150, "frame \(c.sequence) off by \(error) µs")
        }
    }

    @Test func aRawTakeConvertsYUYVAndItsStripeSurvives() throws {
        let (d, _) = driver(.init(timestampSource: "eof"))
        let camera = try open(d, codec: .ffv1)
        defer { camera.stop() }
        #expect(camera.choice.fourcc == "YUYV" && camera.choice.layout == .yuyv)
        try camera.start(alignedTo: nil)
        let (captures, _) = frames(camera, count: 3)
        #expect(captures.count == 3)
        for c in captures {
            guard case .picture(let picture) = c.payload else { Issue.record("YUYV must arrive as a picture"); continue }
            guard case .endOfFrame(let readout) = c.timestampMeaning else { Issue.record("the script stamps EOF"); continue }
            #expect(abs(readout - 1_000_000.0 / 60) < 0.01, "half a frame interval")
            let stripe = SyncStripe.decode(luma: UnsafeBufferPointer(picture.luma), stride: picture.width)
            #expect(stripe?.frameCounter == c.sequence)
            // The readout assumption (half an interval) is what this driver does, so the EOF centre is right too.
            #expect(abs(c.stampedCenterLocal - Double(stripe!.trueCenterMicroseconds)) < 2)
            camera.release(c)
        }
    }

    @Test func droppedSequencesShowAsGaps() throws {
        let (d, _) = driver(.init(dropSequences: [2, 3, 6]))
        let camera = try open(d)
        defer { camera.stop() }
        try camera.start(alignedTo: nil)
        let (captures, _) = frames(camera, count: 5)
        #expect(captures.map(\.sequence) == [0, 1, 4, 5, 7])
    }

    @Test func anUnpluggedCameraEndsWithASentenceNamingIt() throws {
        let (d, _) = driver(.init(unplugAfterFrames: 4))
        let camera = try open(d)
        defer { camera.stop() }
        try camera.start(alignedTo: nil)
        let (captures, ended) = frames(camera, count: 10)
        #expect(captures.count == 4)
        let why = try #require(ended)
        #expect(why.contains("/dev/video0") && why.contains("unplugged"), "\(why)")
        // And it stays ended.
        if case .ended = camera.next(timeoutMicroseconds: 10_000) {} else { Issue.record("an unplugged camera must stay ended") }
    }

    @Test func streamingStartsAtTheInstantThatPutsTheFirstCentreOnTheGridAndSettles() throws {
        // The scripted sensor starts exposing 7 ms after STREAMON: the first start misses by that, the settle fixes it.
        let (d, _) = driver(.init(startPhaseUs: 7_000))
        let camera = try open(d)
        defer { camera.stop() }
        let period = 1_000_000.0 / 30
        let anchor = GridAnchor(instantLocal: Double(MonotonicClock.now()) + 500_000, periodMicroseconds: period)
        try camera.start(alignedTo: anchor)
        camera.settlePhase(on: anchor)
        let settled = try #require(camera.settledPhaseMicroseconds)
        // Half the injected 7 ms: the settle removed the start-up latency; what is left is this machine's wake-up
        // jitter, which on a loaded 2-core CI runner without real-time priority reaches a few milliseconds.
        #expect(abs(settled) < 3_500, "settled \(settled) µs from the grid")
        let (captures, _) = frames(camera, count: 5)
        for c in captures {
            let phase = (c.stampedCenterLocal - anchor.instantLocal).truncatingRemainder(dividingBy: period)
            let wrapped = phase > period / 2 ? phase - period : phase < -period / 2 ? phase + period : phase
            #expect(abs(wrapped) < 4_000, "frame \(c.sequence) \(wrapped) µs from the grid")
        }
    }

    @Test func everyWayACameraRefusesIsOneSentenceNamingTheDevice() throws {
        let cases: [(ScriptedV4L2Driver.Device, String, (ScriptedV4L2Driver) throws -> V4L2Camera)] = [
            (.init(openError: "EBUSY"), "/dev/video0 is busy (another program is using the camera)", { try open($0) }),
            (.init(openError: "EACCES"), "/dev/video0 cannot be opened: permission denied", { try open($0) }),
            (.init(profile: "metadata-node"), "/dev/video0 (HD Pro Webcam C920) is not a video capture node", { try open($0) }),
            (.init(sFmtError: "EBUSY"), "VIDIOC_S_FMT on /dev/video0 failed", { try open($0) }),
            (.init(), "/dev/video0 cannot deliver 1280x720 at 30 fps for h264", { try open($0, 1280, 720, codec: .h264) }),
            (.init(), "/dev/video0 cannot deliver 640x480 at 60 fps for mjpeg", { try open($0, fps: 60) }),
            (.init(), "/dev/video9 does not exist (is the camera plugged in?)", { try open($0, path: "/dev/video9") }),
        ]
        for (device, words, body) in cases {
            let (d, _) = driver(device)
            let message = try #require(openError { try body(d) }, "\(words)")
            #expect(message.contains(words), "\(message)")
            #expect(!message.contains("\n"))
        }
    }

    @Test func aCameraThatCannotStreamSaysWhy() throws {
        let (d, _) = driver(.init(streamonError: "ENOSPC"))
        let camera = try open(d)
        defer { camera.stop() }
        #expect(throws: CameraSourceError.self) { try camera.start(alignedTo: nil) }
        do {
            try camera.start(alignedTo: nil)
        } catch {
            #expect("\(error)".contains("VIDIOC_STREAMON on /dev/video0 failed: not enough USB bandwidth"), "\(error)")
        }
    }

    @Test func theListingDescribesADeviceAndItsFormats() throws {
        let (d, _) = driver(.init())
        let found = try V4L2CameraDescription.probe(path: "/dev/video0", driver: d)
        let lines = found.lines(bus: "usb1, usb2, 480 Mbit/s")
        #expect(lines.prefix(4) == ["/dev/video0", "  driver: uvcvideo", "  card: HD Pro Webcam C920",
                                    "  bus: usb-0000:00:14.0-1 (usb1, usb2, 480 Mbit/s)"])
        #expect(lines.contains("      1280x720 @ 10, 5 fps"))
        #expect(found.formatProblem == nil && found.handshakeFormats.first?.pixelFormat == "MJPG")
    }
}

/// The scripted webcam, except that the buffers with the given sequence numbers come back flagged
/// V4L2_BUF_FLAG_ERROR, as a driver marks a frame damaged in transfer.
private final class DamagingDriver: V4L2Driver {
    let inner: ScriptedV4L2Driver
    let damaged: Set<UInt32>

    init(_ inner: ScriptedV4L2Driver, damaged: Set<UInt32>) {
        self.inner = inner
        self.damaged = damaged
    }

    func isCharacterDevice(_ path: String) -> Int32 { inner.isCharacterDevice(path) }
    func open(_ path: String, flags: Int32) -> Int32 { inner.open(path, flags: flags) }
    func close(_ fd: Int32) -> Int32 { inner.close(fd) }
    func mmap(_ fd: Int32, length: Int, offset: Int64) -> UnsafeMutableRawPointer? { inner.mmap(fd, length: length, offset: offset) }
    func munmap(_ start: UnsafeMutableRawPointer, length: Int) -> Int32 { inner.munmap(start, length: length) }
    func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 { inner.poll(fd, timeoutMs: timeoutMs) }

    func ioctl(_ fd: Int32, _ request: V4L2Request, _ argument: UnsafeMutableRawPointer) -> Int32 {
        let result = inner.ioctl(fd, request, argument)
        if request == .dqbuf, result == 0 {
            let buffer = argument.assumingMemoryBound(to: v4l2_buffer.self)
            if damaged.contains(buffer.pointee.sequence) { buffer.pointee.flags |= CV4L2_BUF_FLAG_ERROR }
        }
        return result
    }
}

extension V4L2CameraTests {
    @Test func aBufferTheDriverFlagsDamagedIsDroppedLeavingAGap() throws {
        let (d, _) = driver(.init())
        let camera = try open(DamagingDriver(d, damaged: [1, 4]))
        defer { camera.stop() }
        try camera.start(alignedTo: nil)
        let (captures, _) = frames(camera, count: 4)
        #expect(captures.map(\.sequence) == [0, 2, 3, 5])
        #expect(camera.damagedBuffers == 2)
    }
}

@Suite("V4L2 camera controls (scripted uvcvideo webcam)")
struct V4L2ControlTests {
    @Test func theOperatorsControlsReachTheDeviceAsControlIoctls() throws {
        let (driver, _) = driver(.init())
        let camera = try open(driver)
        defer { camera.stop() }
        #expect(camera.controlRanges.exposureMicroseconds == 300...204_700)
        #expect(camera.controlRanges.whiteBalanceKelvin == 2000...6500)
        let applied = try camera.apply(CameraControls(exposureMicroseconds: 10_000, gainDecibels: 100, whiteBalanceKelvin: 4500, focus: 0.5))
        #expect(driver.controlValue(CV4L2_CID_EXPOSURE_AUTO, path: "/dev/video0") == Int32(CV4L2_EXPOSURE_MANUAL))
        #expect(driver.controlValue(CV4L2_CID_EXPOSURE_ABSOLUTE, path: "/dev/video0") == 100)
        #expect(driver.controlValue(CV4L2_CID_GAIN, path: "/dev/video0") == 100)
        #expect(driver.controlValue(CV4L2_CID_AUTO_WHITE_BALANCE, path: "/dev/video0") == 0)
        #expect(driver.controlValue(CV4L2_CID_WHITE_BALANCE_TEMPERATURE, path: "/dev/video0") == 4500)
        #expect(driver.controlValue(CV4L2_CID_FOCUS_ABSOLUTE, path: "/dev/video0") == 125)
        #expect(applied == CameraControls(exposureMicroseconds: 10_000, gainDecibels: 100, whiteBalanceKelvin: 4500, focus: 0.5))
        // Frame centres are computed with the exposure now in force.
        #expect(camera.exposureMicroseconds == 10_000)
    }

    @Test func aValueOutOfRangeIsOneSentenceNamingCameraControlAndRange() throws {
        let (driver, _) = driver(.init())
        let camera = try open(driver)
        defer { camera.stop() }
        #expect {
            _ = try camera.apply(CameraControls(exposureMicroseconds: 500_000))
        } throws: { error in
            let sentence = "\(error)"
            return sentence.contains("/dev/video0") && sentence.contains("exposure_us") && sentence.contains("300…204700")
        }
        #expect(driver.controlValue(CV4L2_CID_EXPOSURE_ABSOLUTE, path: "/dev/video0") != 5000)
    }
}
