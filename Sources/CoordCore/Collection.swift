/// How the coordinator brings a take's files home (the rig file's `collect:` section).
public struct CollectPolicy: Decodable, Equatable, Sendable {
    /// What a node does with a file once the coordinator has confirmed its checksum.
    public enum AfterConfirm: String, Decodable, Sendable, CaseIterable { case delete, keep }

    public var afterConfirm: AfterConfirm
    /// Chunks in flight per node: the credit each node's fetcher holds.
    public var window: Int
    /// KiB per chunk request; nil: chosen for the rig by `chunkBytes(nodes:)`.
    public var chunkKiB: Int?
    /// An upper limit on the whole collection's rate, in MB/s (10^6 bytes), so it leaves room on a shared
    /// network; nil: as fast as the links go.
    public var maxMBPerSecond: Double?

    public init(afterConfirm: AfterConfirm = .delete, window: Int = 8, chunkKiB: Int? = nil, maxMBPerSecond: Double? = nil) {
        self.afterConfirm = afterConfirm; self.window = window; self.chunkKiB = chunkKiB; self.maxMBPerSecond = maxMBPerSecond
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case afterConfirm = "after_confirm", window, chunkKiB = "chunk_kib", maxMBPerSecond = "max_mb_per_s"
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = CollectPolicy()
        afterConfirm = try c.decodeIfPresent(AfterConfirm.self, forKey: .afterConfirm) ?? d.afterConfirm
        window = try c.decodeIfPresent(Int.self, forKey: .window) ?? d.window
        chunkKiB = try c.decodeIfPresent(Int.self, forKey: .chunkKiB)
        maxMBPerSecond = try c.decodeIfPresent(Double.self, forKey: .maxMBPerSecond)
    }

    /// What the coordinator may hold in chunks while collecting, over the whole rig: every node is fetched at once,
    /// each with `window` chunks in flight and up to two waiting for the disk. 640 MiB is what 1 MiB chunks held
    /// at 64 nodes.
    public static let inFlightBudget = 640 << 20
    public static let largestChunk = 4 << 20, smallestAutomaticChunk = 256 << 10

    /// Bytes per chunk request when fetching from `nodes` nodes at once: `chunk_kib` if the rig file sets it, else
    /// the largest power of two up to 4 MiB that keeps the rig within `inFlightBudget` (4 MiB up to 16 nodes,
    /// 1 MiB at 64), and never below 256 KiB. Larger chunks cost fewer requests per byte: 4 MiB collected 2 GB
    /// from two nodes 1.2× as fast as rsync + sync where 1 MiB managed 1.09× (bench/results/collect-writer-quiet.json).
    public func chunkBytes(nodes: Int) -> Int {
        if let chunkKiB { return chunkKiB * 1024 }
        let fits = Self.inFlightBudget / (max(1, nodes) * (window + 2))
        var size = Self.largestChunk
        while size > Self.smallestAutomaticChunk && size > fits { size >>= 1 }
        return size
    }

    /// The field at fault and one sentence, or nil.
    public func fault() -> (field: String, sentence: String)? {
        if !(1...64).contains(window) { return ("collect.window", "collect.window must be between 1 and 64 chunks (got \(window)).") }
        if let chunkKiB, !(64...4096).contains(chunkKiB) {
            return ("collect.chunk_kib", "collect.chunk_kib must be between 64 and 4096 (got \(chunkKiB)); leave it out to let coord choose.")
        }
        if let rate = maxMBPerSecond, !(rate > 0) {
            return ("collect.max_mb_per_s", "collect.max_mb_per_s must be positive (got \(rate)); leave it out for no limit.")
        }
        return nil
    }
}

/// What the coordinator must do for one file a node holds, given what the take directory already has.
public enum FileAction: Equatable, Sendable {
    /// The final file is there and its checksum matches.
    case have
    /// A partial copy of this many bytes is there: fetch the rest.
    case resume(from: UInt64)
    /// Fetch the whole file.
    case fetch

    /// - Parameters:
    ///   - final: the final file's size and SHA-256 if it exists (the hash is computed only when the size matches).
    ///   - partialBytes: the size of the partial copy, if one exists.
    public static func decide(expectedBytes: UInt64, expectedSHA256: String, final: (bytes: UInt64, sha256: String?)?,
                              partialBytes: UInt64?) -> FileAction {
        if let final, final.bytes == expectedBytes, final.sha256 == expectedSHA256 { return .have }
        if let partialBytes, partialBytes > 0, partialBytes <= expectedBytes { return .resume(from: partialBytes) }
        return .fetch
    }
}

/// The order in which one node's chunks are requested: file by file, each from its starting offset, never
/// more than `window` in flight. Pure bookkeeping: the fetcher asks for the next request while it has credit
/// and returns credit as replies arrive.
public struct ChunkSchedule: Sendable {
    public struct Request: Hashable, Sendable {
        public var file: Int
        public var offset: UInt64
        public var length: Int
    }

    public let window: Int
    public let chunkBytes: Int
    /// (file, next offset to request, end) for every file still to request, in order.
    private var queue: [(file: Int, next: UInt64, end: UInt64)] = []
    public private(set) var inFlight = 0

    public init(window: Int, chunkBytes: Int) {
        precondition(window > 0 && chunkBytes > 0)
        self.window = window
        self.chunkBytes = chunkBytes
    }

