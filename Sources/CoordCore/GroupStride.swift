/// The groups of the rig's grid a camera records from its sensor when it records one group in `every`: the
/// groups `anchor + n·every` (its "coarse" groups, numbered by n). The groups between are filled with a
/// repeat of the last one on purpose (held, flagged `dup`), so the file stays aligned frame for frame with
/// every other camera's (CONTRACT §4).
public struct GroupStride: Equatable, Sendable {
    /// One group in this many is recorded (1: every group).
    public let every: Int64
    /// A recorded group: coarse group 0.
    public let anchor: Int64

    public init(every: Int, anchor: Int64 = 0) {
        precondition(every >= 1, "a stride records at least one group in every")
        self.every = Int64(every)
        self.anchor = anchor
    }

    /// Whether the camera records `group` from its sensor (rather than filling it).
    public func isRecorded(_ group: Int64) -> Bool { floorMod(group - anchor, every) == 0 }

    /// The fine group coarse group `coarse` is written as.
    public func group(ofCoarse coarse: Int64) -> Int64 { anchor + coarse * every }

    /// The first recorded group at or after `group`.
    public func firstRecorded(atOrAfter group: Int64) -> Int64 { self.group(ofCoarse: ceilDiv(group - anchor, every)) }

    /// The coarse groups whose fine groups lie in `[start, stop)` (empty when the span holds no recorded group).
    public func coarseGroups(from start: Int64, to stop: Int64) -> Range<Int64> {
        let lower = ceilDiv(start - anchor, every)
        return lower..<max(lower, ceilDiv(stop - anchor, every))
    }

    /// Groups of `[start, stop)` filled on purpose: those the camera does not record.
    public func held(from start: Int64, to stop: Int64) -> Int64 {
        guard stop > start else { return 0 }
        return (stop - start) - Int64(coarseGroups(from: start, to: stop).count)
    }

    /// The grid the sensor runs on: the fine grid's recorded instants, `every` periods apart.
    public func coarseGrid(of fine: FrameGrid) -> FrameGrid {
        var coarse = FrameGrid(t0: fine.instant(ofGroup: anchor), periodMicroseconds: fine.periodMicroseconds * every)
        // At 29.97 one group in k is 30000 / (1001 k) a second, exact as the fine grid is.
        coarse.rationalRate = fine.rationalRate.flatMap { FrameRate(numerator: $0.numerator, denominator: $0.denominator * Int(every)) }
        return coarse
    }
}

/// A `GroupAssigner` for a camera with a frame-rate cap and live slow-downs, deciding on the rig's (fine) grid.
///
/// With a cap `k` the sensor runs at fps / k, locked onto the coarse grid `GroupStride(every: k).coarseGrid`,
/// and a `GroupAssigner` on that grid decides which coarse group each frame fills; coarse group `c` is
/// written as fine group `c·k`, and the fine groups up to the next coarse group (or the fine stop) are
/// filled with repeats of it, held. The fills are emitted lazily, just before the next coarse group's
/// decision (or at the finish), so a stop at any fine group still ends the file with exactly
/// `stop − start` rows. Fine groups before the first coarse group of the take repeat the pre-roll picture.
///
/// A live slow-down (`slow(every:from:)`) leaves the sensor and its phase lock alone: from its group on, a
/// frame for a group the slowed stride does not record is not written, and the group is a held repeat.
public struct StridedGroupAssigner: Sendable {
    public enum Action: Equatable, Sendable {
        /// Not part of the take yet: keep the picture as the one a fill would repeat.
        case holdAsPrevious
        /// Write this frame as `group`.
        case write(group: Int64)
        /// Write a repeat of the previous picture as `group` (flag `dup`). `held`: on purpose (a cap or a
        /// slow-down, with the frame, if any, left unused); otherwise the sensor's frame was missing (dropped).
        case repeatPrevious(group: Int64, held: Bool)
        /// A frame not written: a second one for a group, or one past the last group.
        case discard
        /// The last group has been written; finalize the file.
        case finish
    }

    private struct Slow: Sendable {
        var from: Int64
        var stride: GroupStride
    }

    /// The rig's grid, on which groups, start and stop are counted.
    public let grid: FrameGrid
    public let cap: GroupStride
    public let startGroup: Int64
    public private(set) var stopGroup: Int64?
    /// The next fine group this camera must write (fills are emitted lazily, so it may trail the sensor).
    public private(set) var nextGroup: Int64
    public private(set) var isFinished = false
    private var coarse: GroupAssigner
    /// Slow-downs in force or pending, by ascending `from`.
    private var slows: [Slow] = []

