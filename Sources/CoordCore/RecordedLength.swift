/// How long a take really is. A take stopped before its planned length (open-ended, or stopped by the operator or
/// by `coord stop-take` while its coordinator was gone) ends at the stop group its nodes agreed on; a manifest
/// written when recording began still carries the planned groups (24 h for an open-ended take).
public enum RecordedLength {
    /// The take's groups: `planned`, or the stop group the cameras' frames tables show when every table ends before
    /// it — the end of the longest table, since every node stops on the same group and a camera that ends sooner
    /// lost its last frames. `tableEnds`: each camera's last group + 1 (nil: no frames table arrived).
    public static func groups(planned: Int64, tableEnds: [Int64?]) -> Int64 {
        let ends = tableEnds.compactMap { $0 }
        guard let agreed = ends.max(), agreed > 0 else { return planned }
        return min(planned, agreed)
    }
}
