import CoordCore
import CoordWire
import TakeDocuments
import Foundation
import Platform
import ZeroMQ
#if canImport(Glibc)
import Glibc
#endif

/// Collects a take's files and writes its directory from what arrived: used at the end of every take and by
/// `coord collect`, which finishes a take an earlier run (or a crashed coordinator) left incomplete. The
/// manifest is the take's only state: what recording knew (cameras, clocks, events) and what collection has
/// verified so far, so any run can pick up where the last stopped.
public enum TakeCollection {
    /// Event kinds worked out from the collected files, made afresh by every run.
    static let derivedKinds: Set<TakeEvent.Kind> = [.incomplete, .held, .dup, .collectFailed, .fileDamaged, .fileMissing, .recovered]

    /// The files a camera's recording leaves, relative to the take directory.
    static func paths(of camera: TakeManifest.Camera) -> [String] {
        ["\(camera.node)/\(camera.camera).mkv", "\(camera.node)/\(camera.camera).frames.csv"]
    }

    /// Fetches what is missing from the nodes (`links` by node name; a node without a link is unreachable for
    /// the reason given), writes manifest, report, page and timeline, and confirms the verified files to each
    /// node. Returns the finished manifest and report.
    static func run(directory: URL, manifest pending: TakeManifest, links: [String: NodeLink], unreachable: [String: String] = [:],
                    policy: CollectPolicy, console: Console) async throws -> (TakeManifest, SyncReport) {
        var nodeNames: [String] = []
        for camera in pending.cameras where !nodeNames.contains(camera.node) { nodeNames.append(camera.node) }
        let nodes = nodeNames.map { name in
            let cameras = pending.cameras.filter { $0.node == name }
            let sound = (pending.audio ?? []).filter { $0.node == name }
            let knownSound = sound.compactMap { a in
                a.sha256.isEmpty ? nil : TakeManifest.File(path: a.path, bytes: a.bytes ?? 0, sha256: a.sha256, xxh128: a.xxh128 ?? "")
            }
            return Collector.Node(name: name, link: links[name], expected: cameras.flatMap(paths(of:)) + sound.map(\.path),
                                  known: cameras.flatMap(\.files) + knownSound,
                                  unreachable: unreachable[name] ?? "node \(name) is not in the rig file.")
        }
        let collector = Collector(directory: directory, takeID: pending.takeID, policy: policy, console: console)
        let outcome = await collector.collect(nodes)
        let (manifest, report) = finish(pending, outcome: outcome, directory: directory, afterConfirm: policy.afterConfirm)
        do {
            try TakeDirectoryWriter(directory: directory).write(manifest: manifest, report: report)
        } catch {
            // A full disk fails a copy first: that copy is what the operator must hear of, the manifest after it.
            guard let first = outcome.missing.first(where: { $0.reason.hasPrefix("copying ") || $0.reason.hasPrefix("cannot create the copy") }) else { throw error }
            throw CoordError(.failure, "\(first.reason.hasSuffix(".") ? String(first.reason.dropLast()) : first.reason); then \(error)", node: first.node, file: first.path)
        }

        sealCollected(outcome.verified, directory: directory, console: console)

        // Only now, with the manifest on disk, may nodes let go of what arrived intact: each file only while its
        // copy at its final name is there at its size (it verified there when it arrived).
        let confirmations = outcome.confirmable.mapValues { files in
            files.filter { Collector.identity(path: directory.appendingPathComponent($0.path).path)?.bytes == $0.bytes }
        }.filter { !$0.value.isEmpty }.compactMap { entry in links[entry.key].map { (entry.key, $0, entry.value) } }
        let results = await eachNodeResult(confirmations) { entry in
            let confirm = CoordRequest.confirmCollected(takeID: pending.takeID, files: entry.2, keep: policy.afterConfirm == .keep)
            _ = try await entry.1.request(confirm, timeout: 30, what: "the collection confirmation")
        }
        for (entry, result) in zip(confirmations, results) {
            if let failure = result.failure {
                console.step("  warning: node \(entry.0) did not take the confirmation, so it keeps its files: \(failure)")
            }
        }
        return (manifest, report)
    }

