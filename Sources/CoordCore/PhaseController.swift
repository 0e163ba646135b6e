/// Moves a free-running sensor's frame phase onto the rig's grid by choosing the duration of its next frame,
/// as a sensor's frame-duration control allows. One large step acquires the grid; after that a gentle
/// proportional correction tracks the sensor's own drift while averaging out timestamp noise.
///
/// The duration chosen after frame n takes effect one frame later (the sensor is already exposing n+1), so
/// after an acquisition step the next observation is ignored rather than corrected twice.
public struct PhaseController: Sendable {
    public let grid: FrameGrid
    /// Fraction of the observed phase error corrected per frame once locked.
    public var gain: Double
    /// An error beyond this is corrected in one step.
    public var acquireThresholdMicroseconds: Double
    /// The duration limits the sensor declares.
    public let minPeriodMicroseconds: Double
    public let maxPeriodMicroseconds: Double
    private var ignoreNext = 0

    public init(grid: FrameGrid, minPeriodMicroseconds: Double, maxPeriodMicroseconds: Double, gain: Double = 0.25,
                acquireThresholdMicroseconds: Double = 1_000) {
        self.grid = grid
        self.minPeriodMicroseconds = minPeriodMicroseconds
        self.maxPeriodMicroseconds = maxPeriodMicroseconds
        self.gain = gain
        self.acquireThresholdMicroseconds = acquireThresholdMicroseconds
    }

    /// Whether the sensor's limits leave room to shift its phase at all: a sensor already at its fastest
    /// frame rate cannot shorten a frame, so it can only be delayed, one frame at most by its longest duration.
    public var canShiftPhase: Bool {
        let p = Double(grid.periodMicroseconds)
        return minPeriodMicroseconds < p && maxPeriodMicroseconds > p
    }

    /// The duration to request for the sensor's next frame, given the exposure centre just observed (rig µs).
    public mutating func nextPeriod(afterFrameCenteredAt center: Int64) -> Double {
        let p = Double(grid.periodMicroseconds)
        if ignoreNext > 0 {
            ignoreNext -= 1
            return p
        }
        let error = Double(grid.phaseError(of: center))
        let correction = abs(error) > acquireThresholdMicroseconds ? error : gain * error
        if abs(error) > acquireThresholdMicroseconds { ignoreNext = 1 }
        return min(maxPeriodMicroseconds, max(minPeriodMicroseconds, p - correction))
    }
}
