/// Estimates a free-running sensor's frame timing from its noisy buffer timestamps, and steers the sensor so
/// each frame's exposure centre lands on the rig's grid, by choosing one frame's duration at a time as a
/// sensor's frame-duration control allows.
///
/// The model: a frame's true centre is `a + b·x`, where `x` is the sum of the frame durations the sensor ran
/// since the estimator's reference and `b` the sensor's clock rate against the node's clock (`1 + ε`, ε a few
/// ppm to a few hundred). Timestamps carry driver noise, so `a` and `b` are fitted by least squares over a
/// sliding window of frames: the fitted centre is far less noisy than any one timestamp, and because every
/// duration change is part of `x`, a correction never confuses the fit. The controller then sets the next
/// duration so the predicted centre two frames ahead lands on the grid (deadbeat on the filtered estimate:
/// the loop follows the estimate, not the noise). Nothing here depends on the sensor or the noise level:
/// the window is a span of time and the noise is measured from the fit's residuals.
///
/// A sensor that applies a duration `delayFrames` frames late (a Raspberry Pi's) has that many frames already
/// committed when the law decides: it counts the durations it asked for them (`steer` remembers each request by
/// the frame it sets) and steers the first frame still free, so it never corrects the same error twice and does
/// not oscillate. Durations are chosen in whole lines of the sensor's line time, the nearest to the grid.
public struct PhaseController: Sendable {
    public let grid: FrameGrid
    /// The duration limits the sensor declares.
    public let minPeriodMicroseconds: Double
    public let maxPeriodMicroseconds: Double
    /// When and in what steps the sensor takes a requested duration.
    public let timing: FrameDurationTiming
    /// How many frames the fit spans (a fixed span of time, so the rate can wander slowly).
    public let windowFrames: Int

    /// The fitted state after the newest frame.
    public struct Estimate: Equatable, Sendable {
        /// The newest frame's estimated exposure centre on the node's local clock (µs).
        public var centerLocal: Double
        /// The sensor's rate against the node clock (1 + ε).
        public var rate: Double
        /// Standard deviation of the timestamps around the fit (the measured driver noise), µs.
        public var noiseMicroseconds: Double
        /// One-sigma error of `centerLocal`, µs.
        public var uncertaintyMicroseconds: Double
        /// Frames in the fit.
        public var frames: Int
        /// Where this frame sits in the fit (the sum of the sensor's frame durations since the fit began), and
        /// which fit that is (`restarts` when it was made): `center(at:)` re-estimates the frame later.
        public var position: Double
        public var epoch: Int
    }

    private struct Observation { var x: Double; var y: Double }
    private var window: [Observation] = []
    private var head = 0
    /// Sum of the durations the sensor ran since the reference frame (the `x` of the next frame).
    private var elapsed = 0.0
    private var lastSequence: UInt32?
    /// Durations asked of frames not yet seen, by the sequence number of the frame each one sets.
    private var inFlight: [UInt32: Double] = [:]
    private var outlierRun = 0
    public private(set) var estimate: Estimate?
    /// Times the fit was restarted (a sequence gap or timing the model could not explain).
    public private(set) var restarts = 0

    /// `windowSeconds` of frames are fitted; the default keeps the fit's error near 2σ/√N ≈ 4 µs at 30 fps
    /// with 30 µs timestamp noise while still following a rate that wanders over tens of seconds.
    public init(grid: FrameGrid, minPeriodMicroseconds: Double, maxPeriodMicroseconds: Double, windowSeconds: Double = 10,
                timing: FrameDurationTiming = .immediate) {
        self.grid = grid
        self.minPeriodMicroseconds = minPeriodMicroseconds
        self.maxPeriodMicroseconds = maxPeriodMicroseconds
        self.timing = timing
        windowFrames = max(8, Int((windowSeconds * 1_000_000 / Double(grid.periodMicroseconds)).rounded()))
    }

