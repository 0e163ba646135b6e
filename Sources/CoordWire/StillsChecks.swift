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

    /// Each camera once, named as a camera is, at an even size of at least 104x64 and at most 16384 a side, one
    /// group in 1…1000.
    static func stillModes(_ modes: [Coord_V1_StillMode], shot: String) throws(NodeFailure) {
        let id = Echo.short(shot)
        for m in modes {
            guard RigName.isValid(m.camera) else {
                throw NodeFailure(.badConfig, "shot \(id) names camera \"\(Echo.short(m.camera))\", which is no camera name (KeepStills.modes).")
            }
            guard m.width % 2 == 0, m.height % 2 == 0, (104...16384).contains(m.width), (64...16384).contains(m.height) else {
                throw NodeFailure(.badConfig, "shot \(id) asks camera \(m.camera) for \(m.width)x\(m.height); KeepStills.modes sizes are even, 104x64 to 16384x16384.")
            }
            guard (1...1000).contains(m.recordEvery) else {
                throw NodeFailure(.badConfig, "shot \(id) asks camera \(m.camera) for record_every \(m.recordEvery), outside 1…1000 (KeepStills.modes).")
            }
        }
        guard Set(modes.map(\.camera)).count == modes.count else {
            throw NodeFailure(.badConfig, "shot \(id) names a camera twice in KeepStills.modes.")
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
