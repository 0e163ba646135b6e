/// The rig's frame grid on the rig timebase: group `g` is the instant `t0 + g × period` (CONTRACT §4).
public struct FrameGrid: Equatable, Sendable, Codable {
    public var t0: Int64
    public var periodMicroseconds: Int64

    public init(t0: Int64, periodMicroseconds: Int64) {
        precondition(periodMicroseconds > 0)
        self.t0 = t0
        self.periodMicroseconds = periodMicroseconds
    }

    /// The grid period for a frame rate, rounded to whole microseconds.
    public static func period(fps: Int) -> Int64 { (1_000_000 + Int64(fps) / 2) / Int64(fps) }

    public func instant(ofGroup group: Int64) -> Int64 { t0 + group * periodMicroseconds }

    /// The group whose instant is nearest to `time`.
    public func nearestGroup(to time: Int64) -> Int64 {
        let d = time - t0
        let p = periodMicroseconds
        // floor((d + p/2) / p) for negative d too.
        let shifted = d + p / 2
        return shifted >= 0 ? shifted / p : -((-shifted + p - 1) / p)
    }

    /// Signed distance of `time` from its nearest group instant.
    public func phaseError(of time: Int64) -> Int64 { time - instant(ofGroup: nearestGroup(to: time)) }
}
