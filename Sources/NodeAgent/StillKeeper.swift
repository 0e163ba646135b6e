import CoordCore
import Foundation
import Logging
import LibAV
import Capture
import Pixels
import Platform
import Synchronization

/// The console's Snaps on a node that previews idle (CONTRACT §18): each shot's groups wanted from every camera, the
/// frames kept as they pass the preview (a copy at the camera's size, encoded off the camera's thread) and written as
/// `<shot>/<node>/<camera>[_<n>].<ext>` beside `<camera>.stills.csv` (frames.csv's columns: the still's group and
/// exposure centre). A shot is pending until every camera has passed its last group, or its deadline.
final class StillKeeper: Sendable {
    private struct Shot {
        var format: SnapPlan.Format
        var plan: [Int64: Int]
        var folder: URL
        /// Groups each camera has still to pass; writes still running per camera; the rows written.
        var remaining: [String: Set<Int64>]
        var writing: [String: Int] = [:]
        var rows: [String: [FrameRow]] = [:]
        /// Kept groups whose centre the camera's phase fit has still to re-estimate with the frames after them, and
        /// the centres it gave: a table is written only once its camera's are settled.
        var settling: [String: Set<Int64>] = [:]
        var settled: [String: [Int64: Int64]] = [:]
        /// Host monotonic µs after which the shot is given up as it is (a camera that stopped delivering).
        var deadline: Int64
    }
    private let shots = Mutex<[String: Shot]>([:])
    private let node: String
    private let store: FileStore
    private let logger: Logger
    /// Triggered cameras' shot pulses while the node previews: their frames are matched there before they are offered.
    let triggers: SnapTriggers

    init(node: String, store: FileStore, logger: Logger) {
        self.node = node
        self.store = store
        self.logger = logger
        triggers = SnapTriggers(logger: logger)
    }

