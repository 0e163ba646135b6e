import CoordCore
import Pixels
/// What a camera delivers for one frame: a raw picture to encode, or a compressed packet to mux as it is.
// Sendable as its picture is: handed from the source's thread to the recorder's and back, never shared.
public enum CapturePayload: Sendable {
    /// 8-bit yuv420p, from the source's buffer pool (give it back with `CameraSource.release`).
    case picture(PlanarFrame)
    /// One complete JPEG (MJPEG), copied out of the driver's buffer; muxed without re-encoding.
    case jpeg([UInt8])
}

/// What a buffer timestamp marks in a frame's life, as V4L2's `V4L2_BUF_FLAG_TSTAMP_SRC_*` says.
public enum TimestampMeaning: Equatable, Sendable {
    /// The start of the frame's exposure (`TSTAMP_SRC_SOE`, as uvcvideo reports it).
    case startOfExposure
    /// The end of the frame (`TSTAMP_SRC_EOF`, most CSI and platform drivers): the frame's last data left the
    /// sensor `readoutMicroseconds` after its exposure ended.
    case endOfFrame(readoutMicroseconds: Double)

    /// The exposure centre this timestamp implies, on the timestamp's own clock (µs).
    ///
    /// Start of exposure: `t + exposure/2`. End of frame: the exposure ended one readout before the data was
    /// complete, so `t − readout − exposure/2`. The readout is an assumption the caller states (a V4L2 camera
    /// does not report it); `V4L2Camera` assumes half a frame interval (see there).
    public func center(timestamp: Double, exposureMicroseconds: Double) -> Double {
        switch self {
        case .startOfExposure: return timestamp + exposureMicroseconds / 2
        case .endOfFrame(let readout): return timestamp - readout - exposureMicroseconds / 2
        }
    }
}

/// One frame as the node receives it from a camera source.
// Sendable as its payload: one owner at a time, handed over through the source's queue.
public struct Capture: Sendable {
    /// The picture or the packet.
    public let payload: CapturePayload
    /// The source's frame counter; a gap means frames were lost before the node saw them.
    public let sequence: UInt32
    /// The buffer timestamp on the node's local clock (µs), with the driver's noise.
    public let timestampLocal: Int64
    /// What `timestampLocal` marks.
    public let timestampMeaning: TimestampMeaning
    /// The exposure time the frame was taken with, µs.
    public let exposureMicroseconds: Int64
    /// How long this frame runs until the next one starts, in the source's own time: the duration requested for
    /// it, or the nominal frame interval.
    public let durationMicroseconds: Double

    public init(payload: CapturePayload, sequence: UInt32, timestampLocal: Int64, timestampMeaning: TimestampMeaning,
                exposureMicroseconds: Int64, durationMicroseconds: Double) {
        self.payload = payload
        self.sequence = sequence
        self.timestampLocal = timestampLocal
        self.timestampMeaning = timestampMeaning
        self.exposureMicroseconds = exposureMicroseconds
        self.durationMicroseconds = durationMicroseconds
    }

    /// The exposure centre the timestamp implies, on the node's local clock (µs); noisy, as the timestamp is.
    public var stampedCenterLocal: Double {
        timestampMeaning.center(timestamp: Double(timestampLocal), exposureMicroseconds: Double(exposureMicroseconds))
    }
}

/// What a camera source answers when asked for its next frame.
public enum CaptureResult: Sendable {
    /// The next frame.
    case frame(Capture)
    /// Nothing within the timeout (or the source is stopped).
    case none
    /// The camera is gone for good (unplugged, or its driver failed); one sentence says why.
    case ended(String)
}

/// Where the rig's frame grid lies on the node's local clock, so a source that cannot steer its frames can at
/// least start its stream in step with it.
public struct GridAnchor: Equatable, Sendable {
    /// One grid instant (a group's exposure centre) on the node's local clock, µs.
    public var instantLocal: Double
    /// The grid period the source runs at, µs of the local clock.
    public var periodMicroseconds: Double

    public init(instantLocal: Double, periodMicroseconds: Double) {
        self.instantLocal = instantLocal
        self.periodMicroseconds = periodMicroseconds
    }

    /// The first grid instant at or after `local`.
    public func nextInstant(atOrAfter local: Double) -> Double {
        guard periodMicroseconds > 0 else { return max(local, instantLocal) }
        let k = ((local - instantLocal) / periodMicroseconds).rounded(.up)
        return instantLocal + k * periodMicroseconds
    }
}

/// A camera the recorder takes frames from: a synthetic sensor or a V4L2 device. One recorder thread drives it.
public protocol CameraSource: AnyObject {
    /// The frame-duration limits the source declares, µs.
    var minPeriodMicroseconds: Double { get }
    var maxPeriodMicroseconds: Double { get }
    /// Whether `requestNextFramePeriod` can move its frames at all; a V4L2 camera free-runs once streaming.
    var canSteerPhase: Bool { get }
    /// Starts delivering frames; a source that cannot steer starts as close to `anchor`'s grid as it can.
    /// Throws one sentence when the camera cannot start.
    func start(alignedTo anchor: GridAnchor?) throws
    /// Called once after `start`, before frames are taken: a source that cannot steer may restart its stream to
    /// bring its phase nearer the grid (the frames it looks at are not delivered).
    func settlePhase(on anchor: GridAnchor)
    /// Stops delivering frames and lets go of the device; safe to call repeatedly.
    func stop()
    /// The next frame, waiting at most `timeoutMicroseconds`.
    func next(timeoutMicroseconds: Int64) -> CaptureResult
    /// Gives a capture's picture back to the source's pool.
    func release(_ capture: Capture)
    /// Requests one frame duration for the next frame; false when the source cannot or the value is out of range.
    @discardableResult
    func requestNextFramePeriod(_ microseconds: Double) -> Bool
    /// How many frames later and in what steps a requested duration applies (the phase law counts on it).
    var frameDurationTiming: FrameDurationTiming { get }
    /// Why it free-runs, if it says.
    var freeRunReason: String? { get }
    /// What the camera is, as its driver names it (the manifest's `device`).
    var identity: DeviceIdentity { get }
    /// Which buffer stamp its centres come from and the uncertainty that adds (a V4L2 camera; nil otherwise).
    var stampChoice: BufferStampChoice? { get }
}

extension CameraSource {
    /// A source that steers its frames (or cannot restart) has nothing to settle.
    public func settlePhase(on anchor: GridAnchor) {}
    /// A source takes a requested duration for its very next frame, any number of µs, unless it says otherwise.
    public var frameDurationTiming: FrameDurationTiming { .immediate }
    /// Why a source that free-runs does (one clause), where the arm warning should say more than its kind.
    public var freeRunReason: String? { nil }
    public var stampChoice: BufferStampChoice? { nil }
}

/// A camera whose picture controls (exposure, gain, white balance, focus) can be set while it runs.
public protocol ControllableCamera: AnyObject {
    /// What its controls accept (nil: a control it lacks).
    var controlRanges: ControlRanges { get }
    /// Sets the controls given (the others stay as they are) and returns every control's value now in force;
    /// callable from any thread while the camera streams. Throws one sentence when the device refuses.
    func apply(_ controls: CameraControls) throws -> CameraControls
    /// Whether it streams now (a stopped camera takes controls only when it opens again).
    var isStreaming: Bool { get }
}

/// A camera that cannot start, as one sentence.
public struct CameraSourceError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What went wrong, naming the device, without a trailing period (callers prefix the camera).
    public let sentence: String
    public init(_ sentence: String) { self.sentence = sentence }
    public var description: String { sentence }
}