    /// Adds an ASC MHL generation (`<take>/ascmhl/`) listing every collected file with the xxh128 its node computed
    /// and collection checked as the bytes arrived (files without one are hashed here). What the coordinator writes
    /// itself changes with every run, so it is left to `coord deliver`'s generation. A history that cannot be written
    /// is a warning: the files are collected and verified all the same.
    static func sealCollected(_ verified: [String: TakeManifest.File], directory: URL, console: Console) {
        let root = directory.standardizedFileURL.resolvingSymlinksInPath().path
        var files: [String: ASCMHL.OnDisk] = [:]
        var hashes: [String: String] = [:]
        for (path, file) in verified {
            guard let onDisk = ASCMHLHistory.onDisk(root: root, path: path), onDisk.size == file.bytes else { continue }
            files[path] = onDisk
            hashes[path] = file.xxh128
        }
        guard !files.isEmpty else { return }
        do {
            if let generation = try ASCMHLHistory.seal(root: root, files: files, known: hashes, exactly: false,
                                                       ignore: ASCMHLHistory.coordinatorFiles, status: { _ in }) {
                console.step("ASC MHL: \(ASCMHL.folder)/\(generation) lists \(files.count) collected file(s)")
            }
        } catch {
            console.step("  warning: the take's ASC MHL history was not updated: \(error)")
        }
    }

