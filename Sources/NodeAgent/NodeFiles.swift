import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import ZeroMQ

/// File serving: a take's files listed from its index, read in chunks, released once collected; never while the
/// take is still armed or recording.
extension NodeAgent {
    func requireCollectable(_ takeID: String) throws(NodeFailure) {
        if let refusal = takeRoom.withLock({ $0.take.collectable(takeID) }) { throw refusal }
    }

    /// The take's files from its index. A take without a valid index (recorded by an older node, or repaired
    /// after a crash) is checksummed on a background queue; until then the list says it is not final.
    func files(_ takeID: String) throws(NodeFailure) -> Coord_V1_FileList {
        try requireCollectable(takeID)
        var list = Coord_V1_FileList()
        list.takeID = takeID
        // A Snap's stills are not all written yet: not final, so the collector asks again.
        if stills.isPending(takeID) { return list }
        if let files = try store.indexedFiles(takeID: takeID) {
            list.files = files.map(\.wire)
            list.final = true
            return list
        }
        if let failure = servingRoom.withLock({ $0.indexFailures.removeValue(forKey: takeID) }) {
            throw NodeFailure(.io, "the files of take \(takeID) could not be checksummed: \(failure)")
        }
        guard servingRoom.withLock({ $0.indexing.insert(takeID).inserted }) else { return list }
        logger.info("checksumming the files of take \(takeID)")
        indexQueue.async { [self] in
            do {
                let index = try store.index(takeID: takeID)
                logger.info("checksummed take \(takeID)", metadata: ["files": "\(index.files.count)"])
                if let problem = index.unsaved {
                    logger.warning("take \(takeID): its checksums are kept in memory only until collected: \(problem)")
                }
                servingRoom.withLock { _ = $0.indexing.remove(takeID) }
            } catch {
                let message = (error as? NodeFailure)?.message ?? "\(error)"
                logger.error("take \(takeID): its files could not be checksummed: \(message)")
                servingRoom.withLock {
                    $0.indexFailures[takeID] = message
                    _ = $0.indexing.remove(takeID)
                }
            }
        }
        return list
    }

    /// A FetchChunk answered inline: its bytes in the reply.
    func chunk(_ fetch: NodeRequest.Fetch) throws(NodeFailure) -> Coord_V1_Chunk {
        try requireCollectable(fetch.takeID)
        let (data, eof) = try store.read(takeID: fetch.takeID, path: fetch.path, offset: fetch.offset, length: fetch.length)
        servingRoom.withLock { $0.bytesServed += UInt64(data.count) }
        var r = Coord_V1_Chunk()
        r.path = fetch.path
        r.offset = fetch.offset
        r.data = data
        r.eof = eof
        return r
    }

    /// A FetchChunk with `raw_frame`: the envelope says where, the bytes follow as their own frame.
    func chunkReply(_ id: UInt64, _ fetch: NodeRequest.Fetch) -> Reply {
        do throws(NodeFailure) {
            try requireCollectable(fetch.takeID)
            let (bytes, eof) = try store.readOwned(takeID: fetch.takeID, path: fetch.path, offset: fetch.offset, length: fetch.length)
            servingRoom.withLock {
                $0.bytesServed += UInt64(bytes.count)
                $0.lastChunkServed = MonotonicClock.now()
            }
            var r = Coord_V1_Chunk()
            r.path = fetch.path
            r.offset = fetch.offset
            r.eof = eof
            return Reply(envelope: Wire.envelope(id, .chunk(r)), rawFrame: bytes)
        } catch {
            logBadInput("request refused", error, request: "fetchChunk")
            return Reply(envelope: Wire.error(id, error), rawFrame: nil)
        }
    }

    /// The coordinator has the files with these checksums: they go (unless this node or the rig keeps them).
    func confirmed(takeID: String, files confirmed: [TakeManifest.File], keep: Bool) throws(NodeFailure) -> String {
        try requireCollectable(takeID)
        // The node's own --keep-after-collect wins; otherwise the rig's collect.after_confirm says.
        if configuration.keepAfterCollect || keep {
            logger.info("kept collected files", metadata: ["take": "\(takeID)", "files": "\(confirmed.count)"])
            collected(takeID)
            return "kept \(confirmed.count) file(s)"
        }
        let released = try store.release(takeID: takeID, confirmed: confirmed)
        logger.info("released collected files", metadata: ["take": "\(takeID)", "files": "\(released.count)"])
        collected(takeID)
        return "released \(released.count) file(s)"
    }

    /// A finished take is done with once collected: the node is idle again (its recorders' counts kept for metrics).
    private func collected(_ takeID: String) {
        takeRoom.withLock { s in
            s.take.collected(takeID)
            if s.take.state == .idle { s.recorders = []; s.clock = nil }
        }
    }
}
