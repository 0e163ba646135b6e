/// A camera that free-runs but may take a new frame interval while it streams, which moves its later frames
/// (vivid restarts its frame timing from VIDIOC_S_PARM; uvcvideo refuses S_PARM while streaming with EBUSY).
/// Whether this camera does is found out once its stream runs, by asking for the interval it already has.
public protocol RePhasingCamera: AnyObject {
    /// nil until the stream ran; then whether S_PARM while streaming was taken, and if not the driver's answer.
    var rePhaseVerdict: RePhaseVerdict? { get }
    /// The frame periods (µs) the camera offers at its format and size, its own among them.
    var offeredPeriodsMicroseconds: [Double] { get }
    /// Runs the next frame at `periodMicroseconds` (one the camera offers) and the nominal period again after
    /// it; false when the driver refused (nothing moved).
    func rePhase(throughPeriod periodMicroseconds: Double) -> Bool
}

/// What a camera answered when asked for a frame interval while streaming.
public enum RePhaseVerdict: Equatable, Sendable {
    case accepted
    /// One sentence: the driver's refusal (e.g. "VIDIOC_S_PARM on /dev/video0 failed: Device or resource busy").
    case refused(String)
}
