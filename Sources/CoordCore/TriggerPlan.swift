/// A trigger output of a node (CONTRACT §17): a GPIO line that emits one pulse per group during a take.
public struct TriggerOutput: Equatable, Sendable, Codable {
    public enum Active: String, Equatable, Sendable, Codable { case high, low }
    public var name: String
    /// The GPIO character device (`/dev/gpiochipN`) and the line's offset on it.
    public var chip: String
    public var line: UInt32
    public var widthMicroseconds: Int64
    public var active: Active
    public init(name: String, chip: String, line: UInt32, widthMicroseconds: Int64, active: Active) {
        self.name = name; self.chip = chip; self.line = line; self.widthMicroseconds = widthMicroseconds; self.active = active
    }
}

/// A camera exposed by an output's pulses (the node file's per-camera `trigger:`): its trigger input and edge, and
/// the delay from the edge to the start of exposure.
public struct CameraTrigger: Equatable, Sendable, Codable {
    public var output: String
    public var source: String
    public var activation: String
    public var delayMicroseconds: Int64
    public init(output: String, source: String = "Line0", activation: String = "RisingEdge", delayMicroseconds: Int64 = 0) {
        self.output = output; self.source = source; self.activation = activation; self.delayMicroseconds = delayMicroseconds
    }
}

/// One pulse of an output: the group it exposes and its leading edge and end on the rig timebase.
public struct TriggerPulse: Equatable, Sendable {
    public var group: Int64
    public var edge: Int64
    public var end: Int64
}

/// Where an output's pulses fall (pure): group g's edge is the grid instant minus the trigger-to-exposure delay and
/// half the exposure, so the exposure's centre lands on the grid. Pulses run from the start group to the last
/// group of the take (the stop group is exclusive, as GroupAssigner's), so a take of N groups has exactly N pulses,
/// and none outside it.
public struct TriggerSchedule: Equatable, Sendable {
    public let grid: FrameGrid
    /// Delay + exposure/2: how far ahead of its group instant an edge goes.
    public let leadMicroseconds: Int64
    public let widthMicroseconds: Int64
    public let startGroup: Int64
    /// Exclusive; nil until the take's stop is known.
    public private(set) var stopGroup: Int64?
    /// A Snap's pulses (CONTRACT §18): only these groups pulse, one pulse each; nil: every group of the take.
    public let onlyGroups: Set<Int64>?

    public init(grid: FrameGrid, delayMicroseconds: Int64, exposureMicroseconds: Int64, widthMicroseconds: Int64,
                startGroup: Int64 = 0, stopGroup: Int64? = nil) {
        self.grid = grid
        leadMicroseconds = delayMicroseconds + exposureMicroseconds / 2
        self.widthMicroseconds = widthMicroseconds
        self.startGroup = startGroup
        self.stopGroup = stopGroup.map { max($0, startGroup) }
        onlyGroups = nil
    }

    /// One pulse for each of a shot's `groups` (not empty) and none between them: a still from a triggered camera
    /// while no take's train runs.
    public init(grid: FrameGrid, delayMicroseconds: Int64, exposureMicroseconds: Int64, widthMicroseconds: Int64, groups: [Int64]) {
        self.grid = grid
        leadMicroseconds = delayMicroseconds + exposureMicroseconds / 2
        self.widthMicroseconds = widthMicroseconds
        startGroup = groups.min() ?? 0
        stopGroup = (groups.max() ?? -1) + 1
        onlyGroups = Set(groups)
    }

    /// The intended pulse of `group`, or nil outside the take.
    public func pulse(ofGroup group: Int64) -> TriggerPulse? {
        guard group >= startGroup, stopGroup.map({ group < $0 }) ?? true, onlyGroups?.contains(group) ?? true else { return nil }
        let edge = grid.instant(ofGroup: group) - leadMicroseconds
        return TriggerPulse(group: group, edge: edge, end: edge + widthMicroseconds)
    }

