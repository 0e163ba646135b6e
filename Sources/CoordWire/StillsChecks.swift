import CoordCore

/// A KeepStills' fields checked at the edge (the console's Snap, CONTRACT §18).
extension Wire {
    /// 1…`SnapPlan.mostShots` groups, each on the grid's range, strictly ascending (a shot is one group once).
    static func stillGroups(_ groups: [Int64], shot: String) throws(NodeFailure) {
        let id = Echo.short(shot)
        guard (1...SnapPlan.mostShots).contains(groups.count) else {
            throw NodeFailure(.badConfig, "shot \(id) must name 1 to \(SnapPlan.mostShots) groups (KeepStills.groups has \(groups.count)).")
        }
        if let bad = groups.first(where: { !groupRange.contains($0) }) {
            throw NodeFailure(.badConfig, "shot \(id) names group \(bad), outside \(groupRange.lowerBound)…\(groupRange.upperBound) (KeepStills.groups).")
        }
        guard zip(groups, groups.dropFirst()).allSatisfy({ $0 < $1 }) else {
            throw NodeFailure(.badConfig, "shot \(id) must name its groups in ascending order, each once (KeepStills.groups).")
        }
    }

    /// A lossless still format: a warm shot keeps the camera's pixels exactly (JPEG is for `coord snap`).
    static func stillsFormat(_ text: String, shot: String) throws(NodeFailure) -> SnapPlan.Format {
        guard let format = SnapPlan.Format(rawValue: text), format.isLossless else {
            throw NodeFailure(.badConfig, "shot \(Echo.short(shot)) asks for stills as \"\(Echo.short(text))\"; KeepStills.format must be png or tiff.")
        }
        return format
    }
}
