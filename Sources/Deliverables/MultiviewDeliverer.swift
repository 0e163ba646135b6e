import CoordCore
import Foundation
import LibAV
import Platform
import TakeDocuments

/// `coord deliver --to multiview`'s I/O shell: reads the take directory as `Deliverer` does, plans the multiview
/// (`MultiviewPlan`), and has LibAV's `MultiviewExport` write it under a temporary name in `deliver/` first.
public enum MultiviewDeliverer {
    /// The labels' font: drawtext needs a file, and Debian's fonts-dejavu-core puts it here.
    public static let fontFile = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    public static let fontPackage = "fonts-dejavu-core"

    /// Makes (or finds up to date) `deliver/<take-id>_multiview.mov`; returns its path relative to the take and
    /// whether it was made. Throws `DeliverProblem` for bad input (exit 2), `DeliverFailure` when it cannot be made.
    public static func run(takeDirectory: String, layout: MultiviewLayout, width: Int, fontFile: String = fontFile,
                           status: @escaping @Sendable (String) -> Void) throws -> (output: String, made: Bool) {
        let root = URL(fileURLWithPath: takeDirectory).standardizedFileURL.resolvingSymlinksInPath().path
        let take: TakeDirectory
        do { take = try TakeDirectory.open(root) } catch {
            if error.reason == .missing || error.reason == .notDirectory { throw DeliverProblem("\(takeDirectory) is not a directory.") }
            throw error.deliverError
        }
        let data: Data
        do { data = try take.data("manifest.json", limit: 64 << 20) } catch {
            if error.reason == .missing { throw DeliverProblem("\(takeDirectory) has no manifest.json; it is not a coord take directory.") }
            throw error.deliverError
        }
        let manifest: TakeManifest
        do { manifest = try JSONDecoder().decode(TakeManifest.self, from: data) } catch {
            throw DeliverProblem("\(takeDirectory)/manifest.json is not a readable coord manifest: \(JSONFieldProblem.describe(error, decoding: TakeManifest.self, from: data)).")
        }
        if manifest.cameras.isEmpty { throw DeliverProblem("take \(manifest.takeID) has no cameras to put in a multiview.") }
        let deliver = try DeliverPlan.make(manifest, codec: .h264).get()
        var plan = try MultiviewPlan.make(deliver, layout: layout, width: width).get()
        for source in plan.tiles.map(\.source) + plan.sounds.map(\.source) {
            let present: Bool
            do { present = try take.checkFile(source) } catch { throw error.deliverError }
            guard present else { throw DeliverProblem("take \(plan.takeID) is incomplete: \(source) is missing from \(takeDirectory).") }
        }
        // Frame i is group i (CONTRACT §4), and the table says which frames were filled.
        for k in plan.tiles.indices {
            let csv = plan.tiles[k].source.replacingOccurrences(of: ".mkv", with: ".frames.csv")
            let table: Data?
            do { table = try take.data(csv, limit: 256 << 20) } catch where error.reason == .missing { table = nil } catch { throw error.deliverError }
            guard let table, let text = String(data: table, encoding: .utf8) else { continue }
            if let problem = DeliverPlan.framesProblem(text, groups: plan.groups, file: csv) { throw problem }
            plan.tiles[k].filled = MultiviewPlan.filledGroups(text)
        }
        guard FileManager.default.isReadableFile(atPath: fontFile) else {
            throw DeliverFailure("the multiview's labels need the font \(fontFile), which is missing; install the \(fontPackage) package.")
        }

        let folder: TakeDirectory
        do { folder = try take.directory(DeliverPlan.directory, create: true) } catch { throw error.deliverError }
        var record = DeliverRecord()
        do {
            if try take.checkFile(DeliverPlan.record), let kept = try? JSONDecoder().decode(DeliverRecord.self, from: take.data(DeliverPlan.record, limit: 64 << 20)) {
                record = kept
            }
        } catch { throw error.deliverError }
        let existing: UInt64?
        do { existing = try take.checkFile(plan.output) ? try take.entry(plan.output)?.size : nil } catch { throw error.deliverError }
        if record.isUpToDate(plan.output, fingerprint: plan.fingerprint, bytes: existing) { return (plan.output, false) }

        let name = (plan.output as NSString).lastPathComponent
        let temporary = ".\(name).part-\(ProcessInfo.processInfo.processIdentifier)"
        var sources: [TakeFile] = []
        let out: Int32
        do throws(TakeFileError) {
            for source in plan.tiles.map(\.source) + plan.sounds.map(\.source) { sources.append(try take.file(source)) }
            folder.remove(temporary)
            out = try folder.create(temporary)
        } catch { throw DeliverFailure(error.sentence) }
        defer { _ = close(out) }
        // libav opens the descriptors' own names: the very files checked here, never a path resolved again.
        let movie = exportMovie(plan, inputs: sources.map(\.procPath), fontFile: fontFile)
        let started = Date()
        var lastLine = Date.distantPast
        do {
            try MultiviewExport.write(movie, to: "/proc/self/fd/\(out)") { done in
                let now = Date()
                guard now.timeIntervalSince(lastLine) >= 0.5 || done == plan.groups else { return }
                lastLine = now
                status(MultiviewPlan.progressLine(done: done, of: plan.groups, seconds: now.timeIntervalSince(started)))
            }
            var st = stat()
            let bytes: UInt64 = fstat(out, &st) == 0 ? UInt64(max(0, st.st_size)) : 0
            do throws(TakeFileError) { try folder.rename(temporary, to: name) } catch { throw DeliverFailure(error.sentence) }
            record.outputs[plan.output] = DeliverRecord.Entry(fingerprint: plan.fingerprint, bytes: bytes)
        } catch {
            folder.remove(temporary)
            var sentence = (error as? MultiviewExport.Failure)?.sentence ?? (error as? DeliverFailure)?.sentence ?? "\(error)"
            for (file, source) in zip(sources, plan.tiles.map(\.source) + plan.sounds.map(\.source)) {
                sentence = sentence.replacingOccurrences(of: file.procPath, with: source)
            }
            throw DeliverFailure(sentence.replacingOccurrences(of: "/proc/self/fd/\(out)", with: "\(folder.path)/\(temporary)"))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        if let bytes = try? encoder.encode(record) {
            do { try take.writeAtomically(bytes, to: DeliverPlan.record) } catch { throw error.deliverError }
        }
        return (plan.output, true)
    }

    /// The plan as LibAV's plain values, each source opened at `inputs[k]` (tiles, then microphones).
    static func exportMovie(_ plan: MultiviewPlan, inputs: [String], fontFile: String) -> MultiviewExport.Movie {
        func rect(_ r: MultiviewRect) -> MultiviewExport.Rect { .init(x: r.x, y: r.y, width: r.width, height: r.height) }
        let tiles = plan.tiles.enumerated().map { k, t in
            MultiviewExport.Tile(source: t.source, input: inputs[k], cell: rect(t.cell), picture: rect(t.picture), label: t.label, filled: t.filled)
        }
        let sounds = plan.sounds.enumerated().map { k, s in
            MultiviewExport.Sound(source: s.source, input: inputs[plan.tiles.count + k], streamIndex: s.streamIndex, sampleRate: s.sampleRate,
                                  channels: s.channels, skipSamples: s.skipSamples, samples: s.samples)
        }
        return MultiviewExport.Movie(width: plan.width, height: plan.height, band: plan.band, overlay: plan.layout == .pip, tiles: tiles, sounds: sounds,
                                     frames: plan.groups, rateNumerator: plan.rateNumerator, rateDenominator: plan.rateDenominator,
                                     timecode: plan.timecode, fontFile: fontFile)
    }
}
