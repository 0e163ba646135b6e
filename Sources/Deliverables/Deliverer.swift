import CoordCore
import Foundation
import Platform
import Synchronization
import TakeDocuments

/// `coord deliver`'s I/O shell: reads the take directory (never the nodes), carries out the `DeliverPlan` on every
/// core, and writes each deliverable under a temporary name first, so a killed coordinator leaves none half-written
/// under its final name.
public enum Deliverer {
    /// What a run did, one line per deliverable.
    public struct Summary: Equatable, Sendable {
        public var made: [String] = []
        public var upToDate: [String] = []
    }

    /// Makes `items` for the take in `takeDirectory`. Throws `DeliverProblem` for bad input (exit 2) and
    /// `DeliverFailure` when a deliverable cannot be made (exit 1). `status` gets the progress lines.
    public static func run(takeDirectory: String, items: [DeliverItem], codec: VideoCodecChoice,
                           status: @escaping @Sendable (String) -> Void) throws -> Summary {
        let root = URL(fileURLWithPath: takeDirectory).standardizedFileURL.resolvingSymlinksInPath().path
        // Everything below the take directory is opened through the funnel: no link followed, no FIFO opened.
        let take: TakeDirectory
        do { take = try TakeDirectory.open(root) } catch {
            if error.reason == .missing || error.reason == .notDirectory { throw DeliverProblem("\(takeDirectory) is not a directory.") }
            throw refusal(error)
        }
        let data: Data
        do { data = try take.data("manifest.json", limit: 64 << 20) } catch {
            if error.reason == .missing { throw DeliverProblem("\(takeDirectory) has no manifest.json; it is not a coord take directory.") }
            throw refusal(error)
        }
        let manifest: TakeManifest
        do { manifest = try JSONDecoder().decode(TakeManifest.self, from: data) } catch {
            throw DeliverProblem("\(takeDirectory)/manifest.json is not a readable coord manifest: \(JSONFieldProblem.describe(error, decoding: TakeManifest.self, from: data)).")
        }
        var plan = try DeliverPlan.make(manifest, codec: codec).get()
        for note in plan.notes { status(note) }
        for source in plan.movs.map(\.source) + plan.wavs.map(\.source) {
            let present: Bool
            do { present = try take.checkFile(source) } catch { throw refusal(error) }
            guard present else { throw DeliverProblem("take \(plan.takeID) is incomplete: \(source) is missing from \(takeDirectory).") }
        }
        // Frame i must be group i (CONTRACT §4): the frames tables say so for every camera that has one.
        for mov in plan.movs {
            let csv = mov.source.replacingOccurrences(of: ".mkv", with: ".frames.csv")
            let table: Data?
            do { table = try take.data(csv, limit: 256 << 20) } catch where error.reason == .missing { table = nil } catch { throw refusal(error) }
            if let table, let text = String(data: table, encoding: .utf8) {
                if let problem = DeliverPlan.framesProblem(text, groups: plan.groups, file: csv) { throw problem }
                plan.addFills(text, node: mov.node, camera: mov.camera)
            }
        }
        var summary = Summary()
        if items.contains(.mov) { try media(plan, take: take, status: status, summary: &summary) }
        // What the history already seals is never rewritten (ascmhl checks every file against its first record).
        let sealed = try ASCMHLHistory.recorded(take)
        if items.contains(.fcpxml) {
            try writeIfChanged(FCPXMLDocument.xml(plan), take: take, name: "\(plan.takeID).fcpxml", sealed: sealed, status: status, summary: &summary)
        }
        if items.contains(.fcp7xml) {
            try writeIfChanged(FCP7XMLDocument.xml(plan), take: take, name: "\(plan.takeID).xml", sealed: sealed, status: status, summary: &summary)
        }
        // The .otio points at the deliverables that exist (the recordings otherwise), with the same markers.
        var delivered: [String: String] = [:]
        for job in plan.movs.map({ ($0.source, $0.output) }) + plan.wavs.map({ ($0.source, $0.output) }) where try size(take, job.1) != nil {
            delivered[job.0] = job.1
        }
        let timeline: Data
        do { timeline = try EditorialTimeline.otio(manifest, delivered: delivered, markers: plan.markers) } catch {
            throw DeliverFailure("cannot write \(plan.takeID).otio: \(error).")
        }
        try writeIfChanged(timeline, take: take, name: "\(plan.takeID).otio", sealed: sealed, status: status, summary: &summary)
        // Last: it seals what the steps before made.
        if items.contains(.mhl) { try seal(take: take, status: status, summary: &summary) }
        return summary
    }

