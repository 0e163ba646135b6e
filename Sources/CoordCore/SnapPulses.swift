/// A triggered camera's part of a Snap taken while no take's train runs (pure; CONTRACT §17, §18): its output
/// emits one pulse per shot group, and each frame the camera delivers meanwhile is matched to a pulse as a take's
/// frames are (TriggerMatcher). A matched frame is the group's still, centred on the pulse's measured edge plus the
/// camera's delay and half its exposure; a group whose instant is more than half a period behind a frame that no
/// pulse exposed had no frame (the camera never answered its pulse, or the pulse was skipped): a missing still.
public struct SnapPulses: Sendable {
    public enum Decision: Equatable, Sendable {
        case keep(group: Int64, center: Int64)
        /// Shot groups the camera passed without a frame of their pulse, in order.
        case missed([Int64])
    }
    public private(set) var matcher: TriggerMatcher
    /// Shot groups not yet decided.
    public private(set) var left: Set<Int64>
    let delayMicroseconds: Int64

    /// How long after a shot group's instant a triggered camera's frame may still arrive (exposure, readout and the
    /// transfer of a large frame): past it with no frame at all, the still is missing, not waited for.
    public static let answerMicroseconds: Int64 = 1_000_000

    public init(schedule: TriggerSchedule, delayMicroseconds: Int64, groups: [Int64]) {
        matcher = TriggerMatcher(schedule: schedule)
        left = Set(groups)
        self.delayMicroseconds = delayMicroseconds
    }

    public var isDone: Bool { left.isEmpty }

    /// The output emitted `group`'s edge at `actual` (rig timebase).
    public mutating func pulse(group: Int64, actual: Int64) { matcher.pulse(group: group, actual: actual) }

    /// No frame came by `rigNow`: groups whose answer time has passed are missing (a camera that never answered).
    public mutating func idle(rigNow: Int64) -> [Decision] {
        let gone = left.filter { rigNow > matcher.grid.instant(ofGroup: $0) + Self.answerMicroseconds }.sorted()
        left.subtract(gone)
        return gone.isEmpty ? [] : [.missed(gone)]
    }

    /// A frame whose exposure centre the camera's own timestamp puts at `center` (rig timebase), exposed for
    /// `exposureMicroseconds`.
    public mutating func frame(center: Int64, exposureMicroseconds: Int64) -> [Decision] {
        guard !left.isEmpty else { return [] }
        switch matcher.frame(center: center) {
        case .pulse(let group, let expected) where left.contains(group):
            let skipped = left.filter { $0 < group }.sorted()
            left = left.filter { $0 > group }
            let edge = expected - matcher.leadMicroseconds
            let kept = Decision.keep(group: group, center: edge + delayMicroseconds + exposureMicroseconds / 2)
            return skipped.isEmpty ? [kept] : [.missed(skipped), kept]
        case .pulse, .extra:
            let half = matcher.grid.periodMicroseconds / 2
            let gone = left.filter { center > matcher.grid.instant(ofGroup: $0) + half }.sorted()
            left.subtract(gone)
            return gone.isEmpty ? [] : [.missed(gone)]
        }
    }
}
