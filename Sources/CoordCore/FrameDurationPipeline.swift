/// How a sensor takes a frame-duration request: `delayFrames` frames after it is asked and only in whole lines of
/// `lineMicroseconds` (its line time), within the limits it declares. A Raspberry Pi sensor under libcamera applies
/// a new `FrameDurationLimits` as a new vertical blanking a few frames later, in whole lines; a synthetic sensor by
/// default takes any duration for its very next frame (`immediate`).
public struct FrameDurationTiming: Equatable, Sendable {
    /// Frames that run at durations asked before this request, between the request and the frame it sets.
    public var delayFrames: Int
    /// The duration's step, µs; 0: any duration.
    public var lineMicroseconds: Double

    public static let immediate = FrameDurationTiming(delayFrames: 0, lineMicroseconds: 0)

    public init(delayFrames: Int, lineMicroseconds: Double) {
        self.delayFrames = max(0, delayFrames)
        self.lineMicroseconds = lineMicroseconds.isFinite ? max(0, lineMicroseconds) : 0
    }

    /// The duration a sensor runs when asked for `microseconds`: the nearest whole number of lines within the limits
    /// (a limit that is not a whole line is taken inward to one).
    public func applied(_ microseconds: Double, min lower: Double, max upper: Double) -> Double {
        guard lineMicroseconds > 0 else { return Swift.min(upper, Swift.max(lower, microseconds)) }
        let line = lineMicroseconds
        let shortest = (lower / line).rounded(.up) * line
        let longest = Swift.max(shortest, (upper / line).rounded(.down) * line)
        return Swift.min(longest, Swift.max(shortest, (microseconds / line).rounded() * line))
    }

    /// The sentence naming what is wrong with a `--sensor-delay-frames`/`--sensor-line-us` pair, nil when usable.
    public static func problem(delayFrames: Int, lineMicroseconds: Double) -> String? {
        if !(0...16).contains(delayFrames) {
            return "--sensor-delay-frames must be a whole number of frames from 0 to 16 (got \(delayFrames))."
        }
        if !lineMicroseconds.isFinite || lineMicroseconds < 0 || lineMicroseconds > 1_000 {
            return "--sensor-line-us must be a line time from 0 to 1000 µs (got \(lineMicroseconds))."
        }
        return nil
    }
}

/// A sensor's frame-duration pipeline as a pure value, the model of a Raspberry Pi sensor under libcamera that the
/// phase law is proven against and the synthetic sensor runs: a request sets the duration of the frame read out
/// `delayFrames` frames after the next one, in whole lines within the limits; a frame nobody asked anything of
/// runs at the nominal period (in whole lines).
public struct FrameDurationPipeline: Equatable, Sendable {
    public let timing: FrameDurationTiming
    public let minPeriodMicroseconds: Double
    public let maxPeriodMicroseconds: Double
    public let nominalPeriodMicroseconds: Double
    /// `slots[0]` is the duration of the next frame read out, `slots[delayFrames]` the one a request sets now.
    private var slots: [Double?]

    public init(timing: FrameDurationTiming, minPeriodMicroseconds: Double, maxPeriodMicroseconds: Double,
                nominalPeriodMicroseconds: Double) {
        self.timing = timing
        self.minPeriodMicroseconds = minPeriodMicroseconds
        self.maxPeriodMicroseconds = maxPeriodMicroseconds
        self.nominalPeriodMicroseconds = nominalPeriodMicroseconds
        slots = Array(repeating: nil, count: timing.delayFrames + 1)
    }

    /// Asks for a frame duration; false (and nothing changes) outside the declared limits. A later request before
    /// the next frame is read out replaces this one.
    @discardableResult
    public mutating func request(_ microseconds: Double) -> Bool {
        guard microseconds >= minPeriodMicroseconds, microseconds <= maxPeriodMicroseconds else { return false }
        slots[timing.delayFrames] = timing.applied(microseconds, min: minPeriodMicroseconds, max: maxPeriodMicroseconds)
        return true
    }

    /// The duration of the frame being read out now (until the next frame starts); the pipeline moves on one frame.
    public mutating func nextFrameDuration() -> Double {
        let duration = slots.removeFirst()
            ?? timing.applied(nominalPeriodMicroseconds, min: minPeriodMicroseconds, max: maxPeriodMicroseconds)
        slots.append(nil)
        return duration
    }
}
