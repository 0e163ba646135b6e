import CoordCore
import CoordWire
import Crypto
import Foundation
import Platform

/// Brings every node's files home into the take directory: each file is fetched in chunks, written under a
/// temporary name, checked against the node's SHA-256 and only then renamed into place.
final class Collector: @unchecked Sendable {
    struct Outcome {
        var files: [String: TakeManifest.File] = [:]
        var failures: [(node: String, reason: String)] = []
    }

    static let chunkBytes: UInt32 = 1 << 20
    let directory: URL
    let takeID: String
    let console: Console
    private let lock = NSLock()
    private var bytesDone: UInt64 = 0
    private var bytesTotal: UInt64 = 0
    private var lastShown: Int64 = 0
    private let started = MonotonicClock.now()

    init(directory: URL, takeID: String, console: Console) {
        self.directory = directory
        self.takeID = takeID
        self.console = console
    }

    func collect(_ links: [NodeLink]) async -> Outcome {
        // List everything first, so progress knows the total.
        let lists = await eachNodeResult(links) { [takeID] link -> [TakeManifest.File] in
            var l = Coord_V1_ListFiles()
            l.takeID = takeID
            let (reply, _) = try await link.request(.listFiles(l), timeout: 30, what: "the file list")
            guard case .fileList(let list) = reply.body else { throw CoordError(.failure, "node \(link.name) answered the file list with something else.") }
            return list.files.map(TakeManifest.File.init(wire:))
        }
        var outcome = Outcome()
        setTotal(lists.compactMap { $0.success }.flatMap { $0 }.reduce(0) { $0 + $1.bytes })
        console.step("collecting \(formatBytes(bytesTotal)) from \(links.count) node(s)")
        let results = await eachNodeResult(Array(zip(links, lists).enumerated())) { [self] entry -> [TakeManifest.File] in
            let (link, list) = entry.element
            var done: [TakeManifest.File] = []
            for file in try list.get() {
                done.append(try await fetch(file, from: link))
            }
            return done
        }
        for (link, result) in zip(links, results) {
            switch result {
            case .success(let files): for f in files { outcome.files[f.path] = f }
            case .failure(let error): outcome.failures.append((link.name, "\(error)"))
            }
        }
        let seconds = Double(MonotonicClock.now() - started) / 1e6
        console.step(String(format: "collected %@ in %.1f s", formatBytes(bytesDone), seconds))
        return outcome
    }

    private func fetch(_ file: TakeManifest.File, from link: NodeLink) async throws -> TakeManifest.File {
        let parts = file.path.split(separator: "/")
        guard parts.count == 2, parts.allSatisfy({ RigName.isValid(String($0)) }), String(parts[0]) == link.name else {
            throw CoordError(.failure, "node \(link.name) listed a file outside its own folder: \"\(file.path)\".")
        }
        let folder = directory.appendingPathComponent(String(parts[0]), isDirectory: true)
        let final = folder.appendingPathComponent(String(parts[1]))
        let partial = folder.appendingPathComponent(".\(parts[1]).part")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: partial.path, contents: nil), let out = try? FileHandle(forWritingTo: partial) else {
            throw CoordError(.failure, "cannot write \(partial.path) while collecting \(file.path).")
        }
        defer { try? out.close() }
        var hasher = SHA256()
        var offset: UInt64 = 0
        while offset < file.bytes {
            var f = Coord_V1_FetchChunk()
            f.takeID = takeID
            f.path = file.path
            f.offset = offset
            f.length = Self.chunkBytes
            let (reply, _) = try await link.request(.fetchChunk(f), timeout: 30, what: "chunk \(offset) of \(file.path)")
            guard case .chunk(let chunk) = reply.body, chunk.offset == offset, !chunk.data.isEmpty else {
                throw CoordError(.failure, "node \(link.name) sent no data for \(file.path) at offset \(offset).")
            }
            do { try out.write(contentsOf: chunk.data) } catch {
                throw CoordError(.failure, "writing \(partial.path) failed: \(reason(error)).")
            }
            hasher.update(data: chunk.data)
            offset += UInt64(chunk.data.count)
            advance(UInt64(chunk.data.count))
        }
        try? out.synchronize()
        let sha = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        guard offset == file.bytes, sha == file.sha256 else {
            try? FileManager.default.removeItem(at: partial)
            throw CoordError(.failure, "file \(file.path) from node \(link.name) does not match its checksum (got \(offset) bytes, sha256 \(sha.prefix(12))…, expected \(file.sha256.prefix(12))…).")
        }
        try? FileManager.default.removeItem(at: final)
        try FileManager.default.moveItem(at: partial, to: final)
        return file
    }

    private func setTotal(_ total: UInt64) {
        lock.lock()
        bytesTotal = total
        lock.unlock()
    }

    private func advance(_ bytes: UInt64) {
        lock.lock()
        bytesDone += bytes
        let now = MonotonicClock.now()
        let show = now - lastShown > 500_000 || bytesDone == bytesTotal
        if show { lastShown = now }
        let done = bytesDone, total = bytesTotal
        lock.unlock()
        if show {
            let seconds = max(Double(now - started) / 1e6, 0.001)
            let rate = Double(done) / seconds
            let eta = rate > 0 ? Double(total - min(done, total)) / rate : 0
            console.progress(String(format: "collecting %@ / %@  %@/s  ETA %.0f s", formatBytes(done), formatBytes(total),
                                    formatBytes(UInt64(rate)), eta))
        }
    }
}

func formatBytes(_ bytes: UInt64) -> String {
    let b = Double(bytes)
    if b >= 1_073_741_824 { return String(format: "%.2f GiB", b / 1_073_741_824) }
    if b >= 1_048_576 { return String(format: "%.1f MiB", b / 1_048_576) }
    if b >= 1024 { return String(format: "%.1f KiB", b / 1024) }
    return "\(bytes) B"
}
