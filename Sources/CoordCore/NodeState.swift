/// Where a node is in its take's life cycle: one type for the node's machine, its Status reply and the conductor.
/// The wire (`Coord_V1_NodeState`) and the console's API (`LiveRig.NodeState`, which adds `unreachable`) map to
/// it at their edges; the raw value is the word `coord status` and the console show.
public enum NodeState: String, Sendable, Equatable, CaseIterable {
    case idle, configured, armed, recording, finished, failed
}