    /// The next group after `group` that pulses (nil when the take or shot has no more).
    public func group(after group: Int64) -> Int64? {
        if let onlyGroups { return onlyGroups.filter { g in g > group && stopGroup.map { g < $0 } ?? true }.min() }
        let next = Swift.max(group + 1, startGroup)
        return stopGroup.map { next < $0 } ?? true ? next : nil
    }

    /// The first pulse whose edge is not before `time` (nil when the take has no more).
    public func nextPulse(atOrAfter time: Int64) -> TriggerPulse? {
        let first = max(startGroup, grid.nearestGroup(to: time + leadMicroseconds) - 1)
        var next: Int64? = pulse(ofGroup: first) != nil ? first : group(after: first)
        while let group = next, let p = pulse(ofGroup: group) {
            if p.edge >= time { return p }
            next = self.group(after: group)
        }
        return nil
    }

    /// The take's stop (exclusive); pulses already past it are not taken back.
    public mutating func stop(at group: Int64) { stopGroup = max(group, startGroup) }

    /// How many pulses the whole take has (nil until stopped).
    public var pulseCount: Int64? { stopGroup.map { $0 - startGroup } }

    /// The widest pulse an output may have at `rate`: under one frame period, or there is no gap between pulses.
    public static func widthProblem(output: String, widthMicroseconds: Int64, rate: FrameRate) -> String? {
        guard widthMicroseconds > 0 else { return "trigger output \(output): width_us must be a positive number of µs, not \(widthMicroseconds)." }
        let period = rate.periodMicroseconds
        guard widthMicroseconds < period else {
            return "trigger output \(output): width_us \(widthMicroseconds) is not shorter than the frame period (\(period) µs at \(rate) fps)."
        }
        return nil
    }
}

/// The pulses' timing error, actual − intended edge, in µs: p50 and p99 of the magnitudes and the largest.
public struct TriggerTiming: Equatable, Sendable, Codable {
    public var p50: Int64
    public var p99: Int64
    public var max: Int64
    public init(p50: Int64, p99: Int64, max: Int64) { self.p50 = p50; self.p99 = p99; self.max = max }
    public init(errors: [Int64]) {
        let p = Percentiles(of: errors.map { Swift.abs($0) })
        self.init(p50: p.p50, p99: p.p99, max: p.max)
    }
}

/// Matches a triggered camera's frames to the pulses that exposed them (pure), in arrival order: a frame goes to the
/// pulse whose expected exposure centre (measured edge + delay + exposure/2) is nearest its own estimated centre,
/// if that is within half a frame period and later than the last matched pulse. A frame with no such pulse is an
/// extra frame (a spurious trigger or a free-running camera): dropped and counted. A pulse with no frame is a
/// missed pulse: its group is filled by the recorder's GroupAssigner and flagged `dup`, as any drop.
public struct TriggerMatcher: Sendable {
    public enum Match: Equatable, Sendable {
        /// The frame belongs to `group`; `center` is its exposure centre from the pulse's measured edge.
        case pulse(group: Int64, center: Int64)
        /// No pulse exposed this frame.
        case extra
    }
    public let grid: FrameGrid
    public let leadMicroseconds: Int64
    /// Measured edges by group (rig timebase), as the generator reports them.
    public private(set) var edges: [Int64: Int64] = [:]
    public private(set) var lastGroup: Int64?
    public private(set) var matched: Int64 = 0
    public private(set) var extraFrames: Int64 = 0

    public init(schedule: TriggerSchedule) {
        grid = schedule.grid
        leadMicroseconds = schedule.leadMicroseconds
    }

    /// The generator emitted `group`'s edge at `actual` (rig timebase).
    public mutating func pulse(group: Int64, actual: Int64) { edges[group] = actual }