    /// Queues bytes `from..<bytes` of `file`.
    public mutating func add(file: Int, from: UInt64, bytes: UInt64) {
        guard from < bytes else { return }
        queue.append((file, from, bytes))
    }

    public var isIdle: Bool { queue.isEmpty && inFlight == 0 }
    public var hasCredit: Bool { inFlight < window }

    /// The next chunk to ask for, if there is credit and anything left.
    public mutating func next() -> Request? {
        guard hasCredit, !queue.isEmpty else { return nil }
        let head = queue[0]
        let length = Int(min(UInt64(chunkBytes), head.end - head.next))
        let request = Request(file: head.file, offset: head.next, length: length)
        if head.next + UInt64(length) >= head.end { queue.removeFirst() } else { queue[0].next += UInt64(length) }
        inFlight += 1
        return request
    }

    /// A reply (or a failure) came back: one credit returns.
    public mutating func completed() {
        precondition(inFlight > 0)
        inFlight -= 1
    }

    /// Asks for `request` again, ahead of everything queued (its reply failed).
    public mutating func retry(_ request: Request) {
        queue.insert((request.file, request.offset, request.offset + UInt64(request.length)), at: 0)
    }

    /// Drops every queued request of `file` (it failed); requests in flight still complete.
    public mutating func cancel(file: Int) {
        queue.removeAll { $0.file == file }
    }
}

/// The manifest's record of collection (not a contract key): whether every file arrived verified, which did
/// not and why, and what each run of collection fetched.
public struct CollectionRecord: Codable, Equatable, Sendable {
    public enum State: String, Codable, Sendable {
        /// Recording ended; no file has been collected yet (or the take was recorded with --collect-later).
        case pending
        /// Some files are missing or damaged: `coord collect` can finish it.
        case incomplete
        case complete
    }

    public struct Missing: Codable, Equatable, Sendable {
        public var path: String
        public var node: String
        public var reason: String
        public init(path: String, node: String, reason: String) { self.path = path; self.node = node; self.reason = reason }
    }

    public struct FileRun: Codable, Equatable, Sendable {
        public var path: String
        /// Where this run started fetching (0: the whole file; more: it resumed a partial copy).
        public var fromOffset: UInt64
        public var fetchedBytes: UInt64
        /// How many times the file was fetched in this run (2: its first copy did not match the checksum).
        public var attempts: Int
        public var verified: Bool
        enum CodingKeys: String, CodingKey { case path, fromOffset = "from_offset", fetchedBytes = "fetched_bytes", attempts, verified }
        public init(path: String, fromOffset: UInt64, fetchedBytes: UInt64, attempts: Int, verified: Bool) {
            self.path = path; self.fromOffset = fromOffset; self.fetchedBytes = fetchedBytes; self.attempts = attempts; self.verified = verified
        }
    }

    public struct Run: Codable, Equatable, Sendable {
        /// RFC 3339 wall-clock time the run started.
        public var started: String
        public var seconds: Double
        public var fetchedBytes: UInt64
        /// Files already in the take directory with a matching checksum, left as they were.
        public var alreadyHad: Int
        public var files: [FileRun]
        enum CodingKeys: String, CodingKey { case started, seconds, fetchedBytes = "fetched_bytes", alreadyHad = "already_had", files }
        public init(started: String, seconds: Double, fetchedBytes: UInt64, alreadyHad: Int, files: [FileRun]) {
            self.started = started; self.seconds = seconds; self.fetchedBytes = fetchedBytes; self.alreadyHad = alreadyHad; self.files = files
        }
    }

    public var state: State
    public var missing: [Missing]
    public var runs: [Run]
    /// What the nodes were asked to do with confirmed files.
    public var afterConfirm: String?

    enum CodingKeys: String, CodingKey { case state, missing, runs, afterConfirm = "after_confirm" }

    public init(state: State, missing: [Missing] = [], runs: [Run] = [], afterConfirm: String? = nil) {
        self.state = state; self.missing = missing; self.runs = runs; self.afterConfirm = afterConfirm
    }
}

/// Bytes moved over time, for progress: the rate over the last few seconds and the time left at that rate.
public struct TransferMeter: Sendable {
    public let window: Int64
    public private(set) var total: UInt64
    public private(set) var done: UInt64 = 0
    private var samples: [(t: Int64, done: UInt64)] = []

    /// - Parameter window: µs of history the rate is taken over.
    public init(total: UInt64, window: Int64 = 3_000_000) {
        self.total = total
        self.window = window
    }

    public mutating func add(_ bytes: UInt64, at t: Int64) {
        done += bytes
        record(t)
    }

    /// More to fetch than planned (a file fetched again).
    public mutating func grow(by bytes: UInt64) { total += bytes }

    public mutating func record(_ t: Int64) {
        samples.append((t, done))
        while let first = samples.first, t - first.t > window, samples.count > 2 { samples.removeFirst() }
    }

    /// Bytes per second over the window; nil until two samples span some time.
    public var rate: Double? {
        guard let first = samples.first, let last = samples.last, last.t > first.t else { return nil }
        return Double(last.done - first.done) / (Double(last.t - first.t) / 1e6)
    }

    /// Seconds left at the current rate; 0 when done, nil when there is no rate yet.
    public var secondsLeft: Double? {
        if done >= total { return 0 }
        guard let rate, rate > 0 else { return nil }
        return Double(total - done) / rate
    }
}
