/// Decides, frame by frame, which sync group each captured frame fills, so every camera's file holds
/// exactly the groups `[startGroup, stopGroup)` in order: a group with no frame is filled with a repeat
/// of the previous picture (a `dup`), a second frame for a group is discarded, frames before the start
/// are held only as the picture a first-group fill would repeat.
public struct GroupAssigner: Sendable {
    public enum Action: Equatable, Sendable {
        /// Not part of the take yet: keep the picture as the one a fill would repeat.
        case holdAsPrevious
        /// Write this frame as `group`.
        case write(group: Int64)
        /// Write a repeat of the previous picture as `group` (flag `dup`).
        case repeatPrevious(group: Int64)
        /// A frame for a group already written (or a late one already filled): drop it.
        case discard
        /// The last group has been written; finalize the file.
        case finish
    }

    public let grid: FrameGrid
    public let startGroup: Int64
    public private(set) var stopGroup: Int64?
    /// The next group this camera must write.
    public private(set) var nextGroup: Int64
    public private(set) var isFinished = false
    public private(set) var written: Int64 = 0
    public private(set) var repeated: Int64 = 0
    public private(set) var discarded: Int64 = 0

    public init(grid: FrameGrid, startGroup: Int64, stopGroup: Int64?) {
        precondition(stopGroup.map { $0 > startGroup } ?? true, "stop group must follow the start group")
        self.grid = grid
        self.startGroup = startGroup
        self.stopGroup = stopGroup
        self.nextGroup = startGroup
    }

    /// A frame whose exposure centre is estimated at `center` on the rig timebase.
    public mutating func frame(center: Int64) -> [Action] {
        guard !isFinished else { return [.discard] }
        let group = grid.nearestGroup(to: center)
        if group < nextGroup {
            if nextGroup == startGroup && written == 0 { return [.holdAsPrevious] }
            discarded += 1
            return [.discard]
        }
        var actions: [Action] = []
        let last = stopGroup.map { min(group, $0) } ?? group
        while nextGroup < last {
            actions.append(.repeatPrevious(group: nextGroup))
            nextGroup += 1
            repeated += 1
        }
        if let stopGroup, group >= stopGroup {
            actions.append(.finish)
            isFinished = true
            return actions
        }
        actions.append(.write(group: group))
        nextGroup = group + 1
        written += 1
        if let stopGroup, nextGroup >= stopGroup {
            actions.append(.finish)
            isFinished = true
        }
        return actions
    }

    /// No frame has arrived by `now` (rig timebase): fill every group whose frame would have arrived by now
    /// had it been captured (its instant is more than `lateness` µs ago).
    public mutating func tick(now: Int64, lateness: Int64) -> [Action] {
        guard !isFinished else { return [] }
        var actions: [Action] = []
        while grid.instant(ofGroup: nextGroup) + lateness < now {
            if let stopGroup, nextGroup >= stopGroup { break }
            actions.append(.repeatPrevious(group: nextGroup))
            nextGroup += 1
            repeated += 1
        }
        if let stopGroup, nextGroup >= stopGroup {
            actions.append(.finish)
            isFinished = true
        }
        return actions
    }

    /// Sets or moves the stop group. A stop at or before the next group finishes at once.
    public mutating func stop(at group: Int64) -> [Action] {
        guard !isFinished else { return [] }
        stopGroup = max(group, startGroup + 1)
        if nextGroup >= stopGroup! {
            isFinished = true
            return [.finish]
        }
        return []
    }
}