    /// The manifest and report from the pending manifest and what collection verified (pure but for reading
    /// the frames tables).
    static func finish(_ pending: TakeManifest, outcome: Collector.Outcome, directory: URL,
                       afterConfirm: CollectPolicy.AfterConfirm) -> (TakeManifest, SyncReport) {
        let writer = TakeDirectoryWriter(directory: directory)
        let grid = pending.grid
        // Each camera's frames table, once it arrived verified.
        let tables = pending.cameras.map { camera -> [FrameRow]? in
            let csv = paths(of: camera)[1]
            return outcome.verified[csv] != nil ? writer.rows(csvPath: csv) : nil
        }
        // A take stopped before its plan (its coordinator gone, the manifest as recording began) has the groups its
        // nodes stopped at; run again, the plan is kept aside so the answer is the same.
        let planned = pending.plannedGroups ?? pending.groups
        let groups = RecordedLength.groups(planned: planned, tableEnds: tables.map { $0?.last.map { $0.group + 1 } })
        let end = grid.instant(ofGroup: groups)
        var manifest = pending
        manifest.groups = groups
        manifest.plannedGroups = groups < planned ? planned : nil
        var events = pending.events.filter { !derivedKinds.contains($0.kind) }
        var inputs: [SyncReport.Input] = []
        // A sound file that did not arrive is said, but the pictures decide whether the take is complete.
        let soundPaths = Set((pending.audio ?? []).map(\.path))
        var complete = outcome.missing.allSatisfy { soundPaths.contains($0.path) }
        // A camera that ended mid-take (unplugged: ENODEV) makes it partial even when no camera recorded past it —
        // a lone webcam pulled out shortens `groups` to its frames, and its table then matches them.
        if pending.events.contains(where: { $0.kind == .cameraEnded }) { complete = false }
        for (index, var camera) in pending.cameras.enumerated() {
            let paths = paths(of: camera)
            let files = paths.compactMap { outcome.verified[$0] }
            let rows = tables[index] ?? []
            let dups = Int64(rows.filter(\.isDup).count)
            // The node's count of frames repeated on purpose; without the frames table it stays as the node said.
            let held = rows.isEmpty ? (camera.held ?? 0) : min(camera.held ?? 0, dups)
            let dropped = dups - min(held, dups)
            if files.count != paths.count || rows.count != Int(groups) || !writer.rowsMatchGroups(rows) {
                complete = false
                let absent = paths.filter { outcome.verified[$0] == nil }
                let detail = !absent.isEmpty ? "files missing: \(absent.joined(separator: ", "))"
                    : camera.disabled == true ? "was disabled by \(camera.disabler): frames.csv holds \(rows.count) rows for \(groups) groups"
                    : "frames.csv holds \(rows.count) rows for \(groups) groups"
                events.append(.init(tMicroseconds: end, node: camera.node, camera: camera.camera, kind: .incomplete, detail: detail))
            }
            let recovered = rows.filter(\.isRecovered).count
            if recovered > 0 {
                complete = false
                events.append(.init(tMicroseconds: end, node: camera.node, camera: camera.camera, kind: .recovered,
                                    detail: "camera \(camera.node)/\(camera.camera) was recovered after node \(camera.node) stopped mid-take (killed or crashed): its file holds \(rows.count) frames, the last \(recovered) with rebuilt rows whose centres are estimated, not measured"))
            }
            if held > 0 && !rows.isEmpty {
                events.append(.init(tMicroseconds: grid.t0, node: camera.node, camera: camera.camera, kind: .held,
                                    detail: "\(held) of \(groups) groups repeat the previous frame on purpose (frame-rate cap or slow-down)"))
            }
            if dropped > 0 {
                events.append(.init(tMicroseconds: grid.t0, node: camera.node, camera: camera.camera, kind: .dup,
                                    detail: "\(dropped) of \(groups) groups filled with a repeat of the previous frame"))
            }
            camera.files = files
            camera.frames = Int64(rows.count)
            camera.dropped = dropped
            camera.held = held
            manifest.cameras[index] = camera
            // The node's last clock update: from then on its clock drifted unseen, and the report's bound says so.
            let lastUpdate = (pending.clockTrack ?? []).filter { $0.node == camera.node }.map(\.tMicroseconds).max()
            inputs.append(SyncReport.Input(node: camera.node, camera: camera.camera, rows: rows,
                                           clockUncertaintyMicroseconds: camera.clock.uncertaintyMicroseconds,
                                           centerUncertaintyMicroseconds: camera.centerUncertaintyMicroseconds, held: held,
                                           clockUpdatedUntil: lastUpdate))
        }
        // Sound: each microphone's file with its checksum once verified. A missing one is said, but the take's pictures
        // decide whether it is complete (sound never fails a take on its own).
        if var audio = manifest.audio {
            for i in audio.indices {
                if let file = outcome.verified[audio[i].path] {
                    audio[i].sha256 = file.sha256
                    audio[i].xxh128 = file.xxh128.isEmpty ? nil : file.xxh128
                    audio[i].bytes = file.bytes
                }
            }
            manifest.audio = audio
            // Sound the rig file requires: a microphone that ended early or a file that did not arrive is a gap.
            if pending.audioRequired == true {
                for a in audio where a.ended != nil || a.sha256.isEmpty {
                    complete = false
                    events.append(.init(tMicroseconds: end, node: a.node, camera: a.mic, kind: .incomplete,
                                        detail: "sound is required and microphone \(a.node)/\(a.mic) \(a.ended.map { "ended early: \($0)" } ?? "did not arrive")"))
                }
            }
        }
        if pending.audioRequired == true {
            for lost in pending.audioLost ?? [] {
                complete = false
                events.append(.init(tMicroseconds: end, node: lost.node, camera: lost.mic, kind: .incomplete,
                                    detail: "sound is required and microphone \(lost.node)/\(lost.mic) recorded none: it ended before group 0: \(lost.ended)"))
            }
        }
        for (node, reason) in outcome.nodeFailures {
            events.append(.init(tMicroseconds: end, node: node, camera: "", kind: .collectFailed, detail: reason))
        }
        for missing in outcome.missing {
            let camera = pending.cameras.first { $0.node == missing.node && paths(of: $0).contains(missing.path) }?.camera ?? ""
            let damaged = missing.reason.contains("does not match")
            // The detail starts with the file's path, so the page and the summary can name it.
            events.append(.init(tMicroseconds: end, node: missing.node, camera: camera, kind: damaged ? .fileDamaged : .fileMissing,
                                detail: missing.reason.hasPrefix(missing.path) ? missing.reason : "\(missing.path): \(missing.reason)"))
        }
        manifest.events = events.sorted { $0.tMicroseconds < $1.tMicroseconds }
        manifest.status = complete ? .complete : .partial
        var record = pending.collection ?? CollectionRecord(state: .pending)
        // The collection is complete once every file is here and verified; the take may still be partial for what the
        // files hold (the events say).
        record.state = outcome.missing.isEmpty && outcome.nodeFailures.isEmpty ? .complete : .incomplete
        record.missing = outcome.missing
        if !outcome.run.files.isEmpty || record.runs.isEmpty || outcome.run.alreadyHad > 0 { record.runs.append(outcome.run) }
        record.afterConfirm = afterConfirm.rawValue
        manifest.collection = record

        var report = SyncReport(groups: groups, grid: grid, inputs: inputs)
        report.budget = manifest.budget
        let reported = manifest.events.filter { SyncReport.reportedEventKinds.contains($0.kind) }
        report.events = reported.isEmpty ? nil : reported
        report.missingFiles = outcome.missing.isEmpty ? nil : outcome.missing
        report.audio = manifest.audio.map { $0.map(SyncReport.Audio.init) }
        return (manifest, report)
    }
}