    /// Waits for `groups` of `cameras` under `shotID`, written into `folder` (made here).
    func expect(shotID: String, groups: [Int64], format: SnapPlan.Format, cameras: [String], folder: URL, deadline: Int64) throws(NodeFailure) {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw NodeFailure(.io, "cannot make \(folder.path) for shot \(shotID): \(error.localizedDescription).")
        }
        let plan = Dictionary(uniqueKeysWithValues: groups.enumerated().map { ($0.element, $0.offset) })
        let shot = Shot(format: format, plan: plan, folder: folder,
                        remaining: Dictionary(uniqueKeysWithValues: cameras.map { ($0, Set(groups)) }), deadline: deadline)
        shots.withLock { $0[shotID] = shot }
    }

    /// Whether a shot still waits for frames (false once every camera is written, or past its deadline).
    func isPending(_ shotID: String) -> Bool {
        shots.withLock { s in
            guard let shot = s[shotID] else { return false }
            if MonotonicClock.now() > shot.deadline {
                s[shotID] = nil
                logger.warning("shot \(shotID) given up waiting", metadata: ["missing": "\(shot.remaining.filter { !$0.value.isEmpty }.keys.sorted())"])
                return false
            }
            return true
        }
    }

    /// A frame a previewing camera delivered: copied when a shot wants its group; a group the camera passed
    /// without delivering is missed (the coordinator names it in the shot's manifest). True when it was kept: the
    /// caller then owes `settle` for that group.
    @discardableResult
    func offer(camera: String, group: Int64, center: Int64, payload: CapturePayload) -> Bool {
        typealias Job = (shotID: String, shot: Int, format: SnapPlan.Format, folder: URL, count: Int)
        let jobs: [Job] = shots.withLock { s in
            var jobs: [Job] = []
            for (id, shot) in s {
                guard var left = shot.remaining[camera], !left.isEmpty else { continue }
                let passed = left.filter { $0 <= group }
                guard !passed.isEmpty else { continue }
                left.subtract(passed)
                s[id]?.remaining[camera] = left
                if passed.contains(group), let index = shot.plan[group] {
                    s[id]?.writing[camera, default: 0] += 1
                    s[id]?.settling[camera, default: []].insert(group)
                    jobs.append((id, index, shot.format, shot.folder, shot.plan.count))
                }
            }
            return jobs
        }
        let finished = jobs.isEmpty ? finishedCameras(camera) : []
        for id in finished { wrote(shotID: id, camera: camera, row: nil) }
        guard !jobs.isEmpty else { return false }
        guard case .picture(let picture) = payload else {
            for job in jobs {
                logger.warning("shot \(job.shotID): camera \(camera) delivers JPEG, which a Snap cannot keep losslessly")
                wrote(shotID: job.shotID, camera: camera, row: nil)
            }
            return true
        }
        // The camera's buffer goes back to its pool at once: the copy is encoded on a thread of its own.
        let copy = PlanarFrame(width: picture.width, height: picture.height)
        copy.copy(from: picture)
        let thread = Thread { [self] in
            for job in jobs {
                let name = "\(camera)\(job.count > 1 ? "_\(job.shot)" : "").\(job.format.fileExtension)"
                var row: FrameRow? = FrameRow(frame: Int64(job.shot), group: group, centerMicroseconds: center, isDup: false)
                do {
                    let bytes = try StillFiles.encode(copy, format: job.format, what: "camera \(node)/\(camera) group \(group)")
                    let part = job.folder.appendingPathComponent(".\(name).part")
                    try bytes.write(to: part)
                    // Renamed whole: a listing never sees half a still.
                    try FileManager.default.moveItem(at: part, to: job.folder.appendingPathComponent(name))
                } catch {
                    logger.error("shot \(job.shotID): the still of camera \(camera) was not written: \(error)")
                    row = nil
                }
                wrote(shotID: job.shotID, camera: camera, row: row)
            }
        }
        thread.name = "still-\(camera)"
        thread.start()
        return true
    }

    /// A camera passed shot `groups` with nothing to keep (a triggered camera whose pulse exposed no frame): missed.
    func passed(camera: String, groups: [Int64]) {
        shots.withLock { s in
            for (id, shot) in s { if let left = shot.remaining[camera] { s[id]?.remaining[camera] = left.subtracting(groups) } }
        }
        for id in finishedCameras(camera) { wrote(shotID: id, camera: camera, row: nil) }
    }

    /// The camera's centre for a kept `group`, re-estimated by its phase fit with the frames after it (as a take's
    /// rows are: the newest frame's estimate is the fit's least certain); nil keeps the first estimate.
    func settle(camera: String, group: Int64, center: Int64?) {
        let ids: [String] = shots.withLock { s in
            var ids: [String] = []
            for (id, shot) in s where shot.settling[camera]?.contains(group) == true {
                s[id]?.settling[camera]?.remove(group)
                if let center { s[id]?.settled[camera, default: [:]][group] = center }
                ids.append(id)
            }
            return ids
        }
        for id in ids { finishIfComplete(shotID: id, camera: camera) }
    }

    /// Shots whose every group this camera has passed with no write running, and whose table is not written yet.
    private func finishedCameras(_ camera: String) -> [String] {
        shots.withLock { s in
            s.filter { $0.value.remaining[camera]?.isEmpty == true && ($0.value.writing[camera] ?? 0) == 0 && $0.value.rows[camera] == nil }.map(\.key)
        }
    }

    /// One still done (nil: none kept); once a camera has passed every group its table is written, and once every
    /// camera's is, the shot's files are checksummed and it is no longer pending.
    private func wrote(shotID: String, camera: String, row: FrameRow?) {
        shots.withLock { s in
            guard var shot = s[shotID] else { return }
            if row != nil || shot.writing[camera] != nil { shot.writing[camera, default: 1] -= 1 }
            var rows = shot.rows[camera] ?? []
            if let row { rows.append(row) }
            shot.rows[camera] = rows
            s[shotID] = shot
        }
        finishIfComplete(shotID: shotID, camera: camera)
    }

    private func finishIfComplete(shotID: String, camera: String) {
        let (table, folder, done): ([FrameRow]?, URL?, Bool) = shots.withLock { s in
            guard var shot = s[shotID], shot.remaining[camera]?.isEmpty == true, (shot.writing[camera] ?? 0) <= 0,
                  (shot.settling[camera] ?? []).isEmpty else { return (nil, nil, false) }
            shot.remaining[camera] = nil
            s[shotID] = shot
            let settled = shot.settled[camera] ?? [:]
            let rows = (shot.rows[camera] ?? []).map { row in
                var row = row
                if let centre = settled[row.group] { row.centerMicroseconds = centre }
                return row
            }
            return (rows.sorted { $0.group < $1.group }, shot.folder, shot.remaining.isEmpty)
        }
        if let table, let folder {
            let text = ([FramesTable.header] + table.map(FramesTable.line)).joined(separator: "\n") + "\n"
            let url = folder.appendingPathComponent("\(camera).stills.csv")
            do { try Data(text.utf8).write(to: url, options: .atomic) } catch {
                logger.error("shot \(shotID): cannot write \(url.path): \(error.localizedDescription)")
            }
        }
        guard done else { return }
        _ = try? store.index(takeID: shotID)
        shots.withLock { _ = $0.removeValue(forKey: shotID) }
        logger.info("shot \(shotID) kept", metadata: ["node": "\(node)"])
    }
}
