import CoordCore
import Foundation
import Platform
import Synchronization

/// The take's ASC MHL history on disk (`<take>/ascmhl/`): reads what it says and adds a generation. Used by
/// `coord collect` (the nodes' files, with the xxh128 each node computed and collection checked as the bytes
/// arrived) and by `coord deliver` (every file of the take, hashed here).
public enum ASCMHLHistory {
    /// What the coordinator itself writes into a take directory and rewrites on every collection run: a collection
    /// generation leaves them to deliver's, which seals the whole take.
    public static let coordinatorFiles = ["manifest.json", "sync-report.json", "sync-report.html", "*.otio", ".coord~partial"]

    /// Adds a generation listing `files` (relative paths to the take directory at `root`) unless the history already
    /// lists every one at its size and date (`exactly`: and no other file). `known` are xxh128s already checked
    /// (a node's, verified as its bytes arrived); other files are hashed here on every core. `ignore` are extra
    /// ascmhl ignore patterns for files left out. Returns the generation's file name, nil when nothing was due.
    @discardableResult
    public static func seal(root: String, files: [String: ASCMHL.OnDisk], known precomputed: [String: String] = [:],
                            exactly: Bool, ignore: [String] = [],
                            status: @escaping @Sendable (String) -> Void) throws -> String? {
        let take: TakeDirectory
        do { take = try TakeDirectory.open(root) } catch { throw DeliverFailure(error.sentence) }
        return try seal(take: take, files: files, known: precomputed, exactly: exactly, ignore: ignore, status: status)
    }

    /// `seal` in a take directory already open: the history and every file hashed are opened through the funnel, so
    /// a linked `ascmhl/`, generation or file is refused (a `DeliverProblem` naming it), never read or written through.
    package static func seal(take: TakeDirectory, files: [String: ASCMHL.OnDisk], known precomputed: [String: String] = [:],
                     exactly: Bool, ignore: [String] = [],
                     status: @escaping @Sendable (String) -> Void) throws -> String? {
        let (folder, generations, known) = try read(take)
        if exactly ? ASCMHL.isUpToDate(files, known: known) : ASCMHL.listsAll(files, known: known) { return nil }
        var digests: [String: String] = [:]
        for (path, hash) in precomputed where files[path] != nil && XXH128.isValid(hash) { digests[path] = hash }
        let paths = files.keys.filter { digests[$0] == nil }.sorted { (files[$0]?.size ?? 0) > (files[$1]?.size ?? 0) }
        if !paths.isEmpty {
            let meter = ProgressMeter(what: "xxh128", total: paths.reduce(0) { $0 + Int64(files[$1]?.size ?? 0) }, status: status)
            let hashes = Mutex<[String: Result<String, Error>]>([:])
            DispatchQueue.concurrentPerform(iterations: paths.count) { i in
                let result: Result<String, Error>
                do {
                    let file = try take.file(paths[i])
                    let hasher = XXH128.Hasher()
                    try file.read { hasher.update($0); meter.add(Int64($0.count)) }
                    result = .success(hasher.hex())
                } catch let error as TakeFileError {
                    result = .failure(error.deliverError)
                } catch {
                    result = .failure(DeliverFailure("\(error)"))
                }
                hashes.withLock { $0[paths[i]] = result }
            }
            meter.finish()
            for (path, result) in hashes.withLock({ $0 }).sorted(by: { $0.key < $1.key }) { digests[path] = try result.get() }
        }
        let entries = try ASCMHL.entries(files, hashes: digests, known: known).get()
        let now = Date()
        let number = (generations.last?.number ?? 0) + 1
        let file = ASCMHL.generationFile(number, folderName: (take.path as NSString).lastPathComponent, created: now)
        let bytes = Data(ASCMHL.generation(entries, created: now, hostname: ProcessInfo.processInfo.hostName,
                                           tool: "coord", version: CoordVersion.current, ignore: ignore).utf8)
        let history: TakeDirectory
        if let folder { history = folder } else {
            do { history = try take.directory(ASCMHL.folder, create: true) } catch { throw error.deliverError }
        }
        var links: [ASCMHL.Link] = []
        do throws(TakeFileError) {
            if try history.checkFile(ASCMHL.chainFile), let text = String(data: try history.data(ASCMHL.chainFile), encoding: .utf8) {
                links = ASCMHL.parseChain(text)
            }
            try history.writeAtomically(bytes, to: file)
            try history.writeAtomically(Data(ASCMHL.chain(links + [ASCMHL.Link(file: file, c4: ASCMHL.c4(bytes))]).utf8), to: ASCMHL.chainFile)
        } catch { throw error.deliverError }
        return file
    }

    /// What the history records of each file (the latest generation listing it); empty without a history.
    package static func recorded(_ take: TakeDirectory) throws -> [String: ASCMHL.Known] { try read(take).known }

    /// The history's folder (nil when there is none), its generations in order and what they record.
    private static func read(_ take: TakeDirectory) throws
        -> (folder: TakeDirectory?, generations: [(number: Int, name: String)], known: [String: ASCMHL.Known]) {
        let folder: TakeDirectory?
        do { folder = try take.directory(ASCMHL.folder) } catch where error.reason == .missing { folder = nil } catch {
            throw error.deliverError
        }
        var generations: [(number: Int, name: String)] = []
        var known: [String: ASCMHL.Known] = [:]
        if let folder {
            let names: [String]
            do { names = try folder.entries().map(\.name) } catch { throw error.deliverError }
            generations = names.compactMap { n in ASCMHL.generationNumber(n).map { (number: $0, name: n) } }.sorted { $0.number < $1.number }
            for g in generations {
                let data: Data
                do { data = try folder.data(g.name, limit: 256 << 20) } catch { throw error.deliverError }
                guard let text = String(data: data, encoding: .utf8) else { continue }
                known.merge(ASCMHL.parse(text)) { $1 }
            }
        }
        return (folder, generations, known)
    }

    /// The file at `path` under `root` as a generation records it (size, modification date to the second); nil when
    /// it is not a regular file (a link is never followed, nor a folder on the way to it).
    public static func onDisk(root: String, path: String) -> ASCMHL.OnDisk? {
        guard let take = try? TakeDirectory.open(root), let entry = try? take.entry(path), entry.kind == .file else { return nil }
        return onDisk(entry)
    }

    /// A regular file's entry as a generation records it.
    package static func onDisk(_ entry: TakeEntry) -> ASCMHL.OnDisk {
        ASCMHL.OnDisk(size: entry.size, modified: Date(timeIntervalSince1970: entry.modified.rounded(.down)))
    }
}