    /// Whether the sensor's limits leave room to shift its phase at all: a sensor already at its fastest
    /// frame rate cannot shorten a frame, and one at its slowest cannot lengthen one.
    public var canShiftPhase: Bool {
        let p = Double(grid.periodMicroseconds)
        return minPeriodMicroseconds < p && maxPeriodMicroseconds > p
    }

    /// Takes in one frame: its sequence number, its timestamped exposure centre on the local clock (noisy), and
    /// the duration the sensor runs this frame for (until the next frame starts), if the sensor reports it.
    /// Returns the filtered estimate of this frame's centre.
    @discardableResult
    public mutating func observe(sequence: UInt32, stampedCenterLocal y: Double, durationMicroseconds: Double?) -> Estimate {
        if let last = lastSequence, sequence != last &+ 1 {
            // Frames went missing: their durations are unknown, so the fit starts again from this frame.
            restart()
        }
        lastSequence = sequence
        let horizon = UInt32(timing.delayFrames + 1)
        inFlight = inFlight.filter { $0.key &- sequence >= 1 && $0.key &- sequence <= horizon }
        let x = elapsed
        elapsed += durationMicroseconds ?? grid.exactPeriodMicroseconds

        // A timestamp far outside what the fit predicts is left out of it; several in a row mean the sensor's
        // timing changed in a way the model does not explain, and the fit restarts.
        if let e = estimate, e.frames >= 10 {
            let predicted = predict(x)
            if abs(y - predicted) > max(6 * e.noiseMicroseconds, 200) {
                outlierRun += 1
                if outlierRun < 3 {
                    var kept = e
                    kept.centerLocal = predicted
                    kept.position = x
                    estimate = kept
                    return kept
                }
                restart()
                elapsed = durationMicroseconds ?? Double(grid.periodMicroseconds)
                return add(Observation(x: 0, y: y))
            }
        }
        outlierRun = 0
        return add(Observation(x: x, y: y))
    }

    /// The duration to request for the frame after the next one, so its centre lands on the grid.
    /// `toLocal` maps a rig-timebase instant to the node's local clock (the current clock mapping).
    /// `acquiring` is true before the take records: a group may then be skipped to reach the grid.
    public func nextDuration(toLocal: (Double) -> Double, toRig: (Double) -> Double, acquiring: Bool = false) -> Double {
        let p = Double(grid.periodMicroseconds)
        guard let e = estimate else { return timing.applied(p, min: minPeriodMicroseconds, max: maxPeriodMicroseconds) }
        // The next frame's start is already fixed (its duration is `elapsed`'s last step), and so are the durations
        // of the `delayFrames` frames after it (asked before, or nominal): steer the first frame still free.
        var committed = elapsed
        if timing.delayFrames > 0, let last = lastSequence {
            for k in 1...timing.delayFrames { committed += inFlight[last &+ UInt32(k)] ?? p }
        }
        let next = predict(committed)
        let wanted = next + p * e.rate
        var group = grid.nearestGroup(to: Int64(toRig(wanted).rounded()))
        var duration = (toLocal(Double(grid.instant(ofGroup: group))) - next) / e.rate
        if duration < minPeriodMicroseconds && (acquiring || (minPeriodMicroseconds - duration) * e.rate > p / 4) {
            // The group cannot be reached by shortening (a sensor at its fastest rate cannot shorten at all):
            // delay to the group after. While recording that costs a group (a dup), so only a frame a quarter
            // period late does it; a smaller lateness is left for the clamped duration to carry.
            let later = (toLocal(Double(grid.instant(ofGroup: group + 1))) - next) / e.rate
            if later <= maxPeriodMicroseconds { group += 1; duration = later }
        }
        return timing.applied(duration, min: minPeriodMicroseconds, max: maxPeriodMicroseconds)
    }

