/// A take the rig's nodes are recording that this coordinator did not start (another coordinator's, or a console's
/// before it restarted), as the nodes' statuses show it: enough to show it live, and to stop and collect it.
public struct AdoptedTake: Sendable, Equatable {
    public var takeID: String
    public var grid: FrameGrid
    /// The group every node stops before, once every node has one (0: open, or not placed on every node yet).
    public var stopGroup: Int64
    /// The latest rig-clock reading among the nodes' statuses (µs, rig timebase).
    public var rigNow: Int64
    /// The nodes recording it (or armed for it), in the order given.
    public var nodes: [String]

    public init(takeID: String, grid: FrameGrid, stopGroup: Int64, rigNow: Int64, nodes: [String]) {
        self.takeID = takeID; self.grid = grid; self.stopGroup = stopGroup; self.rigNow = rigNow; self.nodes = nodes
    }

    /// The take the most nodes are recording or armed for (ties: the smaller id), from each reached node's status;
    /// nil when none is. A node that lists a take without its grid is not counted: it cannot place a stop.
    public static func seen(_ statuses: [NodeStatus]) -> AdoptedTake? {
        let active = statuses.filter { ($0.state == .recording || $0.state == .armed) && !$0.takeID.isEmpty && $0.grid != nil }
        let byTake = Dictionary(grouping: active, by: \.takeID)
        guard let (takeID, members) = byTake.max(by: { ($0.value.count, $1.key) < ($1.value.count, $0.key) }) else { return nil }
        let stops = members.map(\.stopGroup)
        // One stop group is agreed only once every node has it; until then the take is open.
        let agreed = stops.allSatisfy { $0 > 0 } ? stops.max() ?? 0 : 0
        return AdoptedTake(takeID: takeID, grid: members[0].grid!, stopGroup: agreed,
                           rigNow: members.map(\.rigNowMicroseconds).max() ?? 0, nodes: members.map(\.node))
    }

    /// Seconds recorded at rig time `rigNow`: from group 0, never past the agreed stop, 0 before group 0.
    public func recordedSeconds(rigNow: Int64) -> Double {
        let end = stopGroup > 0 ? min(rigNow, grid.instant(ofGroup: stopGroup)) : rigNow
        return Double(max(0, end - grid.t0)) / 1e6
    }

    /// The take's name as its id carries it (`YYYYMMDD-HHMMSS-<name>-<6 hex>`), else the whole id.
    public var name: String { TakeID(parsing: takeID)?.name ?? takeID }
}
