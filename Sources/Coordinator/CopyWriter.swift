import CoordCore
import Foundation
import Platform
import Synchronization

/// One node's copies, written and hashed in arrival order on a queue of their own. A direct write waits for the
/// disk: done in line, it held the node's fetcher and one of the few shared threads, so the disk saw one or two
/// writes at a time (on this kind of VM a 1 MiB direct write at depth 1 reaches half of what depth 4 does). Now
/// each node's writer keeps the disk busy while its fetcher takes the next replies off the network.
final class CopyWriter: Sendable {
    private let queue: DispatchQueue
    /// Chunks handed over and not yet written before the fetcher waits: memory stays bounded when the disk is slower
    /// than the network (one being written and one ready is enough to keep the disk busy).
    private let limit: Int
    private struct State {
        var queued = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    init(node: String, limit: Int) {
        queue = DispatchQueue(label: "coord.collect.write.\(node)")
        self.limit = max(1, limit)
    }

    /// Runs `work` after everything handed over before it; first waits while `limit` chunks are queued.
    func submit(_ work: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                guard s.queued < limit else { s.waiting.append(c); return false }
                s.queued += 1
                return true
            }
            if now { c.resume() }
        }
        queue.async { [self] in
            work()
            // The slot passes straight to the first fetcher waiting for one.
            let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
                guard !s.waiting.isEmpty else { s.queued -= 1; return nil }
                return s.waiting.removeFirst()
            }
            next?.resume()
        }
    }

    /// Waits until everything handed over so far is written.
    func settle() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in queue.async { c.resume() } }
    }
}

/// A copy being written: its file and the hash of its bytes so far. The writer's queue owns both while chunks are on
/// their way to it; the fetcher reads them only after `CopyWriter.settle()`.
final class ArrivingCopy: Sendable {
    private struct Parts {
        var file: CopyFile?
        let check: ArrivalCheck
        /// Bytes written and hashed, in order from the start.
        var written: UInt64 = 0
        /// Up to where the kernel was asked to start writing the copy to the disk (page-cache writes only).
        var writebackStarted: UInt64 = 0
    }
    private let parts: Mutex<Parts>
    /// The first write that failed (its errno; 0: none), readable without waiting for the queue.
    private let failedErrno = Atomic<Int32>(0)
    /// The digest the node stated, and the hash's name for the sentences.
    let expected: String
    let hashName: String

    init(_ file: TakeManifest.File) {
        let check = ArrivalCheck(file)
        expected = check.expected
        hashName = check.name
        parts = Mutex(Parts(check: check))
    }

    /// How a page-cache copy's writeback is started: every so many bytes written.
    private static let writebackStep: UInt64 = 8 << 20

    var failure: CopyFileError? {
        let code = failedErrno.load(ordering: .acquiring)
        return code == 0 ? nil : CopyFileError(errno: code)
    }

    var written: UInt64 { parts.withLock { $0.written } }

    /// Starts an empty copy at `path`.
    func create(_ path: String) throws(CopyFileError) {
        try parts.withLock { p throws(CopyFileError) in p.file = try CopyFile.create(path) }
    }

    /// Hashes up to `from` bytes of a previous run's partial copy and reopens it to write after them; the bytes kept,
    /// or nil when the partial copy cannot be read at all (it is then started again).
    func resume(_ partial: URL, from: UInt64) throws -> UInt64? {
        guard let handle = try? FileHandle(forReadingFrom: partial) else { return nil }
        defer { try? handle.close() }
        return try parts.withLock { p throws -> UInt64 in
            while p.written < from {
                let want = Int(min(UInt64(4 << 20), from - p.written))
                guard let data = try handle.read(upToCount: want), !data.isEmpty else { break }
                p.check.update(data)
                p.written += UInt64(data.count)
            }
            let file = try CopyFile.reopen(partial.path)
            try file.truncate(to: p.written)
            p.file = file
            p.writebackStarted = p.written
            return p.written
        }
    }

    /// Writes `data` after the bytes written so far and hashes it (on the writer's queue). After a failed write
    /// nothing more is written.
    func append(_ data: Data) {
        guard failure == nil else { return }
        parts.withLock { p in
            guard let file = p.file else { return }
            do throws(CopyFileError) {
                try file.write(data, at: p.written)
            } catch {
                failedErrno.store(error.errno == 0 ? EIO : error.errno, ordering: .releasing)
                return
            }
            p.check.update(data)
            p.written += UInt64(data.count)
            // Through the page cache (no direct I/O here), the disk writes while the network brings the rest: the
            // fsync at the end has little left to wait for.
            if !file.direct, p.written - p.writebackStarted >= Self.writebackStep {
                Writeback.start(fd: file.fd, offset: Int64(p.writebackStarted), length: Int64(p.written - p.writebackStarted))
                p.writebackStarted = p.written
            }
        }
    }

    /// The digest of every byte written so far, in the node's notation.
    func digest() -> String { parts.withLock { $0.check.digest() } }

    /// Makes every byte written durable.
    func sync() throws(CopyFileError) {
        try parts.withLock { p throws(CopyFileError) in try p.file?.sync() }
    }

    /// Empties the copy to fetch it again from the start.
    func restart() throws(CopyFileError) {
        try parts.withLock { p throws(CopyFileError) in
            p.check.reset()
            p.written = 0
            p.writebackStarted = 0
            try p.file?.truncate(to: 0)
        }
    }

    /// Closes the file (once); its identity just before, for the check at its final name.
    @discardableResult
    func close() -> Collector.Identity? {
        parts.withLock { p in
            let identity = p.file.flatMap { Collector.identity(fd: $0.fd) }
            p.file?.close()
            p.file = nil
            return identity
        }
    }
}
