import CoordCore
import Foundation
import Platform
import Synchronization

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
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw DeliverProblem("\(takeDirectory) is not a directory.")
        }
        guard let data = FileManager.default.contents(atPath: root + "/manifest.json") else {
            throw DeliverProblem("\(takeDirectory) has no manifest.json; it is not a coord take directory.")
        }
        let manifest: TakeManifest
        do { manifest = try JSONDecoder().decode(TakeManifest.self, from: data) } catch {
            throw DeliverProblem("\(takeDirectory)/manifest.json is not a readable coord manifest: \(JSONFieldProblem.describe(error, decoding: TakeManifest.self, from: data)).")
        }
        let plan = try DeliverPlan.make(manifest, codec: codec).get()
        for note in plan.notes { status(note) }
        for source in plan.movs.map(\.source) + plan.wavs.map(\.source) where !FileManager.default.fileExists(atPath: root + "/" + source) {
            throw DeliverProblem("take \(plan.takeID) is incomplete: \(source) is missing from \(takeDirectory).")
        }
        // Frame i must be group i (CONTRACT §4): the frames tables say so for every camera that has one.
        for mov in plan.movs {
            let csv = mov.source.replacingOccurrences(of: ".mkv", with: ".frames.csv")
            if let text = try? String(contentsOfFile: root + "/" + csv, encoding: .utf8),
               let problem = DeliverPlan.framesProblem(text, groups: plan.groups, file: csv) { throw problem }
        }
        var summary = Summary()
        if items.contains(.mov) { try media(plan, root: root, status: status, summary: &summary) }
        if items.contains(.fcpxml) {
            try writeIfChanged(FCPXMLDocument.xml(plan, takeDirectory: root), root: root, name: "\(plan.takeID).fcpxml", summary: &summary)
        }
        if items.contains(.fcp7xml) {
            try writeIfChanged(FCP7XMLDocument.xml(plan, takeDirectory: root), root: root, name: "\(plan.takeID).xml", summary: &summary)
        }
        // Last: it seals what the steps before made.
        if items.contains(.mhl) { try seal(root: root, status: status, summary: &summary) }
        return summary
    }

    // MARK: - QuickTime and Broadcast WAV

    private enum Job: Sendable {
        case mov(MovJob), wav(WavJob)
        var output: String { switch self { case .mov(let j): j.output; case .wav(let j): j.output } }
        var source: String { switch self { case .mov(let j): j.source; case .wav(let j): j.source } }
        var fingerprint: String { switch self { case .mov(let j): j.fingerprint; case .wav(let j): j.fingerprint } }
    }

    private static func media(_ plan: DeliverPlan, root: String, status: @escaping @Sendable (String) -> Void, summary: inout Summary) throws {
        let directory = root + "/" + DeliverPlan.directory
        do { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) } catch {
            throw DeliverFailure("cannot create \(directory): \(error.localizedDescription).")
        }
        removeLeftovers(in: directory)
        let recordPath = root + "/" + DeliverPlan.record
        var record = FileManager.default.contents(atPath: recordPath).flatMap { try? JSONDecoder().decode(DeliverRecord.self, from: $0) } ?? DeliverRecord()
        let all: [Job] = plan.movs.map { .mov($0) } + plan.wavs.map { .wav($0) }
        let due = all.filter { !record.isUpToDate($0.output, fingerprint: $0.fingerprint, bytes: size(root + "/" + $0.output)) }
        summary.upToDate += all.filter { job in !due.contains { $0.output == job.output } }.map(\.output)
        guard !due.isEmpty else { return }
        // Biggest first, so the last job to finish is a short one.
        let jobs = due.sorted { (size(root + "/" + $0.source) ?? 0) > (size(root + "/" + $1.source) ?? 0) }
        let meter = ProgressMeter(what: "deliver", total: jobs.reduce(0) { $0 + Int64(size(root + "/" + $1.source) ?? 0) }, status: status)
        let results = Mutex<[String: Result<UInt64, DeliverFailure>]>([:])
        let pid = ProcessInfo.processInfo.processIdentifier
        DispatchQueue.concurrentPerform(iterations: jobs.count) { i in
            let job = jobs[i]
            let final = root + "/" + job.output
            let name = (job.output as NSString).lastPathComponent
            let temporary = directory + "/.\(name).part-\(pid)"
            let result: Result<UInt64, DeliverFailure>
            do {
                switch job {
                case .mov(let j): try QuickTimeWriter.writeMov(j, from: root + "/" + j.source, to: temporary) { meter.add($0) }
                case .wav(let j): try QuickTimeWriter.writeWav(j, from: root + "/" + j.source, to: temporary) { meter.add($0) }
                }
                guard rename(temporary, final) == 0 else {
                    throw DeliverFailure("cannot rename \(temporary) to \(final): \(String(cString: strerror(errno))).")
                }
                result = .success(size(final) ?? 0)
            } catch {
                unlink(temporary)
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
        if let bytes = try? encoder.encode(record) { try writeAtomically(bytes, to: recordPath) }
        for job in jobs { if case .failure(let failure)? = outcome[job.output] { throw failure } }
    }

    /// Temporary files a killed run left behind.
    private static func removeLeftovers(in directory: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix(".") && name.contains(".part-") {
            unlink(directory + "/" + name)
        }
    }

    // MARK: - Editor XML

    private static func writeIfChanged(_ text: String, root: String, name: String, summary: inout Summary) throws {
        let data = Data(text.utf8)
        if FileManager.default.contents(atPath: root + "/" + name) == data {
            summary.upToDate.append(name)
            return
        }
        try writeAtomically(data, to: root + "/" + name)
        summary.made.append(name)
    }

    /// Writes to a temporary name beside `path`, then renames: `path` is either the old bytes or the new.
    static func writeAtomically(_ data: Data, to path: String) throws {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).part-\(ProcessInfo.processInfo.processIdentifier)").path
        do {
            try data.write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, path) == 0 else { throw DeliverFailure("rename: \(String(cString: strerror(errno)))") }
        } catch {
            unlink(temporary)
            throw DeliverFailure("cannot write \(path): \(error).")
        }
    }

    // MARK: - ASC MHL

    /// Adds a generation to `<take>/ascmhl/` listing every file of the take with its xxh128, unless the history
    /// already lists exactly the files as they are.
    private static func seal(root: String, status: @escaping @Sendable (String) -> Void, summary: inout Summary) throws {
        if let file = try ASCMHLHistory.seal(root: root, files: try takeFiles(root), exactly: true, status: status) {
            summary.made.append("\(ASCMHL.folder)/\(file)")
        } else {
            summary.upToDate.append(ASCMHL.folder)
        }
    }

    /// Every regular file under the take directory but the ASC MHL folder (and what ascmhl ignores), by relative path.
    private static func takeFiles(_ root: String) throws -> [String: ASCMHL.OnDisk] {
        guard let walker = FileManager.default.enumerator(atPath: root) else { throw DeliverFailure("cannot list \(root).") }
        var files: [String: ASCMHL.OnDisk] = [:]
        while let path = walker.nextObject() as? String {
            let name = (path as NSString).lastPathComponent
            guard path != ASCMHL.folder, !path.hasPrefix(ASCMHL.folder + "/"), name != ".DS_Store",
                  let file = ASCMHLHistory.onDisk(root: root, path: path) else { continue }
            files[path] = file
        }
        return files
    }

    private static func size(_ path: String) -> UInt64? {
        var st = stat()
        return stat(path, &st) == 0 ? UInt64(st.st_size) : nil
    }
}

