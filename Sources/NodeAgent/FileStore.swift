import CoordCore
import Foundation
import Platform
import Synchronization
import ZeroMQ
#if canImport(Glibc)
import Glibc
#endif

/// The node's staging area: `<staging>/<take-id>/<node>/<camera>.{mkv,frames.csv}`. Files stay here until
/// the coordinator confirms their checksums.
struct FileStore {
    let root: URL
    /// Indexes that could not be saved in their take's directory (a disk gone read-only or full): kept here so
    /// the take's files can still be listed and collected until the node restarts.
    private let unsaved = Unsaved()
    private final class Unsaved: Sendable {
        let indexes = Mutex<[String: Index]>([:])
        func withLock<R>(_ body: (inout [String: Index]) -> R) -> R { indexes.withLock { body(&$0) } }
    }
    /// Files already found inside the staging area, by take id and path: a collection asks for each file about a
    /// thousand times, and resolving its symlinks every time cost more of the node's CPU than reading the bytes.
    private let checked = Checked()
    private final class Checked: Sendable {
        let paths = Mutex<[String: String]>([:])
        /// Enough for every file of several takes; past it the cache starts again.
        static let limit = 4096
    }

    func takeDirectory(_ takeID: String) -> URL { root.appendingPathComponent(takeID, isDirectory: true) }

    /// The take's directory, refused unless the take id is a CONTRACT §4 name and the directory, symlinks
    /// followed, lies inside the staging area.
    func existingTakeDirectory(_ takeID: String) throws(NodeFailure) -> URL {
        guard RigName.isValid(takeID) else {
            throw NodeFailure(.badConfig, "take id \"\(takeID.prefix(64))\" is not allowed: a take id is 1 to 64 of A-Z a-z 0-9 . _ -")
        }
        let directory = takeDirectory(takeID)
        guard FileManager.default.fileExists(atPath: directory.path) else {
            throw NodeFailure(.notFound, "this node has no files for take \(takeID).")
        }
        try requireInside(directory, what: "take \(takeID)")
        return directory
    }

    /// Throws unless `url` with every symlink resolved lies under the staging area's own resolved path.
    private func requireInside(_ url: URL, what: String) throws(NodeFailure) {
        let base = root.resolvingSymlinksInPath().standardizedFileURL.path
        let resolved = url.resolvingSymlinksInPath().standardizedFileURL.path
        guard resolved.hasPrefix(base.hasSuffix("/") ? base : base + "/") else {
            throw NodeFailure(.notFound, "\(what) is not in this node's staging area.")
        }
    }

