// The collector's plan for one node: what the node lists, what the take directory already holds verified, and
// what this run must fetch (resuming partial copies); where each file and its temporary copy live.
import CoordCore
import CoordWire
import Foundation
import Synchronization
import Platform
#if canImport(Glibc)
import Glibc
#endif

extension Collector {

    /// The bytes still to fetch (sizes are checked at the edge; the sum saturates rather than trap).
    static func bytesToFetch(_ fetches: [Fetch]) -> UInt64 {
        fetches.reduce(UInt64(0)) { Saturating.add($0, $1.file.bytes - min($1.from, $1.file.bytes)) }
    }

    struct Fetch {
        var file: TakeManifest.File
        var from: UInt64
    }

    struct NodePlan {
        var have: [TakeManifest.File] = []
        var toFetch: [Fetch] = []
        var missing: [CollectionRecord.Missing] = []
        /// The node answered the file list (so it still holds what it listed).
        var listed = false
    }

    /// Asks the node for its files and decides, file by file, what this run must fetch.
    func plan(_ node: Node) async throws -> NodePlan {
        guard let link = node.link else {
            throw CoordError(.failure, node.unreachable ?? "node \(node.name) is not reachable.")
        }
        // A short exchange first: an unreachable node is named in seconds, not after the list's long timeout.
        let (status, _) = try await link.request(CoordRequest.status, timeout: 5, what: "a status request")
        if case .status(let s) = status.body, s.takeID == takeID, s.state == .recording || s.state == .armed {
            throw CoordError(.failure, "node \(node.name) is still recording take \(takeID); let the take finish or stop it first.")
        }
        let l = CoordRequest.listFiles(takeID: takeID)
        // A take the node has no checksums for yet (recorded before an upgrade, or repaired after a crash) is
        // checksummed by the node in the background: its list is not final until then, so ask again.
        let patience = MonotonicClock.now() + 600_000_000
        var said = false
        var list: Coord_V1_FileList
        while true {
            let (reply, _) = try await link.request(l, timeout: 10, what: "the file list")
            guard case .fileList(let answer) = reply.body else {
                throw CoordError(.failure, "node \(node.name) answered the file list with something else.")
            }
            list = answer
            if list.final { break }
            guard MonotonicClock.now() < patience else {
                throw CoordError(.failure, "node \(node.name) did not finish checksumming the files of take \(takeID) within 10 minutes.")
            }
            if !said { console.step("  node \(node.name) is checksumming its files of take \(takeID)"); said = true }
            try await Task.sleep(nanoseconds: 250_000_000)
        }
        var plan = NodePlan(listed: true)
        var truth: [String: TakeManifest.File] = [:]
        for file in node.known { truth[file.path] = file }
        // Every path in the node's own folder, listed once, sizes it can serve: else nothing of this node is fetched.
        let listed: [TakeManifest.File]
        do throws(FieldFault) { listed = try NodeReply.fileList(list, node: node.name, takeID: takeID, from: "node \(node.name)") } catch { throw CoordError(error, node: node.name) }
        for file in listed { truth[file.path] = file }
        let listedPaths = Set(listed.map(\.path))
        for path in Set(node.expected).union(truth.keys).sorted() {
            guard let file = truth[path] else {
                plan.missing.append(.init(path: path, node: node.name, reason: "node \(node.name) does not have \(path)"))
                continue
            }
            // What is here already, read without following a link: a link, FIFO or device in the file's place (or
            // in its folder's) is refused, and nothing is fetched through it.
            let finalBytes: UInt64?, digest: String?, partialBytes: UInt64?
            do throws(TakeFileError) {
                (finalBytes, digest) = try Self.local(path, in: directory, like: file)
                partialBytes = try Self.localSize(Self.partialPath(path), in: directory)
            } catch {
                plan.missing.append(.init(path: path, node: node.name, reason: String(error.sentence.dropLast())))
                continue
            }
            // Compared by the hash the node stated (xxh128 when it has one): FileAction only matches the strings.
            let action = FileAction.decide(expectedBytes: file.bytes, expectedSHA256: file.xxh128.isEmpty ? file.sha256 : file.xxh128,
                                           final: finalBytes.map { ($0, digest) }, partialBytes: partialBytes)
            switch action {
            case .have:
                plan.have.append(file)
            case _ where !listedPaths.contains(path):
                // Verified in an earlier run, since damaged or removed here, and the node no longer has it.
                plan.missing.append(.init(path: path, node: node.name,
                                          reason: "\(path) here does not match its checksum and node \(node.name) no longer has it"))
            case .resume(let from):
                plan.toFetch.append(Fetch(file: file, from: from))
            case .fetch:
                plan.toFetch.append(Fetch(file: file, from: 0))
            }
        }
        return plan
    }

    func finalURL(_ path: String) -> URL { directory.appendingPathComponent(path) }

    /// The folder of every temporary copy: its name is no node's (`~` is outside CONTRACT §4's names).
    static let partialFolder = ".coord~partial"

    func partialURL(_ path: String) -> URL {
        directory.appendingPathComponent(Self.partialPath(path))
    }

    /// A file's temporary copy, relative to the take directory.
    static func partialPath(_ path: String) -> String {
        let parts = path.split(separator: "/")
        return "\(partialFolder)/\(parts[0])/.\(parts[1]).part"
    }

    /// The known files whose copy in `directory` still matches (a link or anything but a regular file never does).
    static func verifiedLocally(_ known: [TakeManifest.File], in directory: URL) -> [TakeManifest.File] {
        known.filter { file in
            guard let here = try? local(file.path, in: directory, like: file), here.bytes == file.bytes else { return false }
            return here.digest == (file.xxh128.isEmpty ? file.sha256 : file.xxh128)
        }
    }
}
