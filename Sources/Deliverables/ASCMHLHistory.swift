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
        let folder = root + "/" + ASCMHL.folder
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        let generations = names.compactMap { n in ASCMHL.generationNumber(n).map { (number: $0, name: n) } }.sorted { $0.number < $1.number }
        var known: [String: ASCMHL.Known] = [:]
        for g in generations {
            guard let text = try? String(contentsOfFile: folder + "/" + g.name, encoding: .utf8) else { continue }
            known.merge(ASCMHL.parse(text)) { $1 }
        }
        if exactly ? ASCMHL.isUpToDate(files, known: known) : ASCMHL.listsAll(files, known: known) { return nil }
        var digests: [String: String] = [:]
        for (path, hash) in precomputed where files[path] != nil && XXH128.isValid(hash) { digests[path] = hash }
        let paths = files.keys.filter { digests[$0] == nil }.sorted { (files[$0]?.size ?? 0) > (files[$1]?.size ?? 0) }
        if !paths.isEmpty {
            let meter = ProgressMeter(what: "xxh128", total: paths.reduce(0) { $0 + Int64(files[$1]?.size ?? 0) }, status: status)
            let hashes = Mutex<[String: Result<String, DeliverFailure>]>([:])
            DispatchQueue.concurrentPerform(iterations: paths.count) { i in
                let result: Result<String, DeliverFailure>
                do { result = .success(try XXH128.file(root + "/" + paths[i]) { meter.add($0) }) } catch {
                    result = .failure(error as? DeliverFailure ?? DeliverFailure("\(error)"))
                }
                hashes.withLock { $0[paths[i]] = result }
            }
            meter.finish()
            for (path, result) in hashes.withLock({ $0 }) { digests[path] = try result.get() }
        }
        let entries = try ASCMHL.entries(files, hashes: digests, known: known).get()
        let now = Date()
        let number = (generations.last?.number ?? 0) + 1
        let file = ASCMHL.generationFile(number, folderName: (root as NSString).lastPathComponent, created: now)
        let bytes = Data(ASCMHL.generation(entries, created: now, hostname: ProcessInfo.processInfo.hostName,
                                           tool: "coord", version: CoordVersion.current, ignore: ignore).utf8)
        do { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) } catch {
            throw DeliverFailure("cannot create \(folder): \(error.localizedDescription).")
        }
        let chainPath = folder + "/" + ASCMHL.chainFile
        let links = (try? String(contentsOfFile: chainPath, encoding: .utf8)).map(ASCMHL.parseChain) ?? []
        try Deliverer.writeAtomically(bytes, to: folder + "/" + file)
        try Deliverer.writeAtomically(Data(ASCMHL.chain(links + [ASCMHL.Link(file: file, c4: ASCMHL.c4(bytes))]).utf8), to: chainPath)
        return file
    }

    /// The file at `path` under `root` as a generation records it (size, modification date to the second); nil when
    /// it is not a regular file.
    public static func onDisk(root: String, path: String) -> ASCMHL.OnDisk? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: root + "/" + path),
              attributes[.type] as? FileAttributeType == .typeRegular else { return nil }
        let modified = (attributes[.modificationDate] as? Date).map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down)) } ?? Date(timeIntervalSince1970: 0)
        return ASCMHL.OnDisk(size: (attributes[.size] as? NSNumber)?.uint64Value ?? 0, modified: modified)
    }
}