    /// Resolves a take-relative path, refusing anything that could leave the take directory.
    func resolve(takeID: String, path: String) throws(NodeFailure) -> URL {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ RigName.isValid(String($0)) }) else {
            throw NodeFailure(.notFound, "no file \"\(path.prefix(64))\" in take \(takeID): paths are <node>/<file>.")
        }
        let url = try existingTakeDirectory(takeID).appendingPathComponent(path)
        if FileManager.default.fileExists(atPath: url.path) { try requireInside(url, what: "file \(path) of take \(takeID)") }
        return url
    }

    // MARK: The take's index: each file's size and checksum, made once when the take's files are final.

    private struct Index: Codable, Sendable {
        struct Entry: Codable, Sendable {
            var path: String
            var bytes: UInt64
            var sha256: String
            /// Absent from an index written before xxh128 (the file is then checked by sha256 alone).
            var xxh128: String?
            var file: TakeManifest.File { TakeManifest.File(path: path, bytes: bytes, sha256: sha256, xxh128: xxh128 ?? "") }
        }
        var version = 1
        var files: [Entry]
    }

    private static let indexName = ".files.json"

    /// Checksums every file of the take and stores the result in the take's index; returns the files, and why the
    /// index could only be kept in memory (the take's directory cannot be written), if so.
    @discardableResult
    func index(takeID: String) throws(NodeFailure) -> (files: [TakeManifest.File], unsaved: String?) {
        let directory = try existingTakeDirectory(takeID)
        let files = try filesOnDisk(directory, takeID: takeID)
        // Every file at once: after a long take the node is final only once gigabytes are hashed.
        let hashed = Mutex([Result<(UInt64, String, String), NodeFailure>?](repeating: nil, count: files.count))
        DispatchQueue.concurrentPerform(iterations: files.count) { i in
            let result: Result<(UInt64, String, String), NodeFailure>
            do throws(NodeFailure) { result = .success(try Self.hash(files[i].1)) } catch { result = .failure(error) }
            hashed.withLock { $0[i] = result }
        }
        var entries: [Index.Entry] = []
        for (i, result) in hashed.withLock({ $0 }).enumerated() {
            let (bytes, sha, xxh) = try result!.get()
            entries.append(Index.Entry(path: files[i].0, bytes: bytes, sha256: sha, xxh128: xxh))
        }
        let index = Index(files: entries)
        var problem: String?
        do {
            try writeIndex(index, in: directory)
            unsaved.withLock { _ = $0.removeValue(forKey: takeID) }
        } catch {
            unsaved.withLock { $0[takeID] = index }
            problem = error.message
        }
        return (entries.map(\.file), problem)
    }

    /// The take's files from its index, when it lists the files on disk; nil when there is none or it names other
    /// files. A file changed since it was indexed keeps its first checksum: what the camera wrote is the truth,
    /// and collection then names the damage.
    func indexedFiles(takeID: String) throws(NodeFailure) -> [TakeManifest.File]? {
        try currentIndex(takeID: takeID)?.files.map(\.file)
    }

    private func currentIndex(takeID: String) throws(NodeFailure) -> Index? {
        let directory = try existingTakeDirectory(takeID)
        let onDisk = try filesOnDisk(directory, takeID: takeID).map(\.0)
        if let data = try? Data(contentsOf: directory.appendingPathComponent(Self.indexName)),
           let index = try? JSONDecoder().decode(Index.self, from: data), index.files.map(\.path) == onDisk {
            return index
        }
        return unsaved.withLock { $0[takeID] }.flatMap { $0.files.map(\.path) == onDisk ? $0 : nil }
    }

    private func writeIndex(_ index: Index, in directory: URL) throws(NodeFailure) {
        let url = directory.appendingPathComponent(Self.indexName)
        do {
            try JSONEncoder().encode(index).write(to: url, options: .atomic)
        } catch {
            throw NodeFailure(.io, "cannot write the index of \(directory.lastPathComponent) at \(url.path): \(reason(error)).")
        }
    }

    /// `<node>/<file>` paths of the take's files, sorted, hidden files left out.
    private func filesOnDisk(_ directory: URL, takeID: String) throws(NodeFailure) -> [(String, URL)] {
        let fm = FileManager.default
        guard let nodes = try? fm.contentsOfDirectory(atPath: directory.path) else {
            throw NodeFailure(.notFound, "this node has no files for take \(takeID).")
        }
        var files: [(String, URL)] = []
        for node in nodes.sorted() where !node.hasPrefix(".") {
            let names = (try? fm.contentsOfDirectory(atPath: directory.appendingPathComponent(node).path)) ?? []
            for name in names.sorted() where !name.hasPrefix(".") {
                files.append(("\(node)/\(name)", directory.appendingPathComponent(node).appendingPathComponent(name)))
            }
        }
        return files
    }

    /// Size, SHA-256 (the manifest's) and xxh128 (what the coordinator checks as the bytes arrive), in one read.
    static func hash(_ url: URL) throws(NodeFailure) -> (UInt64, String, String) {
        do {
            let digest = try FileDigest.sha256AndXXH128(of: url)
            return (digest.bytes, digest.sha256, digest.xxh128)
        } catch {
            throw NodeFailure(.io, "\(error)")
        }
    }

    func read(takeID: String, path: String, offset: UInt64, length: Int) throws(NodeFailure) -> (Data, eof: Bool) {
        let url = try resolve(takeID: takeID, path: path)
        guard let handle = try? FileHandle(forReadingFrom: url) else {
            throw NodeFailure(.notFound, "no file \(path) in take \(takeID) on this node.")
        }
        defer { try? handle.close() }
        do {
            let size = try handle.seekToEnd()
            guard offset <= size else {
                throw NodeFailure(.badConfig, "offset \(offset) is past the end of \(path) (\(size) bytes).")
            }
            try handle.seek(toOffset: offset)
            let data = try handle.read(upToCount: length) ?? Data()
            return (data, offset + UInt64(data.count) >= size)
        } catch let failure as NodeFailure {
            throw failure
        } catch {
            throw NodeFailure(.io, "reading \(path) of take \(takeID) failed: \(reason(error)).")
        }
    }

    /// `resolve`'s answer for a file that exists, remembered until its take's files are released.
    private func checkedPath(takeID: String, path: String) throws(NodeFailure) -> String {
        let key = takeID + "\0" + path  // NUL is in no valid take id or path: no other request can name a checked file
        if let known = checked.paths.withLock({ $0[key] }) { return known }
        let url = try resolve(takeID: takeID, path: path)
        guard FileManager.default.fileExists(atPath: url.path) else { return url.path }  // open() names it missing
        checked.paths.withLock { paths in
            if paths.count >= Checked.limit { paths.removeAll() }
            paths[key] = url.path
        }
        return url.path
    }

    /// Reads up to `length` bytes at `offset` with one `pread` straight into memory the socket hands to libzmq
    /// (no second copy); safe to run on several threads at once. The caller owns the bytes.
    func readOwned(takeID: String, path: String, offset: UInt64, length: Int) throws(NodeFailure) -> (OwnedBytes, eof: Bool) {
        let filePath = try checkedPath(takeID: takeID, path: path)
        let fd: Int32
        do { fd = try POSIX.retryingEINTR("open") { open(filePath, O_RDONLY | O_CLOEXEC) } } catch {
            if error.errno == ENOENT { throw NodeFailure(.notFound, "no file \(path) in take \(takeID) on this node.") }
            throw NodeFailure(.io, "cannot open \(path) of take \(takeID): \(error.reason).")
        }
        defer { close(fd) }
        var info = stat()
        do { try POSIX.retryingEINTR("fstat") { fstat(fd, &info) } } catch {
            throw NodeFailure(.io, "cannot read \(path) of take \(takeID): \(error.reason).")
        }
        let size = UInt64(info.st_size)
        guard offset <= size else {
            throw NodeFailure(.badConfig, "offset \(offset) is past the end of \(path) (\(size) bytes).")
        }
        let want = Int(min(UInt64(length), size - offset))
        guard let bytes = OwnedBytes.allocate(want) else {
            throw NodeFailure(.io, "no memory for \(want) bytes of \(path).")
        }
        var done = 0
        while done < want {
            let n: Int
            do { n = try POSIX.retryingEINTR("pread") { pread(fd, bytes.base + done, want - done, off_t(offset) + off_t(done)) } } catch {
                bytes.free()
                throw NodeFailure(.io, "reading \(path) of take \(takeID) failed: \(error.reason).")
            }
            if n == 0 { break }  // the file shrank since fstat
            done += n
        }
        return (bytes.prefix(done), offset + UInt64(done) >= size)
    }

    /// Deletes exactly the confirmed files whose size and checksum match the take's index (never hashed here: this
    /// runs on the request thread); returns what was released. Without a current index nothing is deleted.
    func release(takeID: String, confirmed: [TakeManifest.File]) throws(NodeFailure) -> [String] {
        checked.paths.withLock { paths in paths = paths.filter { !$0.key.hasPrefix(takeID + "\0") } }
        guard let index = try currentIndex(takeID: takeID) else { return [] }
        let directory = try existingTakeDirectory(takeID)
        var released: [String] = []
        for file in confirmed {
            let url = try resolve(takeID: takeID, path: file.path)
            guard index.files.contains(where: { $0.path == file.path && $0.bytes == file.bytes && $0.sha256 == file.sha256 })
            else { continue }
            try? FileManager.default.removeItem(at: url)
            released.append(file.path)
        }
        let fm = FileManager.default
        var left = index
        left.files.removeAll { released.contains($0.path) }
        if left.files.isEmpty {
            try? fm.removeItem(at: directory.appendingPathComponent(Self.indexName))
            try? fm.removeItem(at: directory.appendingPathComponent(Self.stopNoteName))
            unsaved.withLock { _ = $0.removeValue(forKey: takeID) }
        } else if (try? writeIndex(left, in: directory)) == nil {
            unsaved.withLock { $0[takeID] = left }
        }
        // Remove directories left empty.
        for node in (try? fm.contentsOfDirectory(atPath: directory.path)) ?? [] {
            let sub = directory.appendingPathComponent(node)
            if (try? fm.contentsOfDirectory(atPath: sub.path))?.isEmpty == true { try? fm.removeItem(at: sub) }
        }
        if (try? fm.contentsOfDirectory(atPath: directory.path))?.isEmpty == true { try? fm.removeItem(at: directory) }
        return released
    }

    // MARK: Takes being recorded: a marker that outlives a crash.

    /// What a restarted node needs to repair a take its predecessor was recording: the grid and the first group.
    struct RecordingMarker: Codable, Equatable {
        var t0: Int64
        var periodMicroseconds: Int64
        var startGroup: Int64
        enum CodingKeys: String, CodingKey { case t0 = "t0_us", periodMicroseconds = "frame_period_us", startGroup = "start_group" }
    }

    private static let markerName = ".recording.json"

    func markRecording(_ takeID: String, _ marker: RecordingMarker) {
        try? JSONEncoder().encode(marker).write(to: takeDirectory(takeID).appendingPathComponent(Self.markerName), options: .atomic)
    }

    func clearRecordingMark(_ takeID: String) {
        try? FileManager.default.removeItem(at: takeDirectory(takeID).appendingPathComponent(Self.markerName))
    }

    /// What a node stopped mid-take (SIGTERM) leaves for its next process: why the take ended, and its events.
    struct StopNote: Codable, Equatable {
        struct Event: Codable, Equatable {
            var t: Int64
            var node: String
            var camera: String
            var kind: String
            var detail: String
            enum CodingKeys: String, CodingKey { case t = "t_us", node, camera, kind, detail }
        }
        var detail: String
        var events: [Event]

        init(detail: String, events: [TakeEvent]) {
            self.detail = detail
            self.events = events.map { Event(t: $0.tMicroseconds, node: $0.node, camera: $0.camera, kind: $0.kind.rawValue, detail: $0.detail) }
        }

        var takeEvents: [TakeEvent] {
            events.map { TakeEvent(TakeEvent.Kind(rawValue: $0.kind), at: $0.t, node: $0.node, camera: $0.camera, $0.detail) }
        }
    }

    private static let stopNoteName = ".stopped.json"

    func leaveStopNote(_ takeID: String, _ note: StopNote) {
        try? JSONEncoder().encode(note).write(to: takeDirectory(takeID).appendingPathComponent(Self.stopNoteName), options: .atomic)
    }

    /// The takes a stopped predecessor ended, oldest first, with their notes; each note is read once (removed).
    func takeStopNotes() -> [(takeID: String, note: StopNote)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        return names.sorted().compactMap { name in
            guard RigName.isValid(name) else { return nil }
            let url = takeDirectory(name).appendingPathComponent(Self.stopNoteName)
            guard let data = try? Data(contentsOf: url) else { return nil }
            try? FileManager.default.removeItem(at: url)
            guard let note = try? JSONDecoder().decode(StopNote.self, from: data) else { return nil }
            return (name, note)
        }
    }

    /// Takes whose recording never finished (the node was killed), with their markers.
    func interruptedTakes() -> [(takeID: String, marker: RecordingMarker)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        return names.sorted().compactMap { name in
            guard RigName.isValid(name),
                  let data = try? Data(contentsOf: takeDirectory(name).appendingPathComponent(Self.markerName)),
                  let marker = try? JSONDecoder().decode(RecordingMarker.self, from: data) else { return nil }
            return (name, marker)
        }
    }
}
