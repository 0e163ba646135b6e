import CoordCore
import Foundation
import Platform

/// The node's staging area: `<staging>/<take-id>/<node>/<camera>.{mkv,frames.csv}`. Files stay here until
/// the coordinator confirms their checksums.
struct FileStore {
    let root: URL

    func takeDirectory(_ takeID: String) -> URL { root.appendingPathComponent(takeID, isDirectory: true) }

    /// Resolves a take-relative path, refusing anything that could leave the take directory.
    func resolve(takeID: String, path: String) throws(NodeFailure) -> URL {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ RigName.isValid(String($0)) }) else {
            throw NodeFailure(.notFound, "no file \"\(path)\" in take \(takeID): paths are <node>/<file>.")
        }
        return takeDirectory(takeID).appendingPathComponent(path)
    }

    /// Every file of a take with size and SHA-256, hashed from disk.
    func list(takeID: String) throws(NodeFailure) -> [TakeManifest.File] {
        let directory = takeDirectory(takeID)
        let fm = FileManager.default
        guard let nodes = try? fm.contentsOfDirectory(atPath: directory.path) else {
            throw NodeFailure(.notFound, "this node has no files for take \(takeID).")
        }
        var files: [TakeManifest.File] = []
        for node in nodes.sorted() where !node.hasPrefix(".") {
            let names = (try? fm.contentsOfDirectory(atPath: directory.appendingPathComponent(node).path)) ?? []
            for name in names.sorted() where !name.hasPrefix(".") {
                let url = directory.appendingPathComponent(node).appendingPathComponent(name)
                let (bytes, sha) = try Self.hash(url)
                files.append(TakeManifest.File(path: "\(node)/\(name)", bytes: bytes, sha256: sha))
            }
        }
        return files
    }

    static func hash(_ url: URL) throws(NodeFailure) -> (UInt64, String) {
        do {
            let digest = try FileDigest.sha256(of: url)
            return (digest.bytes, digest.sha256)
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

    /// Deletes exactly the confirmed files whose size and checksum still match; returns what was released.
    func release(takeID: String, confirmed: [TakeManifest.File]) throws(NodeFailure) -> [String] {
        var released: [String] = []
        for file in confirmed {
            let url = try resolve(takeID: takeID, path: file.path)
            guard let (bytes, sha) = try? Self.hash(url), bytes == file.bytes, sha == file.sha256 else { continue }
            try? FileManager.default.removeItem(at: url)
            released.append(file.path)
        }
        // Remove directories left empty.
        let directory = takeDirectory(takeID)
        let fm = FileManager.default
        for node in (try? fm.contentsOfDirectory(atPath: directory.path)) ?? [] {
            let sub = directory.appendingPathComponent(node)
            if (try? fm.contentsOfDirectory(atPath: sub.path))?.isEmpty == true { try? fm.removeItem(at: sub) }
        }
        if (try? fm.contentsOfDirectory(atPath: directory.path))?.isEmpty == true { try? fm.removeItem(at: directory) }
        return released
    }
}