    /// `nextDuration`, remembered as the duration of the frame it sets (`delayFrames` after the next one), so the
    /// decisions of the frames between count it.
    public mutating func steer(toLocal: (Double) -> Double, toRig: (Double) -> Double, acquiring: Bool = false) -> Double {
        let duration = nextDuration(toLocal: toLocal, toRig: toRig, acquiring: acquiring)
        if let last = lastSequence { inFlight[last &+ UInt32(timing.delayFrames + 1)] = duration }
        return duration
    }

    /// A frame's centre re-estimated with every frame fitted since (local µs), or nil if the fit has restarted
    /// since that frame or the frame has left the window. Frames in the middle of the window are estimated
    /// about twice as well as the newest one, so the frames table is written from these, a little later.
    public func center(of frame: Estimate) -> Double? {
        guard frame.epoch == restarts, let fit, let oldest = window.map(\.x).min(), frame.position >= oldest else { return nil }
        return fit.a + fit.b * frame.position
    }

    private func predict(_ x: Double) -> Double {
        guard let fit else { return x }
        return fit.a + fit.b * x
    }

    /// The least-squares line through the window. A weak prior holds the rate near 1 (a sensor's clock is
    /// within a few hundred ppm of its node's) until the window spans enough time for the data to say more;
    /// it matters only for the first few frames.
    private var fit: (a: Double, b: Double, sigma: Double, n: Int, meanX: Double, sxx: Double)? {
        let n = window.count
        guard n > 0 else { return nil }
        var meanX = 0.0, meanY = 0.0
        for o in window { meanX += o.x; meanY += o.y }
        meanX /= Double(n); meanY /= Double(n)
        var sxx = 0.0, sxy = 0.0
        for o in window {
            sxx += (o.x - meanX) * (o.x - meanX)
            sxy += (o.x - meanX) * (o.y - meanY)
        }
        let priorRateSigma = 1e-3
        func line(noise: Double) -> (a: Double, b: Double) {
            let lambda = noise * noise / (priorRateSigma * priorRateSigma)
            let b = (sxy + lambda) / (sxx + lambda)
            return (meanY - b * meanX, b)
        }
        func residualSigma(_ l: (a: Double, b: Double)) -> Double {
            var sum = 0.0
            for o in window { let r = o.y - l.a - l.b * o.x; sum += r * r }
            return (sum / Double(n - 2)).squareRoot()
        }
        // Until the noise is measured, weigh the prior as if it were 10 µs.
        var l = line(noise: 10)
        guard n >= 3 else { return (l.a, l.b, .nan, n, meanX, sxx) }
        l = line(noise: max(residualSigma(l), 1))
        return (l.a, l.b, residualSigma(l), n, meanX, sxx)
    }

    private mutating func add(_ o: Observation) -> Estimate {
        if window.count < windowFrames {
            window.append(o)
        } else {
            window[head] = o
            head = (head + 1) % windowFrames
        }
        guard let f = fit else { fatalError("a fit exists once a frame is in the window") }
        let center = f.a + f.b * o.x
        let noise = f.sigma.isNaN ? 0 : f.sigma
        // The fitted line's error at the newest frame; with fewer than 3 frames the noise is unknown.
        let uncertainty = f.n >= 3 && f.sxx > 0
            ? noise * (1 / Double(f.n) + (o.x - f.meanX) * (o.x - f.meanX) / f.sxx).squareRoot()
            : .infinity
        let e = Estimate(centerLocal: center, rate: f.b, noiseMicroseconds: noise, uncertaintyMicroseconds: uncertainty, frames: f.n,
                         position: o.x, epoch: restarts)
        estimate = e
        return e
    }

    /// Forgets the fit: the sensor's timing was moved on purpose (a camera re-phased by a frame-interval step).
    public mutating func restartFit() { restart() }

    private mutating func restart() {
        if !window.isEmpty { restarts += 1 }
        window.removeAll(keepingCapacity: true)
        head = 0
        elapsed = 0
        outlierRun = 0
        estimate = nil
    }
}
