import CoordCore
import Foundation
import LibAV
import Platform
import TakeDocuments
import TakeReport

/// What a shot left: its directory, manifest (`kind: "stills"`), the sync report over its centres and its stills.
public struct SnapOutcome: Sendable {
    public var directory: URL
    public var manifest: TakeManifest
    public var report: SyncReport
    public var stills: [StillRecord]
}

/// A shot of synchronized stills as a take of another kind (CONTRACT §18): the take's planning, clock alignment,
/// arming and collection record the span from group 0 through the last shot losslessly (FFV1), then the shots'
/// frames are kept as images beside a manifest, a sync report over the shots' centres and an ASC MHL seal, and
/// the span's video is let go.
public enum SnapSession {
    /// The take that records `plan`'s span: `template`'s rig and cameras, FFV1, exactly the span's groups.
    public static func takeRequest(_ template: TakeRequest, plan: SnapPlan) -> TakeRequest {
        var request = template
        request.seconds = Double(plan.spanGroups) / Double(max(template.fps, 1))
        request.untilStopped = false
        request.codec = .ffv1
        request.collectLater = false
        request.recordEvery = plan.recordEvery(fps: template.fps)
        if case .exactly(let width, let height) = plan.size {
            request.width = width
            request.height = height
            // One size for every camera: a rig file's own sizes give way to the operator's.
            request.camerasByEndpoint = request.camerasByEndpoint.mapValues { $0.map { var c = $0; c.size = nil; return c } }
        }
        request.largestSize = plan.size == .largest
        return request
    }

    /// Keeps the shots' frames of a collected span as stills and rewrites the directory as a shot's.
    public static func keepStills(_ take: TakeOutcome, plan: SnapPlan, console: Console) throws -> SnapOutcome {
        let directory = take.directory
        var manifest = take.manifest
        let grid = manifest.grid
        let writer = TakeDirectoryWriter(directory: directory)
        var kept: [KeptStill] = []
        for (index, camera) in manifest.cameras.enumerated() {
            let mkv = "\(camera.node)/\(camera.camera).mkv", csv = "\(camera.node)/\(camera.camera).frames.csv"
            let rows = writer.rows(csvPath: csv)
            // Frame i is group i in a complete file; a row says which frame holds the group when it is not.
            var outputs: [Int: String] = [:]
            var found: [(shot: Int, row: FrameRow)] = []
            for (shot, group) in plan.groups.enumerated() {
                guard let row = rows.first(where: { $0.group == group }) else {
                    manifest.events.append(.init(tMicroseconds: grid.instant(ofGroup: group), node: camera.node, camera: camera.camera,
                                                 kind: .incomplete, detail: "camera \(camera.node)/\(camera.camera) has no frame of group \(group) (shot \(shot))"))
                    manifest.status = .partial
                    continue
                }
                outputs[Int(row.frame)] = directory.appendingPathComponent(plan.path(node: camera.node, camera: camera.camera, shot: shot)).path
                found.append((shot, row))
            }
            if !outputs.isEmpty {
                let sizes: [Int: (width: Int, height: Int)]
                do {
                    sizes = try StillFiles.write(from: directory.appendingPathComponent(mkv).path, outputs: outputs, format: plan.format)
                } catch {
                    throw CoordError(.failure, "camera \(camera.node)/\(camera.camera): \(error.sentence)")
                }
                for (shot, row) in found {
                    let size = sizes[Int(row.frame)] ?? (camera.width, camera.height)
                    kept.append(KeptStill(camera: index, shot: shot, row: row, path: plan.path(node: camera.node, camera: camera.camera, shot: shot),
                                          width: size.width, height: size.height))
                }
            }
            // The span's video served its purpose: the shot is its stills.
            for path in [mkv, csv] { try? FileManager.default.removeItem(at: directory.appendingPathComponent(path)) }
        }
        try? FileManager.default.removeItem(at: directory.appendingPathComponent("\(manifest.takeID).otio"))
        return try finishShot(manifest, kept: kept, plan: plan, budget: take.report.budget, directory: directory, console: console)
    }

    /// One still a shot keeps, before it is hashed: the manifest's camera (its index), the shot, the frames.csv row
    /// that places it on the grid, where it is and its size.
    public struct KeptStill: Sendable {
        public var camera: Int
        public var shot: Int
        public var row: FrameRow
        public var path: String
        public var width: Int
        public var height: Int
        /// Taken through a mode switch (a console Snap at another size than the camera previews at).
        public var modeSwitch = false
    }

