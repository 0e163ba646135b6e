import CoordCore
import CoordWire
import Foundation
import Synchronization
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// Brings every node's files home into the take directory, all nodes in parallel. Each node's fetcher keeps
/// `window` chunk requests in flight (credit-based: a reply returns one credit), writes each file under a
/// temporary name in a folder of its own (`.coord~partial/<node>/.<file>.part`: `~` is outside CONTRACT §4's
/// names, so no path a node lists can name a temporary copy), hashes it as it arrives and renames it into place
/// only when its xxh128 (SHA-256 from a node that predates xxh128) matches the node's. A partial copy left by an earlier run is resumed, not fetched again; a file
/// that does not match is fetched once more, then reported as damaged.
// Sendable: only `let`s; per-node plans and sinks are owned by one node's task each, the shared tallies are in
// `progress`.
final class Collector: Sendable {
    /// One node taking part: its link (nil when it is not reachable), and the paths its take should hold.
    struct Node: Sendable {
        var name: String
        var link: NodeLink?
        /// Files of this node the take expects (e.g. from its cameras), whether or not the node lists them.
        var expected: [String]
        /// What the take directory already recorded as verified for this node (a previous run's manifest).
        var known: [TakeManifest.File]
        /// Why the node is not reachable, when `link` is nil.
        var unreachable: String?
    }

    struct Outcome {
        /// Every file in the take directory whose checksum matches, by path.
        var verified: [String: TakeManifest.File] = [:]
        var missing: [CollectionRecord.Missing] = []
        var run: CollectionRecord.Run
        /// Node-level problems (unreachable, stopped answering), one sentence each.
        var nodeFailures: [(node: String, reason: String)] = []
        /// The files each node listed and this run verified: what may be confirmed to it.
        var confirmable: [String: [TakeManifest.File]] = [:]
    }

    let directory: URL
    let takeID: String
    let policy: CollectPolicy
    let console: Console
    /// Each node's transfer so far, and the nodes in the order they are shown.
    struct Progress {
        var meters: [String: TransferMeter] = [:]
        var nodeOrder: [String] = []
    }
    let progress = Mutex(Progress())
    private let limiter: RateLimiter?

    init(directory: URL, takeID: String, policy: CollectPolicy, console: Console) {
        self.directory = directory
        self.takeID = takeID
        self.policy = policy
        self.console = console
        limiter = policy.maxMBPerSecond.map { RateLimiter(bytesPerSecond: $0 * 1e6) }
    }

