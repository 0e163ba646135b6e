import CoordCore
import Foundation
import Platform

/// The console's Snap on a node that previews idle: KeepStills checked against the preview and handed to the keeper.
extension NodeAgent {
    /// The farthest ahead a shot's first group may lie: a Snap is for now, a later one is a take's business.
    static let farthestSnapMicroseconds: Int64 = 60_000_000

    func keepStills(shotID: String, groups: [Int64], format: SnapPlan.Format) throws(NodeFailure) -> String {
        // Names, group order and count, format: checked at the edge (CoordWire).
        guard let run = previewRoom.withLock({ $0 }), let grid = run.grid else {
            throw NodeFailure(.badState, "node \(configuration.name) does not preview, so it has no frames to keep for shot \(shotID).")
        }
        let rigNow = Int64(run.clock.current.rig(fromLocal: Double(localNow())))
        let first = groups[0], last = groups[groups.count - 1]
        let ahead = grid.instant(ofGroup: first) - rigNow
        guard ahead > 0 else {
            throw NodeFailure(.badConfig, "group \(first) of shot \(shotID) is already past on node \(configuration.name) (\(-ahead / 1000) ms ago).")
        }
        guard ahead <= Self.farthestSnapMicroseconds else {
            throw NodeFailure(.badConfig, "group \(first) of shot \(shotID) is \(ahead / 1_000_000) s ahead; a Snap keeps groups at most \(Self.farthestSnapMicroseconds / 1_000_000) s ahead.")
        }
        let directory = store.takeDirectory(shotID)
        guard !FileManager.default.fileExists(atPath: directory.path) else {
            throw NodeFailure(.badConfig, "node \(configuration.name) already holds files of \(shotID); a shot needs a new id.")
        }
        // Long enough for the last group to pass and its stills to be encoded; a camera that stopped ends the wait.
        let deadline = MonotonicClock.now() + (grid.instant(ofGroup: last) - rigNow) + 5_000_000
        try stills.expect(shotID: shotID, groups: groups, format: format, cameras: run.cameras.map(\.settings.camera),
                          folder: directory.appendingPathComponent(configuration.name), deadline: deadline)
        logger.info("keeping stills", metadata: ["shot": "\(shotID)", "groups": "\(groups.count)", "first": "\(first)", "ahead_us": "\(ahead)"])
        return "keeping \(groups.count) group(s) of \(run.cameras.count) camera(s)"
    }
}