    /// Writes fine groups `[startGroup, stopGroup)`, recording one in `cap` (anchored at group 0, so every
    /// camera with the same cap records the same groups).
    public init(grid: FrameGrid, cap: Int, startGroup: Int64, stopGroup: Int64?) {
        precondition(stopGroup.map { $0 > startGroup } ?? true, "stop group must follow the start group")
        let stride = GroupStride(every: cap)
        let first = stride.coarseGroups(from: startGroup, to: startGroup).lowerBound
        self.grid = grid
        self.cap = stride
        self.startGroup = startGroup
        self.stopGroup = stopGroup
        nextGroup = startGroup
        coarse = GroupAssigner(grid: stride.coarseGrid(of: grid), startGroup: first,
                               stopGroup: stopGroup.map { Self.coarseStop(stride, fine: $0, first: first) })
    }

    /// The grid the sensor must be locked onto (the rig's grid without a cap).
    public var sensorGrid: FrameGrid { coarse.grid }

    /// A frame whose exposure centre is estimated at `center` on the rig timebase.
    public mutating func frame(center: Int64) -> [Action] {
        guard !isFinished else { return [.discard] }
        return translate(coarse.frame(center: center))
    }

    /// No frame has arrived by `now`: fills the coarse groups whose frames are overdue (see `GroupAssigner.tick`).
    public mutating func tick(now: Int64, lateness: Int64) -> [Action] {
        guard !isFinished else { return [] }
        return translate(coarse.tick(now: now, lateness: lateness))
    }

    /// Sets or moves the fine stop group. A stop at or before the next group finishes at once.
    public mutating func stop(at group: Int64) -> [Action] {
        guard !isFinished else { return [] }
        let fine = max(group, startGroup + 1)
        stopGroup = fine
        return translate(coarse.stop(at: Self.coarseStop(cap, fine: fine, first: coarse.startGroup)))
    }

    /// From fine group `group` on, records one group in `every`, counted on the rig's grid: a slow-down does
    /// not multiply the cap, it replaces the camera's total stride, rounded up to a multiple of the cap (so
    /// only groups the sensor delivers are kept) and never below it, anchored at the first capped group from
    /// `group` on. `every` 1 (or the cap) returns to the cap. A later request replaces any pending from a
    /// later group.
    public mutating func slow(every: Int, from group: Int64) {
        let k = cap.every
        let total = max(k, ceilDiv(Int64(max(every, 1)), k) * k)
        slows.removeAll { $0.from >= group }
        slows.append(Slow(from: group, stride: GroupStride(every: Int(total), anchor: cap.firstRecorded(atOrAfter: group))))
    }

    /// The stride in force at fine `group`: one group in this many is recorded from the sensor.
    public func recordEvery(atGroup group: Int64) -> Int { Int(stride(at: group).every) }

    /// Whether fine `group` is recorded from the sensor (under the cap and any slow-down in force there).
    public func isRecorded(_ group: Int64) -> Bool { stride(at: group).isRecorded(group) }

    private func stride(at group: Int64) -> GroupStride { slows.last { $0.from <= group }?.stride ?? cap }

    /// The coarse stop for a fine one: the first coarse group at or past it, and at least one coarse group
    /// (a take shorter than the cap may hold no coarse group; it then ends at the first one, clipped).
    private static func coarseStop(_ cap: GroupStride, fine: Int64, first: Int64) -> Int64 {
        max(cap.coarseGroups(from: fine, to: fine).lowerBound, first + 1)
    }

    private mutating func translate(_ actions: [GroupAssigner.Action]) -> [Action] {
        var out: [Action] = []
        for action in actions {
            // Nothing follows the finish; a frame in the same answer is then left unused.
            guard !isFinished else { break }
            switch action {
            case .holdAsPrevious:
                out.append(.holdAsPrevious)
            case .discard:
                out.append(.discard)
            case .write(let c), .repeatPrevious(let c):
                let group = cap.group(ofCoarse: c)
                if let stopGroup, group >= stopGroup {
                    finish(into: &out)
                    break
                }
                fill(upTo: group, into: &out)
                if case .write = action, isRecorded(group) {
                    out.append(.write(group: group))
                } else {
                    out.append(.repeatPrevious(group: group, held: !isRecorded(group)))
                }
                nextGroup = group + 1
            case .finish:
                finish(into: &out)
            }
        }
        // A slow-down followed by one already in force decides no group from the last written on.
        while slows.count > 1, slows[1].from < nextGroup { slows.removeFirst() }
        return out
    }

    /// Held repeats for the groups the cap does not record, up to `group`.
    private mutating func fill(upTo group: Int64, into out: inout [Action]) {
        while nextGroup < group {
            out.append(.repeatPrevious(group: nextGroup, held: true))
            nextGroup += 1
        }
    }

    private mutating func finish(into out: inout [Action]) {
        if let stopGroup { fill(upTo: stopGroup, into: &out) }
        out.append(.finish)
        isFinished = true
    }
}

/// floor(a / b) for b > 0.
private func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }
/// ceil(a / b) for b > 0.
private func ceilDiv(_ a: Int64, _ b: Int64) -> Int64 { -floorDiv(-a, b) }
private func floorMod(_ a: Int64, _ b: Int64) -> Int64 { a - floorDiv(a, b) * b }