    /// A path of the take the funnel would not use, as the sentence deliver throws (see `TakeFileError.deliverError`).
    static func refusal(_ error: TakeFileError) -> Error { error.deliverError }

    /// The size of the regular file at `relative`, nil when it is missing; anything else there is refused.
    private static func size(_ take: TakeDirectory, _ relative: String) throws -> UInt64? {
        do {
            guard try take.checkFile(relative) else { return nil }
            return try take.entry(relative)?.size
        } catch { throw refusal(error) }
    }

    // MARK: - QuickTime and Broadcast WAV

    private enum Job: Sendable {
        case mov(MovJob), wav(WavJob)
        var output: String { switch self { case .mov(let j): j.output; case .wav(let j): j.output } }
        var source: String { switch self { case .mov(let j): j.source; case .wav(let j): j.source } }
        var fingerprint: String { switch self { case .mov(let j): j.fingerprint; case .wav(let j): j.fingerprint } }
    }

    private static func media(_ plan: DeliverPlan, take: TakeDirectory, status: @escaping @Sendable (String) -> Void, summary: inout Summary) throws {
        let folder: TakeDirectory
        do { folder = try take.directory(DeliverPlan.directory, create: true) } catch { throw refusal(error) }
        removeLeftovers(in: folder)
        var record = DeliverRecord()
        do {
            if try take.checkFile(DeliverPlan.record), let kept = try? JSONDecoder().decode(DeliverRecord.self, from: take.data(DeliverPlan.record, limit: 64 << 20)) {
                record = kept
            }
        } catch { throw refusal(error) }
        let all: [Job] = plan.movs.map { .mov($0) } + plan.wavs.map { .wav($0) }
        var outputBytes: [String: UInt64] = [:]
        var sourceBytes: [String: UInt64] = [:]
        for job in all {
            outputBytes[job.output] = try size(take, job.output)
            sourceBytes[job.source] = try size(take, job.source) ?? 0
        }
        let due = all.filter { !record.isUpToDate($0.output, fingerprint: $0.fingerprint, bytes: outputBytes[$0.output] ?? nil) }
        summary.upToDate += all.filter { job in !due.contains { $0.output == job.output } }.map(\.output)
        guard !due.isEmpty else { return }
        // Biggest first, so the last job to finish is a short one.
        let jobs = due.sorted { (sourceBytes[$0.source] ?? 0) > (sourceBytes[$1.source] ?? 0) }
        let meter = ProgressMeter(what: "deliver", total: jobs.reduce(0) { $0 + Int64(sourceBytes[$1.source] ?? 0) }, status: status)
        let results = Mutex<[String: Result<UInt64, DeliverFailure>]>([:])
        let pid = ProcessInfo.processInfo.processIdentifier
        DispatchQueue.concurrentPerform(iterations: jobs.count) { i in
            let job = jobs[i]
            let name = (job.output as NSString).lastPathComponent
            let temporary = ".\(name).part-\(pid)"
            let result: Result<UInt64, DeliverFailure>
            do {
                // libav opens by name: it gets the descriptors' own names, so it reads the very file checked here and
                // writes the one just created in deliver/, never a path resolved again through the take.
                let source: TakeFile, out: Int32
                do throws(TakeFileError) {
                    source = try take.file(job.source)
                    folder.remove(temporary)
                    out = try folder.create(temporary)
                } catch {
                    throw DeliverFailure(error.sentence)
                }
                defer { _ = close(out) }
                let output = "/proc/self/fd/\(out)"
                do {
                    switch job {
                    case .mov(let j): try QuickTimeWriter.writeMov(j, from: source.procPath, to: output) { meter.add($0) }
                    case .wav(let j):
                        try QuickTimeWriter.writeWav(j, from: source.procPath, to: output) { meter.add($0) }
                        try appendChunk(BroadcastWAV.chunk(j.ixml), to: out, file: job.output)
                    }
                } catch let failure as DeliverFailure {
                    throw DeliverFailure(failure.sentence.replacingOccurrences(of: source.procPath, with: source.path)
                        .replacingOccurrences(of: output, with: folder.path + "/" + temporary))
                }
                var st = stat()
                let bytes: UInt64 = fstat(out, &st) == 0 ? UInt64(max(0, st.st_size)) : 0
                do throws(TakeFileError) { try folder.rename(temporary, to: name) } catch { throw DeliverFailure(error.sentence) }
                result = .success(bytes)
            } catch {
                folder.remove(temporary)
                result = .failure(error as? DeliverFailure ?? DeliverFailure("cannot make \(job.output): \(error)."))
            }
            results.withLock { $0[job.output] = result }
        }
        meter.finish()
        let outcome = results.withLock { $0 }
        for job in jobs {
            if case .success(let bytes)? = outcome[job.output] {
                record.outputs[job.output] = DeliverRecord.Entry(fingerprint: job.fingerprint, bytes: bytes)
                summary.made.append(job.output)
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        if let bytes = try? encoder.encode(record) {
            do { try take.writeAtomically(bytes, to: DeliverPlan.record) } catch { throw refusal(error) }
        }
        for job in jobs { if case .failure(let failure)? = outcome[job.output] { throw failure } }
    }

    /// Temporary files a killed run left behind.
    private static func removeLeftovers(in folder: TakeDirectory) {
        for entry in (try? folder.entries()) ?? [] where entry.name.hasPrefix(".") && entry.name.contains(".part-") {
            folder.remove(entry.name)
        }
    }

    // MARK: - Editor XML

    private static func writeIfChanged(_ text: String, take: TakeDirectory, name: String, sealed: [String: ASCMHL.Known],
                                       status: @Sendable (String) -> Void, summary: inout Summary) throws {
        try writeIfChanged(Data(text.utf8), take: take, name: name, sealed: sealed, status: status, summary: &summary)
    }

    /// Writes `data` to `name` unless it holds it already, or unless the ASC MHL history seals other bytes under that
    /// name (a take delivered before v1.3): then it is kept as it is, and a note says so.
    private static func writeIfChanged(_ data: Data, take: TakeDirectory, name: String, sealed: [String: ASCMHL.Known],
                                       status: @Sendable (String) -> Void, summary: inout Summary) throws {
        do {
            if try take.checkFile(name), try take.data(name) == data {
                summary.upToDate.append(name)
                return
            }
            if let record = sealed[name], try take.checkFile(name), record.xxh128 != XXH128.bytes(data) {
                status("\(name) is kept as the ASC MHL history seals it (a newer one would break the seal); deliver a fresh copy of the take without ascmhl/ for one that is new.")
                summary.upToDate.append(name)
                return
            }
            try take.writeAtomically(data, to: name)
        } catch { throw refusal(error) }
        summary.made.append(name)
    }

    /// Appends a RIFF chunk to the WAV open at `fd` and counts it in the RIFF size (bytes 4…7).
    private static func appendChunk(_ chunk: Data, to fd: Int32, file: String) throws {
        // The descriptor is write-only: the WAV muxer just wrote the RIFF header, so only its size field is patched.
        do {
            let end = try POSIX.retryingEINTR("lseek", file) { lseek(fd, 0, SEEK_END) }
            var written = 0
            while written < chunk.count {
                let n = try POSIX.retryingEINTR("pwrite", file) {
                    chunk.withUnsafeBytes { pwrite(fd, $0.baseAddress! + written, chunk.count - written, end + off_t(written)) }
                }
                written += n
            }
            var riff = UInt32(clamping: Int(end) + chunk.count - 8).littleEndian
            try POSIX.retryingEINTR("pwrite", file) { pwrite(fd, &riff, 4, 4) }
        } catch let failure as POSIXFailure {
            throw DeliverFailure("cannot write \(file): \(failure)")
        }
    }

    // MARK: - ASC MHL

    /// Adds a generation to `<take>/ascmhl/` listing every file of the take with its xxh128, unless the history
    /// already lists exactly the files as they are.
    private static func seal(take: TakeDirectory, status: @escaping @Sendable (String) -> Void, summary: inout Summary) throws {
        if let file = try ASCMHLHistory.seal(take: take, files: try takeFiles(take), exactly: true, status: status) {
            summary.made.append("\(ASCMHL.folder)/\(file)")
        } else {
            summary.upToDate.append(ASCMHL.folder)
        }
    }

    /// Every regular file under the take directory but the ASC MHL folder (and what ascmhl ignores), by relative path;
    /// a link, FIFO, device or socket anywhere in the take is refused, never left out silently.
    private static func takeFiles(_ take: TakeDirectory) throws -> [String: ASCMHL.OnDisk] {
        let found: [String: TakeEntry]
        do {
            found = try take.regularFiles { path in path == ASCMHL.folder || (path as NSString).lastPathComponent == ".DS_Store" }
        } catch { throw refusal(error) }
        return found.mapValues(ASCMHLHistory.onDisk)
    }
}
