import Foundation

/// Steers a camera that free-runs but takes a new frame interval while it streams (vivid does; uvcvideo answers
/// EBUSY): running ONE frame at another interval the camera offers, then back, moves every later frame by the
/// difference, for good. The driver snaps intervals to its list, so the rate itself cannot be trimmed; the
/// phase is re-set in steps of (offered period − nominal period) whenever it strays.
///
/// Pure: it takes each frame's measured phase (its centre minus the nearest grid instant, on the rig timebase)
/// and answers what to do. The decision rests on the median of a window of frames, so timestamp noise (vivid's
/// kthread wakes late under load by milliseconds) does not make it hunt; after each step it waits for the
/// camera to settle before it measures again.
public struct PhaseSteering: Equatable, Sendable {
    /// What the camera should do now.
    public enum Decision: Equatable, Sendable {
        case nothing
        /// Run the next frame at `periodMicroseconds`, then the nominal period again: the frames after it move by
        /// `shiftMicroseconds` (positive: later).
        case rePhase(periodMicroseconds: Double, shiftMicroseconds: Double)
    }

    public let periodMicroseconds: Double
    /// The other periods the camera offers at its size, within [period/2, 3·period/2] (a longer step would
    /// leave a group without a frame).
    public let alternativePeriods: [Double]
    /// A median phase within this is left alone.
    public let toleranceMicroseconds: Double
    /// Frames whose median decides a step.
    public let windowFrames: Int
    /// Frames ignored after a step (the step itself and the fit starting again).
    public let settleFrames: Int

    private var errors: [Double] = []
    private var settling: Int
    /// Steps taken so far.
    public private(set) var steps = 0
    /// The median phase of the newest full window (µs), nil before the first.
    public private(set) var lastMedian: Double?

    /// `tolerance` is a fraction of the period.
    public init(periodMicroseconds: Double, offeredPeriods: [Double], tolerance: Double = 0.1, windowFrames: Int = 15,
                settleFrames: Int = 3) {
        self.periodMicroseconds = periodMicroseconds
        alternativePeriods = offeredPeriods.filter {
            abs($0 - periodMicroseconds) > periodMicroseconds * 1e-3
                && $0 >= periodMicroseconds / 2 - 1 && $0 <= periodMicroseconds * 1.5
        }.sorted()
        toleranceMicroseconds = periodMicroseconds * tolerance
        self.windowFrames = max(1, windowFrames)
        self.settleFrames = max(0, settleFrames)
        settling = max(0, settleFrames)
    }

    /// Whether a step can move the phase at all (the camera offers another interval near its own).
    public var canStep: Bool { !alternativePeriods.isEmpty }

    /// One frame's phase error (µs, centre − nearest grid instant); wrapped into half a period either side.
    public mutating func observe(phaseErrorMicroseconds error: Double) -> Decision {
        guard canStep, periodMicroseconds > 0, error.isFinite else { return .nothing }
        if settling > 0 {
            settling -= 1
            return .nothing
        }
        errors.append(Self.wrap(error, period: periodMicroseconds))
        guard errors.count >= windowFrames else { return .nothing }
        // A phase near half a period shows up on both sides of the wrap: the median is taken around the window's
        // circular mean, so such a camera is not pulled both ways.
        let centre = Self.circularMean(errors, period: periodMicroseconds)
        let sorted = errors.map { Self.wrap($0 - centre, period: periodMicroseconds) }.sorted()
        let around = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        let median = Self.wrap(centre + around, period: periodMicroseconds)
        errors.removeAll(keepingCapacity: true)
        lastMedian = median
        guard abs(median) > toleranceMicroseconds else { return .nothing }
        guard let best = alternativePeriods.min(by: { abs(median + $0 - periodMicroseconds) < abs(median + $1 - periodMicroseconds) })
        else { return .nothing }
        let shift = best - periodMicroseconds
        // Only a step that brings the phase clearly nearer (half a tolerance) is worth an irregular frame.
        guard abs(Self.wrap(median + shift, period: periodMicroseconds)) < abs(median) - toleranceMicroseconds / 2 else { return .nothing }
        steps += 1
        settling = settleFrames
        return .rePhase(periodMicroseconds: best, shiftMicroseconds: shift)
    }

    /// The mean of phases on the circle of one period (µs, within half a period of zero).
    static func circularMean(_ xs: [Double], period: Double) -> Double {
        var c = 0.0, s = 0.0
        for x in xs {
            c += cos(2 * .pi * x / period)
            s += sin(2 * .pi * x / period)
        }
        return c == 0 && s == 0 ? 0 : atan2(s, c) / (2 * .pi) * period
    }

    /// `x` folded into (−period/2, period/2].
    static func wrap(_ x: Double, period: Double) -> Double {
        var r = x.truncatingRemainder(dividingBy: period)
        if r > period / 2 { r -= period }
        if r <= -period / 2 { r += period }
        return r
    }
}