    /// A frame whose exposure centre the camera's own timestamp puts at `center` (rig timebase).
    public mutating func frame(center: Int64) -> Match {
        let group = grid.nearestGroup(to: center)
        let half = grid.periodMicroseconds / 2
        // The pulse's expected centre, and its neighbours': a late pulse may sit nearer the next grid instant.
        let candidates = [group - 1, group, group + 1].compactMap { g -> (Int64, Int64)? in
            guard let edge = edges[g], lastGroup.map({ g > $0 }) ?? true else { return nil }
            return (g, edge + leadMicroseconds)
        }
        guard let best = candidates.min(by: { Swift.abs($0.1 - center) < Swift.abs($1.1 - center) }),
              Swift.abs(best.1 - center) < half else {
            extraFrames += 1
            return .extra
        }
        lastGroup = best.0
        matched += 1
        return .pulse(group: best.0, center: best.1)
    }

    /// Pulses emitted in `[start, stop)` with no frame: the missed pulses (after the take).
    public func missedPulses(startGroup: Int64, stopGroup: Int64) -> Int64 {
        Int64(edges.keys.filter { $0 >= startGroup && $0 < stopGroup }.count) - matched
    }
}

/// A triggered camera's line in the manifest (CONTRACT §17): `trigger: {output, source, pulses, error_us: {p50, p99, max}}`.
public struct TriggerFigures: Codable, Equatable, Sendable {
    public var output: String
    public var source: String
    /// Pulses the output emitted during the take (its groups, when none was lost).
    public var pulses: Int64
    public var error: TriggerTiming
    enum CodingKeys: String, CodingKey { case output, source, pulses, error = "error_us" }
    public init(output: String, source: String, pulses: Int64, error: TriggerTiming) {
        self.output = output; self.source = source; self.pulses = pulses; self.error = error
    }

    /// Why figures a node wrote for a shot (`<camera>.trigger.json`) cannot go into the manifest, as a sentence
    /// naming `file`; nil when they can: named output and source, a count and errors that are not negative, errors
    /// under a second (a pulse that late exposed another frame).
    public func problem(file: String) -> String? {
        let named = { (s: String) in !s.isEmpty && s.utf8.count <= 64 && s.unicodeScalars.allSatisfy { !$0.properties.isWhitespace && $0.value >= 0x21 && $0.value != 0x7F } }
        guard named(output), named(source) else { return "\(file) names no trigger output or source." }
        guard pulses >= 0, [error.p50, error.p99, error.max].allSatisfy({ (0..<1_000_000).contains($0) }) else {
            return "\(file) states \(pulses) pulses with errors p50 \(error.p50), p99 \(error.p99), max \(error.max) µs: a count or error below 0, or an error of a second or more."
        }
        return nil
    }

    /// The sync report's line for the camera: "node-1/mv0: triggered by sync on Line0, 900 pulses, error p50 12 µs, p99 40 µs, max 95 µs".
    public func reportLine(node: String, camera: String) -> String {
        "\(node)/\(camera): triggered by \(output) on \(source), \(pulses) pulses, error p50 \(error.p50) µs, p99 \(error.p99) µs, max \(error.max) µs"
    }
}

/// Whether a triggered camera can follow one pulse per frame (pure; `coord plan`): its exposure plus readout must
/// fit in the frame period, and the rate must be within its AcquisitionFrameRate limit when it reports one.
public enum TriggerRate {
    public static func problem(camera: String, rate: FrameRate, exposureMicroseconds: Int64, readoutMicroseconds: Int64,
                               maximumFrameRate: Double?) -> String? {
        let period = rate.periodMicroseconds
        if exposureMicroseconds + readoutMicroseconds > period {
            return "camera \(camera) cannot follow a trigger at \(rate) fps: its exposure (\(exposureMicroseconds) µs) plus readout "
                + "(\(readoutMicroseconds) µs) is longer than the frame period (\(period) µs); shorten the exposure or lower the rate."
        }
        if let maximumFrameRate, Double(rate.numerator) / Double(rate.denominator) > maximumFrameRate + 1e-9 {
            let shown = (maximumFrameRate * 1000).rounded() / 1000
            return "camera \(camera) cannot follow a trigger at \(rate) fps: its AcquisitionFrameRate allows at most \(shown) fps at this size and exposure."
        }
        return nil
    }
}