extension TakeCollection {
    /// `coord collect`: finishes collecting the take in `directory` from the rig's nodes. Safe to run again at
    /// any time: files already here and verified are left alone, partial copies are resumed.
    public static func resume(_ spec: RigSpec, directory: URL, console: Console) async throws -> (TakeManifest, SyncReport) {
        let manifestURL = directory.appendingPathComponent("manifest.json")
        guard FileManager.default.fileExists(atPath: manifestURL.path) else {
            throw CoordError(.usage, "\(directory.path) has no manifest.json; it is not a coord take directory.")
        }
        let lock = try CollectLock(directory: directory, takeID: directory.lastPathComponent)
        defer { lock.release() }
        let data: Data
        do {
            data = try TakeDirectory.open(directory.path).data("manifest.json", limit: 64 << 20)
        } catch let error where error.isRefusal {
            throw CoordError(.usage, error.sentence)
        } catch {
            throw CoordError(.usage, "\(manifestURL.path) cannot be read: \(error.sentence)")
        }
        let manifest: TakeManifest
        do {
            manifest = try JSONDecoder().decode(TakeManifest.self, from: data)
        } catch {
            // The field at fault, where Foundation's decoder would say only "not valid JSON".
            throw CoordError(.usage, "\(manifestURL.path) is not a readable coord manifest: \(JSONFieldProblem.describe(error, decoding: TakeManifest.self, from: data)).")
        }
        if manifest.collection?.state == .complete {
            console.step("take \(manifest.takeID) was collected completely; checking every file here against its checksum")
        }
        let context = ZMQContext()
        var links: [String: NodeLink] = [:]
        var unreachable: [String: String] = [:]
        defer { links.values.forEach { $0.close() } }
        for name in Set(manifest.cameras.map(\.node)).sorted() {
            guard let node = spec.nodes.first(where: { $0.name == name }) else {
                unreachable[name] = "node \(name) of take \(manifest.takeID) is not in the rig file"
                continue
            }
            do {
                let link = try NodeLink(endpoint: node.endpoint, name: node.name, context: context, keys: spec.linkKeys(for: node))
                link.setName(name)
                links[name] = link
            } catch {
                unreachable[name] = "node \(name) at \(node.endpoint) cannot be reached: \(error)"
            }
        }
        return try await run(directory: directory, manifest: manifest, links: links, unreachable: unreachable,
                             policy: spec.collect, console: console)
    }
}

/// One collection per take directory at a time (two would write the same partial files): an flock on the
/// directory itself, released by the kernel if the process dies.
final class CollectLock {
    private let fd: Int32

    init(directory: URL, takeID: String) throws {
        do { fd = try POSIX.retryingEINTR("open") { open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } } catch {
            throw CoordError(.failure, "cannot open \(directory.path): \(error.reason).")
        }
        guard (try? POSIX.retryingEINTR("flock") { flock(fd, LOCK_EX | LOCK_NB) }) != nil else {
            close(fd)
            throw CoordError(.failure, "take \(takeID) is being collected by another coord right now; wait for it to finish.")
        }
    }

    func release() {
        flock(fd, LOCK_UN)
        close(fd)
    }

    /// Whether another coord collects the take in `directory` now.
    static func isHeld(directory: URL) -> Bool {
        guard let fd = try? POSIX.retryingEINTR("open", nil, { open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }) else {
            return false
        }
        defer { close(fd) }
        do { try POSIX.retryingEINTR("flock") { flock(fd, LOCK_EX | LOCK_NB) } } catch { return error.errno == EWOULDBLOCK }
        flock(fd, LOCK_UN)
        return false
    }
}
