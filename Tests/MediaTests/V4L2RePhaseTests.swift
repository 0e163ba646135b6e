// Re-phasing a streaming V4L2 camera through VIDIOC_S_PARM: the scripted webcam answers EBUSY as uvcvideo does,
// and in its vivid-like mode ("resync") takes the interval from its next frame on.
import CoordCore
import Foundation
import Synchronization
import Testing
import V4L2
import V4L2Simulator
@testable import Capture
import ScriptedCameras

/// Every painted frame's true exposure centre, by sequence.
// Not Sendable: the painter runs under its driver's lock; the centres are read from the test's thread under their own.
private final class Centres {
    private let centres = Mutex<[UInt32: Int64]>([:])
    private let painter = ScriptedPainter(ordinal: StripeOrdinal())
    func paint(_ frame: ScriptedV4L2Driver.Frame) -> Int {
        centres.withLock { $0[frame.sequence] = frame.startOfExposureUs + frame.exposureUs / 2 }
        return painter.paint(frame)
    }
    func centre(_ sequence: UInt32) -> Int64? { centres.withLock { $0[sequence] } }
}

private func camera(sParmWhileStreaming: String?) throws -> (V4L2Camera, Centres) {
    var device = ScriptedV4L2Driver.Device()
    device.sParmWhileStreaming = sParmWhileStreaming
    let centres = Centres()
    let driver = ScriptedV4L2Driver(script: .init(devices: ["/dev/video0": device]), seed: 11, painter: centres.paint)
    let camera = try V4L2Camera(path: "/dev/video0", driver: driver, width: 640, height: 480,
                                periodMicroseconds: 1_000_000 / 30, codec: .mjpeg, localClock: { $0 })
    return (camera, centres)
}

private func sequences(_ camera: V4L2Camera, count: Int) -> [UInt32] {
    var out: [UInt32] = []
    while out.count < count {
        switch camera.next(timeoutMicroseconds: 1_000_000) {
        case .frame(let c):
            out.append(c.sequence)
            camera.release(c)
        case .none, .ended: return out
        }
    }
    return out
}

@Suite(.serialized) struct V4L2RePhaseTests {
    @Test func aUVCWebcamRefusesAnIntervalWhileStreamingAndIsLeftAlone() throws {
        let (camera, _) = try camera(sParmWhileStreaming: nil)
        defer { camera.stop() }
        try camera.start(alignedTo: nil)
        guard case .refused(let why) = try #require(camera.rePhaseVerdict) else {
            Issue.record("a UVC webcam took S_PARM while streaming")
            return
        }
        #expect(why.contains("VIDIOC_S_PARM"), "\(why)")
        #expect(why.lowercased().contains("busy"), "\(why)")
        #expect(!camera.rePhase(throughPeriod: 1_000_000 / 24))
        #expect(sequences(camera, count: 3).count == 3)
    }

    @Test func aVividLikeCameraRunsOneFrameAtTheOtherIntervalAndEveryLaterFrameMoves() throws {
        let (camera, centres) = try camera(sParmWhileStreaming: "resync")
        defer { camera.stop() }
        #expect(camera.rePhaseVerdict == nil)
        try camera.start(alignedTo: nil)
        #expect(camera.rePhaseVerdict == .accepted)
        #expect(camera.offeredPeriodsMicroseconds.map { Int($0.rounded()) }.contains(41_667))
        _ = sequences(camera, count: 4)
        #expect(camera.rePhase(throughPeriod: 1_000_000 / 24))
        // A second step before the first took effect is refused (one odd frame at a time).
        #expect(!camera.rePhase(throughPeriod: 1_000_000 / 20))
        let after = sequences(camera, count: 8)
        #expect(after.count == 8)
        let stamps = after.compactMap { centres.centre($0) }
        let gaps = zip(stamps.dropFirst(), stamps).map { Int($0 - $1) }
        // One frame ran 1/24 s, every other one 1/30 s: the frames after it sit 8.3 ms later on the old grid.
        #expect(gaps.filter { abs($0 - 41_667) <= 2 }.count == 1, "\(gaps)")
        #expect(gaps.filter { abs($0 - 33_333) <= 2 }.count == gaps.count - 1, "\(gaps)")
        #expect(camera.rePhase(throughPeriod: 1_000_000 / 24), "the nominal interval is back, so another step is taken")
    }
}