/// Bytes done out of a total, as `coord deliver: 12.3/45.6 MB, 20.1 MB/s, ETA 2 s` on stderr, at most twice a second.
final class ProgressMeter: Sendable {
    private struct State { var done: Int64 = 0; var lastPrint: TimeInterval = 0 }
    private let what: String
    private let total: Int64
    private let started = Date().timeIntervalSinceReferenceDate
    private let status: @Sendable (String) -> Void
    private let state = Mutex(State())

    init(what: String, total: Int64, status: @escaping @Sendable (String) -> Void) {
        self.what = what; self.total = max(total, 1); self.status = status
    }

    func add(_ bytes: Int64) {
        let now = Date().timeIntervalSinceReferenceDate
        let line: String? = state.withLock { s in
            s.done += bytes
            guard now - s.lastPrint >= 0.5 else { return nil }
            s.lastPrint = now
            return text(done: s.done, now: now)
        }
        if let line { status(line) }
    }

    /// The last line: all done (containers count fewer payload bytes than the files hold).
    func finish() {
        let now = Date().timeIntervalSinceReferenceDate
        status(text(done: total, now: now))
    }

    private func text(done: Int64, now: TimeInterval) -> String {
        let elapsed = max(now - started, 1e-3)
        let rate = Double(done) / elapsed
        let eta = rate > 0 ? Double(max(total - done, 0)) / rate : 0
        func mb(_ b: Double) -> String { String(format: "%.1f", b / 1e6) }
        return "\(what): \(mb(Double(done)))/\(mb(Double(total))) MB, \(mb(rate)) MB/s, ETA \(Int(eta.rounded(.up))) s"
    }
}