    /// The ending both Snap paths share (the cold take's span, the console's warm shot): every kept still hashed and
    /// listed, a dup named, the cameras' files and counts set, then manifest (`kind: "stills"`), sync report over
    /// the shots' centres and ASC MHL.
    static func finishShot(_ shotManifest: TakeManifest, kept: [KeptStill], plan: SnapPlan, budget: TakeManifest.BudgetSummary?,
                           directory: URL, console: Console) throws -> SnapOutcome {
        var manifest = shotManifest
        var stills: [StillRecord] = []
        var inputs: [SyncReport.Input] = []
        var shotRows: [String: [FrameRow]] = [:]
        for (index, camera) in manifest.cameras.enumerated() {
            let mine = kept.filter { $0.camera == index }
            var files: [TakeManifest.File] = []
            for still in mine {
                let digest = try FileDigest.sha256AndXXH128(of: directory.appendingPathComponent(still.path))
                stills.append(StillRecord(node: camera.node, camera: camera.camera, shot: still.shot, group: still.row.group,
                                          centerMicroseconds: still.row.centerMicroseconds, width: still.width, height: still.height,
                                          path: still.path, bytes: digest.bytes, xxh128: digest.xxh128))
                if still.modeSwitch {
                    // Not the preview's exposure timing: the camera restarted; its phase error stated as measured.
                    stills[stills.count - 1].modeSwitch = true
                    stills[stills.count - 1].phaseErrorMicroseconds = still.row.centerMicroseconds - manifest.grid.instant(ofGroup: still.row.group)
                }
                files.append(.init(path: still.path, bytes: digest.bytes, sha256: digest.sha256, xxh128: digest.xxh128))
                if still.row.isDup {
                    manifest.events.append(.init(tMicroseconds: still.row.centerMicroseconds, node: camera.node, camera: camera.camera, kind: .dup,
                                                 detail: "camera \(camera.node)/\(camera.camera) delivered no frame of group \(still.row.group): its still of shot \(still.shot) repeats its previous frame"))
                }
            }
            let rows = mine.map(\.row)
            shotRows["\(camera.node)/\(camera.camera)"] = rows
            inputs.append(SyncReport.Input(node: camera.node, camera: camera.camera, rows: rows,
                                           clockUncertaintyMicroseconds: camera.clock.uncertaintyMicroseconds,
                                           centerUncertaintyMicroseconds: camera.centerUncertaintyMicroseconds))
            manifest.cameras[index].files = files
            manifest.cameras[index].frames = Int64(mine.count)
            manifest.cameras[index].dropped = Int64(mine.filter(\.row.isDup).count)
            manifest.cameras[index].codec = plan.format.rawValue
        }
        manifest.events.sort { $0.tMicroseconds < $1.tMicroseconds }
        var report = SyncReport(groups: Int64(plan.count), grid: manifest.grid, inputs: inputs)
        report.events = manifest.events
        report.budget = budget
        try write(manifest: manifest, stills: stills, report: report, rows: shotRows, directory: directory)
        seal(root: directory.path, stills: stills, console: console)
        return SnapOutcome(directory: directory, manifest: manifest, report: report, stills: stills)
    }

    /// manifest.json (the take's keys with `kind` and `stills`), sync-report.json and sync-report.html.
    static func write(manifest: TakeManifest, stills: [StillRecord], report: SyncReport, rows: [String: [FrameRow]],
                      directory: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard var object = try JSONSerialization.jsonObject(with: encoder.encode(manifest)) as? [String: Any],
              let list = try JSONSerialization.jsonObject(with: encoder.encode(stills)) as? [Any] else {
            throw CoordError(.failure, "the shot's manifest could not be encoded.")
        }
        object["kind"] = "stills"
        object["stills"] = list
        let manifestData = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        let hashes = Dictionary(stills.map { ($0.path, $0.xxh128) }, uniquingKeysWith: { a, _ in a })
        let files: [(String, Data)] = [
            ("manifest.json", manifestData),
            ("sync-report.json", try modeSwitches(stills, in: encoder.encode(report))),
            ("sync-report.html", Data(SyncReportPage.html(manifest: manifest, report: report, rows: rows, xxh128: hashes).utf8)),
        ]
        for (name, data) in files {
            let url = directory.appendingPathComponent(name)
            do { try data.write(to: url, options: .atomic) } catch {
                throw CoordError(.failure, "cannot write \(url.path): \(error.localizedDescription).")
            }
        }
    }

    /// The report with `mode_switches` when a still came through a mode switch: per camera, its size and each
    /// still's phase error as measured, saying it is not from the video's exposure timing (unchanged otherwise).
    static func modeSwitches(_ stills: [StillRecord], in report: Data) throws -> Data {
        let switched = stills.filter { $0.modeSwitch == true }
        guard !switched.isEmpty, var object = try JSONSerialization.jsonObject(with: report) as? [String: Any] else { return report }
        let cameras = Dictionary(grouping: switched) { "\($0.node)/\($0.camera)" }
        object["mode_switches"] = cameras.keys.sorted().map { key -> [String: Any] in
            let mine = cameras[key]!.sorted { $0.shot < $1.shot }
            return ["node": mine[0].node, "camera": mine[0].camera, "width": mine[0].width, "height": mine[0].height,
                    "phase_error_us": mine.map { $0.phaseErrorMicroseconds ?? 0 },
                    "exposure_timing": "mode switch: the camera was restarted at \(mine[0].width)x\(mine[0].height) for the shot, so its still is not from the preview's exposure timing; its phase lock restarted, and its phase error is as measured"]
        }
        return try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    }

    /// A fresh ASC MHL history listing every file of the shot: the span's generation listed video that is gone.
    static func seal(root: String, stills: [StillRecord], console: Console) {
        let history = URL(fileURLWithPath: root).appendingPathComponent(ASCMHL.folder)
        try? FileManager.default.removeItem(at: history)
        var files: [String: ASCMHL.OnDisk] = [:]
        let base = URL(fileURLWithPath: root).standardizedFileURL.resolvingSymlinksInPath().path
        if let walker = FileManager.default.enumerator(atPath: base) {
            for case let path as String in walker {
                if let onDisk = ASCMHLHistory.onDisk(root: base, path: path) { files[path] = onDisk }
            }
        }
        let known = Dictionary(stills.map { ($0.path, $0.xxh128) }, uniquingKeysWith: { a, _ in a })
        do {
            if let generation = try ASCMHLHistory.seal(root: base, files: files, known: known, exactly: true, status: { _ in }) {
                console.step("ASC MHL: \(ASCMHL.folder)/\(generation) lists the shot's \(files.count) file(s)")
            }
        } catch {
            console.step("  warning: the shot's ASC MHL history was not written: \(error)")
        }
    }
}