    func collect(_ nodes: [Node]) async -> Outcome {
        let started = MonotonicClock.now()
        let startedWall = WallClock.rfc3339(Date())
        // 1. Every node's list and the take directory's state, so progress knows the total before any byte moves.
        // A node whose every file is here and verified need not be asked (it may have released them).
        let plans = await eachNodeResult(nodes) { [self] node -> NodePlan in
            let expected = Set(node.expected).union(node.known.map(\.path))
            if !node.known.isEmpty, Set(node.known.map(\.path)) == expected {
                let local = Self.verifiedLocally(node.known, in: directory)
                if local.count == node.known.count { return NodePlan(have: local) }
            }
            return try await plan(node)
        }
        var outcome = Outcome(run: CollectionRecord.Run(started: startedWall, seconds: 0, fetchedBytes: 0, alreadyHad: 0, files: []))
        var work: [(Node, NodePlan)] = []
        for (node, result) in zip(nodes, plans) {
            switch result {
            case .success(let p):
                work.append((node, p))
            case .failure(let error):
                outcome.nodeFailures.append((node.name, "\(error)"))
            }
        }
        progress.withLock { progress in
            progress.nodeOrder = work.map(\.0.name)
            for (node, p) in work { progress.meters[node.name] = TransferMeter(total: Self.bytesToFetch(p.toFetch)) }
        }
        let total = Self.bytesToFetch(work.flatMap(\.1.toFetch))
        let had = work.reduce(0) { $0 + $1.1.have.count }
        let fetching = work.filter { !$0.1.toFetch.isEmpty }.count
        let chunkBytes = policy.chunkBytes(nodes: fetching)
        if total > 0 {
            let resumed = work.flatMap(\.1.toFetch).filter { $0.from > 0 }.count
            console.step("collecting \(formatBytes(total)) from \(fetching) node(s) in \(chunkBytes >> 10) KiB chunks"
                         + (had > 0 ? "; \(had) file(s) already here" : "") + (resumed > 0 ? "; resuming \(resumed) partial file(s)" : ""))
        } else if had > 0 {
            console.step("every listed file is already here and verified (\(had) file(s))")
        }

        // 2. Fetch, every node in parallel, showing progress until all are done.
        let fetched = await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                let every: UInt64 = console.interactive ? 500_000_000 : 2_000_000_000
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: every)
                    if Task.isCancelled { break }
                    showProgress()
                }
            }
            let fetched = await eachNodeResult(work) { [self] entry in await fetchAll(entry.1, from: entry.0, chunkBytes: chunkBytes) }
            group.cancelAll()
            return fetched
        }
        // Temporary folders left empty go (rmdir keeps any that still hold a partial copy to resume).
        let partials = directory.appendingPathComponent(Self.partialFolder)
        for node in nodes { _ = rmdir(partials.appendingPathComponent(node.name).path) }
        _ = rmdir(partials.path)
        if total > 0 { showProgress() }

        for ((node, p), result) in zip(work, fetched) {
            for file in p.have { outcome.verified[file.path] = file }
            if p.listed { outcome.confirmable[node.name, default: []] += p.have }
            outcome.missing += p.missing
            guard case .success(let r) = result else { continue }
            for file in r.verified { outcome.verified[file.path] = file }
            outcome.confirmable[node.name, default: []] += r.verified
            outcome.missing += r.missing
            outcome.run.files += r.runs
            if let failure = r.failure { outcome.nodeFailures.append((node.name, failure)) }
        }
        // Nodes that could not be asked: whatever the take directory holds verified still counts.
        for (node, result) in zip(nodes, plans) {
            guard let failure = result.failure else { continue }
            let local = Self.verifiedLocally(node.known, in: directory)
            for file in local { outcome.verified[file.path] = file }
            let missingPaths = Set(node.expected).union(node.known.map(\.path)).subtracting(local.map(\.path))
            for path in missingPaths.sorted() {
                outcome.missing.append(.init(path: path, node: node.name, reason: "\(failure)"))
            }
            if missingPaths.isEmpty { outcome.nodeFailures.removeAll { $0.node == node.name } }
        }
        outcome.missing.sort { $0.path < $1.path }
        outcome.run.seconds = (Double(MonotonicClock.now() - started) / 1e4).rounded() / 100
        outcome.run.fetchedBytes = outcome.run.files.reduce(0) { $0 + $1.fetchedBytes }
        outcome.run.alreadyHad = had
        if outcome.run.fetchedBytes > 0 {
            let rate = Double(outcome.run.fetchedBytes) / max(outcome.run.seconds, 0.001)
            console.step(String(format: "collected %@ in %.1f s (%@/s)", formatBytes(outcome.run.fetchedBytes), outcome.run.seconds,
                                formatBytes(UInt64(rate))))
        }
        return outcome
    }


    // MARK: fetching

    struct NodeResult: Sendable {
        var verified: [TakeManifest.File] = []
        var missing: [CollectionRecord.Missing] = []
        var runs: [CollectionRecord.FileRun] = []
        var failure: String?
    }

    /// One file being written: its temporary copy, the hash so far and where the next in-order byte goes.
    private final class Sink {
        let fetch: Fetch
        /// The file and its hash, written by the node's writer.
        let copy: ArrivingCopy
        let writer: CopyWriter
        /// Whether the copy is open for more bytes (false once it failed or finished).
        var open = false
        /// Bytes handed to the writer, in order from the start.
        var written: UInt64 = 0
        var fetchedBytes: UInt64 = 0
        var attempts = 1
        /// Where this run really started: the partial copy's usable length (0 if it could not be read).
        var resumedFrom: UInt64 = 0
        var pending: [UInt64: Data] = [:]
        init(fetch: Fetch, writer: CopyWriter) { self.fetch = fetch; self.writer = writer; copy = ArrivingCopy(fetch.file) }
    }

    private struct ChunkReply: Sendable {
        var request: ChunkSchedule.Request
        var result: Result<Data, Error>
    }

    /// Fetches one node's files with `policy.window` chunks of `chunkBytes` in flight.
    private func fetchAll(_ plan: NodePlan, from node: Node, chunkBytes: Int) async -> NodeResult {
        var result = NodeResult()
        guard !plan.toFetch.isEmpty, let link = node.link else { return result }
        var schedule = ChunkSchedule(window: policy.window, chunkBytes: chunkBytes)
        var sinks: [Sink] = []
        let writer = CopyWriter(node: node.name, limit: 2)
        for (index, fetch) in plan.toFetch.enumerated() {
            let sink = Sink(fetch: fetch, writer: writer)
            sinks.append(sink)
            do {
                try open(sink)
            } catch {
                await fail(sink, "\(error)", into: &result, node: node.name)
                continue
            }
            if sink.written >= fetch.file.bytes {
                await finish(sink, index: index, schedule: &schedule, into: &result, node: node.name)
            } else {
                schedule.add(file: index, from: sink.written, bytes: fetch.file.bytes)
            }
        }
        var retries: [ChunkSchedule.Request: Int] = [:]
        let takeID = self.takeID
        await withTaskGroup(of: ChunkReply.self) { group in
            func issue() async {
                while result.failure == nil, let request = schedule.next() {
                    if let limiter { await limiter.take(request.length) }
                    let path = sinks[request.file].fetch.file.path
                    group.addTask {
                        let f = CoordRequest.fetchChunk(takeID: takeID, path: path, offset: request.offset, length: request.length)
                        do {
                            let (reply, _) = try await link.request(f, timeout: 20, what: "bytes \(request.offset)… of \(path)")
                            guard case .chunk(let chunk) = reply.body else {
                                throw CoordError(.failure, "node \(node.name) answered a request for \(path) with something else.")
                            }
                            let data: Data
                            do throws(FieldFault) {
                                data = try NodeReply.chunk(chunk, path: path, offset: request.offset, length: request.length, from: "node \(node.name)")
                            } catch {
                                throw CoordError(error, node: node.name)
                            }
                            return ChunkReply(request: request, result: .success(data))
                        } catch {
                            return ChunkReply(request: request, result: .failure(error))
                        }
                    }
                }
            }
            await issue()
            while let reply = await group.next() {
                schedule.completed()
                let sink = sinks[reply.request.file]
                switch reply.result {
                case .success(let data) where data.count == reply.request.length:
                    retries[reply.request] = nil
                    guard sink.open else { break }  // the file already failed
                    sink.pending[reply.request.offset] = data
                    sink.fetchedBytes += UInt64(data.count)
                    do {
                        try await drain(sink)
                    } catch {
                        schedule.cancel(file: reply.request.file)
                        await fail(sink, "\(error)", into: &result, node: node.name)
                        break
                    }
                    advance(node.name, UInt64(data.count))
                    if sink.written == sink.fetch.file.bytes {
                        await finish(sink, index: reply.request.file, schedule: &schedule, into: &result, node: node.name)
                    }
                case .success(let data):
                    schedule.cancel(file: reply.request.file)
                    await fail(sink, "node \(node.name) sent \(data.count) bytes of \(sink.fetch.file.path) at offset \(reply.request.offset) where \(reply.request.length) were asked for: the file changed on the node after it was listed",
                         into: &result, node: node.name)
                case .failure(let error):
                    // One retry per chunk; a node that fails twice in a row has stopped answering.
                    let tries = (retries[reply.request] ?? 0) + 1
                    if tries < 2 && result.failure == nil {
                        retries[reply.request] = tries
                        schedule.retry(reply.request)
                    } else if result.failure == nil {
                        result.failure = "collection from node \(node.name) stopped: \(error)"
                    }
                }
                await issue()
            }
        }
        // Whatever did not finish stays as a partial copy for the next run to resume.
        await writer.settle()
        for sink in sinks where sink.open {
            try? sink.copy.sync()
            sink.copy.close()
            sink.open = false
            sink.written = sink.copy.written
            result.missing.append(.init(path: sink.fetch.file.path, node: node.name,
                                        reason: "\(result.failure ?? "collection stopped"); \(formatBytes(sink.written)) of \(formatBytes(sink.fetch.file.bytes)) arrived and will be resumed"))
            result.runs.append(.init(path: sink.fetch.file.path, fromOffset: sink.resumedFrom, fetchedBytes: sink.fetchedBytes,
                                     attempts: sink.attempts, verified: false))
        }
        return result
    }

    /// Opens the file's temporary copy: a resumed one is hashed up to its end, a fresh one created empty.
    private func open(_ sink: Sink) throws {
        let path = sink.fetch.file.path
        let partial = partialURL(path)
        do throws(TakeFileError) {
            _ = try TakeDirectory.open(directory.path).directory((Self.partialPath(path) as NSString).deletingLastPathComponent, create: true)
        } catch {
            guard case .system(let code) = error.reason else { throw CoordError(.failure, error.sentence) }
            throw CoordError(.failure, "cannot create \(partial.deletingLastPathComponent().path): \(Self.fileProblem(code)).")
        }
        if sink.fetch.from > 0 {
            // Hash the bytes already here, so the whole file is checked at the end.
            let kept: UInt64?
            do {
                kept = try sink.copy.resume(partial, from: sink.fetch.from)
            } catch let error as CopyFileError {
                throw CoordError(.failure, "cannot resume the partial copy \(partial.path): \(Self.fileProblem(error.errno)).", file: path)
            } catch {
                throw CoordError(.failure, "cannot read the partial copy \(partial.path): \(reason(error)).")
            }
            if let kept {
                sink.written = kept
                sink.resumedFrom = kept
                sink.open = true
                return
            }
        }
        do throws(CopyFileError) {
            try sink.copy.create(partial.path)
            sink.open = true
        } catch {
            throw CoordError(.failure, "cannot create the copy of \(path) (\(partial.path)): \(Self.fileProblem(error.errno)).", file: path)
        }
    }

    /// Hands every chunk that is next in order to the node's writer (which writes and hashes it); throws once a
    /// write of this copy failed.
    private func drain(_ sink: Sink) async throws {
        while let data = sink.pending.removeValue(forKey: sink.written) {
            if let error = sink.copy.failure { throw writeFailure(sink, error) }
            let copy = sink.copy
            await sink.writer.submit { copy.append(data) }
            sink.written += UInt64(data.count)
        }
    }

    private func writeFailure(_ sink: Sink, _ error: CopyFileError) -> CoordError {
        CoordError(.failure, "copying \(sink.fetch.file.path) failed: writing \(partialURL(sink.fetch.file.path).path): \(Self.fileProblem(error.errno)).",
                   file: sink.fetch.file.path)
    }

    /// The file is whole: verify and rename it into place, or fetch it once more, or give it up as damaged.
    private func finish(_ sink: Sink, index: Int, schedule: inout ChunkSchedule, into result: inout NodeResult, node: String) async {
        let file = sink.fetch.file
        let partial = partialURL(file.path)
        await sink.writer.settle()
        if let error = sink.copy.failure {
            await fail(sink, writeFailure(sink, error).message, into: &result, node: node)
            return
        }
        let got = sink.copy.digest()
        let (expected, hash) = (sink.copy.expected, sink.copy.hashName)
        do throws(CopyFileError) {
            try sink.copy.sync()
        } catch {
            await fail(sink, "copying \(file.path) failed: writing \(partial.path): \(Self.fileProblem(error.errno))", into: &result, node: node)
            return
        }
        guard got == expected else {
            if sink.attempts < 2 {
                // Fetch it once more from the start: a resumed prefix or the transfer itself may be at fault.
                console.step("\(file.path) does not match node \(node)'s checksum (got \(hash) \(got.prefix(12))…, expected \(expected.prefix(12))…); fetching it again")
                sink.attempts += 1
                sink.written = 0
                sink.pending = [:]
                do throws(CopyFileError) {
                    try sink.copy.restart()
                } catch {
                    await fail(sink, "cannot rewrite \(partial.path): \(Self.fileProblem(error.errno))", into: &result, node: node)
                    return
                }
                progress.withLock { _ = $0.meters[node]?.grow(by: file.bytes) }
                schedule.add(file: index, from: 0, bytes: file.bytes)
                return
            }
            sink.copy.close()
            sink.open = false
            try? FileManager.default.removeItem(at: partial)
            result.runs.append(.init(path: file.path, fromOffset: sink.resumedFrom, fetchedBytes: sink.fetchedBytes,
                                     attempts: sink.attempts, verified: false))
            result.missing.append(.init(path: file.path, node: node,
                                        reason: "\(file.path) does not match node \(node)'s checksum after \(sink.attempts) fetches (got \(hash) \(got.prefix(12))…, expected \(expected.prefix(12))…); the node keeps its copy"))
            console.step("\(file.path) is damaged: it did not match node \(node)'s checksum twice; the node keeps its copy")
            return
        }
        // The copy that verified is this very file: checked again at its final name, by identity and size.
        let written = sink.copy.close()
        sink.open = false
        let final = finalURL(file.path)
        do throws(TakeFileError) {
            // Renamed within the take, its folders opened without following a link: never moved out through one.
            try TakeDirectory.open(directory.path).rename(Self.partialPath(file.path), to: file.path)
        } catch {
            let why = if case .system(let code) = error.reason { Self.fileProblem(code) } else { String(error.sentence.dropLast()) }
            result.missing.append(.init(path: file.path, node: node, reason: "cannot move \(partial.path) into place: \(why)"))
            return
        }
        guard let written, written == Self.identity(path: final.path), written.bytes == file.bytes else {
            result.runs.append(.init(path: file.path, fromOffset: sink.resumedFrom, fetchedBytes: sink.fetchedBytes,
                                     attempts: sink.attempts, verified: false))
            result.missing.append(.init(path: file.path, node: node,
                                        reason: "\(file.path) here is not the copy that matched node \(node)'s checksum (it changed as it was moved into place); the node keeps its copy"))
            return
        }
        result.verified.append(file)
        result.runs.append(.init(path: file.path, fromOffset: sink.resumedFrom, fetchedBytes: sink.fetchedBytes,
                                 attempts: sink.attempts, verified: true))
    }

    private func fail(_ sink: Sink, _ reason: String, into result: inout NodeResult, node: String) async {
        await sink.writer.settle()
        sink.copy.close()
        sink.open = false
        result.missing.append(.init(path: sink.fetch.file.path, node: node, reason: reason))
        result.runs.append(.init(path: sink.fetch.file.path, fromOffset: sink.resumedFrom, fetchedBytes: sink.fetchedBytes,
                                 attempts: sink.attempts, verified: false))
    }
}
