/// The console's warm Snap (CONTRACT §18): the cameras already preview on the console's grid with their clocks
/// followed, so a shot is one group of that grid, chosen as the request arrives. Pure: the console's shell sends it.
public enum WarmSnap {
    /// Scheduling slack on top of the measured round trip (a node's control thread on a loaded box).
    public static let marginMicroseconds: Int64 = 5_000
    /// The round trip assumed before any KeepStills has been answered.
    public static let firstRoundTripMicroseconds: Int64 = 10_000

    /// How far ahead of now the shot's group must lie. The KeepStills must reach every node before its cameras
    /// deliver that group's frame, and no camera delivers a frame before its exposure centre (the group's instant):
    /// so the slowest node's round trip (its way there, with room for the reply's) plus a margin is enough, not a
    /// whole frame period more. Capped at one period less 1 ms, so the group lands within two periods of the request.
    public static func lead(roundTripMicroseconds: Int64, periodMicroseconds: Int64) -> Int64 {
        let wanted = max(roundTripMicroseconds, 0) + marginMicroseconds
        return max(1_000, min(wanted, periodMicroseconds - 1_000))
    }

    /// The shot's group: the first whose instant is at least `lead` after `now` (rig timebase).
    public static func group(now: Int64, lead: Int64, grid: FrameGrid) -> Int64 {
        let earliest = now + lead
        var group = max(0, grid.nearestGroup(to: earliest))
        while grid.instant(ofGroup: group) < earliest { group += 1 }
        return group
    }

    /// Where the latency of a shot is counted from: the page's click (its wall clock, when it sent one that is
    /// plausible: not after the request arrived, nor more than 10 s before), else the request's arrival.
    public static func latency(groupInstant: Int64, arrivedAt: Int64, arrivedWallMs: Double, clickedWallMs: Double?) -> (microseconds: Int64, from: String) {
        let base = groupInstant - arrivedAt
        if let clicked = clickedWallMs, clicked.isFinite, clicked <= arrivedWallMs + 1, arrivedWallMs - clicked < 10_000 {
            return (base + Int64(((arrivedWallMs - clicked) * 1000).rounded()), "click")
        }
        return (base, "request")
    }
}
