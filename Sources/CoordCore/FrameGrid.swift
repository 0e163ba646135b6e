/// The rig's frame grid on the rig timebase: group `g` is the instant `t0 + g × period` (CONTRACT §4), or at a
/// non-integer rate `t0 + round(g × 10⁶ × D / N)`, exact in the rational so a 29.97 grid never drifts (§13).
public struct FrameGrid: Equatable, Sendable, Codable {
    public var t0: Int64
    /// The rounded period (the manifest's `frame_period_us`).
    public var periodMicroseconds: Int64
    /// The rational rate of a non-integer grid (30000/1001); nil for an integer rate, whose grid steps by the period.
    public var rationalRate: FrameRate?

    public init(t0: Int64, periodMicroseconds: Int64) {
        precondition(periodMicroseconds > 0)
        self.t0 = t0
        self.periodMicroseconds = periodMicroseconds
    }

    /// The grid of `rate` from `t0`: an integer rate steps by its rounded period as ever, any other is exact.
    public init(t0: Int64, rate: FrameRate) {
        self.init(t0: t0, periodMicroseconds: rate.periodMicroseconds)
        rationalRate = rate.isInteger ? nil : rate
    }

    /// The grid period for a frame rate, rounded to whole microseconds.
    public static func period(fps: Int) -> Int64 { (1_000_000 + Int64(fps) / 2) / Int64(fps) }

    /// One group's length, unrounded at a non-integer rate (33 366.67 µs at 29.97): what a sensor runs.
    public var exactPeriodMicroseconds: Double { rationalRate?.exactPeriodMicroseconds ?? Double(periodMicroseconds) }

    /// The grid's rate: its rational, or the whole rate of its period.
    public var rate: FrameRate { rationalRate ?? FrameRate(Timecode.fps(framePeriodMicroseconds: periodMicroseconds)) }

    public func instant(ofGroup group: Int64) -> Int64 {
        if let rationalRate { return t0 + rationalRate.microseconds(ofFrame: group) }
        return t0 + group * periodMicroseconds
    }

    /// The group whose instant is nearest to `time` (half way goes to the later one).
    public func nearestGroup(to time: Int64) -> Int64 {
        let d = time - t0
        if let rationalRate {
            let before = rationalRate.framesElapsed(atMicroseconds: d)
            let gapBefore = d - rationalRate.microseconds(ofFrame: before)
            let gapAfter = rationalRate.microseconds(ofFrame: before + 1) - d
            return gapAfter <= gapBefore ? before + 1 : before
        }
        let p = periodMicroseconds
        // floor((d + p/2) / p) for negative d too.
        let shifted = d + p / 2
        return shifted >= 0 ? shifted / p : -((-shifted + p - 1) / p)
    }

    /// Signed distance of `time` from its nearest group instant.
    public func phaseError(of time: Int64) -> Int64 { time - instant(ofGroup: nearestGroup(to: time)) }
}
