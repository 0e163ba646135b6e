import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import Synchronization
import ZeroMQ

/// What the operator asked for.
public struct TakeRequest: Sendable {
    public var name: String
    public var seconds: Double
    /// The whole frame rate (30 at 29.97); `rate` is the exact one.
    public var fps: Int
    /// The exact rate when it is not an integer (30000/1001, CONTRACT §13); nil: `fps`.
    public var rationalRate: FrameRate?
    public var width: Int
    public var height: Int
    public var codec: VideoCodec
    public var takesDirectory: URL
    /// Cameras to use on each node, in the order the node lists them; nil means all of them.
    public var camerasPerNode: Int?
    /// The operator stops the take (Ctrl-C); `seconds` is only its upper limit.
    public var untilStopped = false
    /// Cameras to use, with their priorities, caps and sizes, for the nodes at these endpoints (a rig file's
    /// `nodes[].cameras`).
    public var camerasByEndpoint: [String: [RigSpec.Camera]] = [:]
    /// What to do when a node's pressure rises mid-take (the rig file's `pressure:`).
    public var pressurePolicy = PressurePolicy()
    /// Over budget: lower formats, cap rates and disable cameras by priority until it fits, instead of refusing.
    public var fit = false
    /// Leave the files on the nodes after recording; `coord collect` fetches them later.
    public var collectLater = false
    /// How files are collected and what nodes do with them afterwards (the rig file's `collect:`).
    public var collectPolicy = CollectPolicy()
    /// Sound is part of the take (the rig file's `take.audio: required`): every recording node must have a
    /// microphone, and a microphone that ends early or a sound file that does not arrive makes the take partial.
    public var audioRequired = false
    /// Every camera records one group in this many, whatever its rig-file cap (a shot of stills: only its groups need
    /// frames, so the sensors run slower and the encoders keep up); nil: as the rig file says.
    public var recordEvery: Int?
    /// Every camera at the largest size it offers at the take's rate (`coord snap --size max`), not the take's size.
    public var largestSize = false
    /// What the refusal of an over-budget rig suggests, as the end of its sentence.
    public var overBudgetHint = "coord plan --fit proposes changes that fit"

    public init(name: String, seconds: Double, fps: Int, width: Int, height: Int, codec: VideoCodec, takesDirectory: URL,
                camerasPerNode: Int? = nil) {
        self.name = name; self.seconds = seconds; self.fps = fps; self.width = width; self.height = height
        self.codec = codec; self.takesDirectory = takesDirectory; self.camerasPerNode = camerasPerNode
    }

    /// The take's frame rate.
    public var rate: FrameRate { rationalRate ?? FrameRate(numerator: fps, denominator: 1) ?? FrameRate(1) }

    /// Sets the rate: `fps` its whole rate, `rationalRate` the rational when it is not an integer.
    public mutating func setRate(_ rate: FrameRate) {
        fps = rate.nominal
        rationalRate = rate.isInteger ? nil : rate
    }

    /// The longest take one command records.
    public static let longestSeconds: Double = 86_400
    /// Preview tiles from the take's cameras while it records (the live console asks for them); off by default.
    public var preview = PreviewSettings.off

    private static func decimal(_ v: Double) -> String {
        let text = String(format: "%.4f", v)
        return text.contains(".") ? String(text.reversed().drop { $0 == "0" }.reversed()).trimmingCharacters(in: CharacterSet(charactersIn: ".")) : text
    }

    public func problem() -> String? {
        if let p = TakeID.problem(withName: name) { return p }
        if !(1...240).contains(fps) { return "--fps must be between 1 and 240 (got \(fps))." }
        // One frame at least, and at most a day: a longer take is several takes (and Int64 groups never overflow).
        if !seconds.isFinite || seconds * rate.value < 1 || seconds > Self.longestSeconds {
            return "--seconds must be between one frame (\(Self.decimal(1 / rate.value)) s at \(rate) fps) and \(Int(Self.longestSeconds)) (24 h) (got \(seconds))."
        }
        return nil
    }
}

/// The outcome of a take: where it is and what the manifest and report say.
public struct TakeOutcome: Sendable {
    public var directory: URL
    public var manifest: TakeManifest
    public var report: SyncReport
    public init(directory: URL, manifest: TakeManifest, report: SyncReport) {
        self.directory = directory; self.manifest = manifest; self.report = report
    }
}

/// Runs one take across a set of node agents as phases — plan (handshake, budget, take directory), align
/// (clocks) while configuring, start (arm, start on one instant), record (until every node's files are final) and
/// collect — handing one `TakeRun` from phase to phase.
// Sendable without @unchecked: only `let`s; what other threads reach (a stop request, the collecting take,
// events) is in the two `Mutex`es (`phase`, `ledger`), everything else of a running take in its `TakeRun`.
public final class TakeSession: Sendable {
    let endpoints: [String]
    let names: [String: String]
    let keys: [String: LinkKeys]
    let request: TakeRequest
    /// Clocks a long-running coordinator (the console) already follows, by endpoint: not aligned again.
    let followed: [String: FollowedClock]
    /// What arming took in this coordinator's previous take, if any: the lead's room grows with it.
    let previousArming: TakeStart.Arming?
    let console: Console
    let logger: Logger
    let context = ZMQContext(realtimeIOThreads: true)
    /// Where the take is, as the signal handlers (another thread), the live console and the running take read it.
    struct Phase {
        var takeID: String?
        var isRecording = false
        var stopRequested = false
        var collecting: URL?
        /// Group 0's instant and the stop instant (rig timebase), once the cameras record; the stop moves when the
        /// operator stops early.
        var span: (groupZero: Int64, stop: Int64)?
    }
    let phase = Mutex(Phase())
    /// What the take's manifest records as the nodes report it: events, and what arming set up.
    struct Ledger {
        var events: [TakeManifest.Event] = []
        /// Each camera's controls as its node armed it ("node/camera"), for the manifest.
        var controls: [String: CameraControls] = [:]
        /// Each camera's and microphone's device as its node armed it ("node/camera", "node/mic"), for the manifest.
        var devices: [String: DeviceIdentity] = [:]
        var micDevices: [String: String] = [:]
        /// What arming every node took in this take, once armed.
        var arming: TakeStart.Arming?
    }
    let ledger = Mutex(Ledger())
    /// The take's phases as they begin (recording, collecting), for the live console; ends when `run` returns.
    public let phases: AsyncStream<TakePhase>
    private let phaseSink: AsyncStream<TakePhase>.Continuation

    /// `names`: each endpoint's node name in the rig file, so sentences name the node before its handshake.
    /// `keys`: each endpoint's CURVE keys (none: links in the clear). `followed`: see `FollowedClock`.
    public init(endpoints: [String], names: [String: String] = [:], keys: [String: LinkKeys] = [:], request: TakeRequest,
                followed: [String: FollowedClock] = [:], previousArming: TakeStart.Arming? = nil, console: Console,
                logger: Logger) {
        self.followed = followed
        self.previousArming = previousArming
        self.endpoints = endpoints
        self.names = names
        self.keys = keys
        self.request = request
        self.console = console
        self.logger = logger
        (phases, phaseSink) = AsyncStream.makeStream(of: TakePhase.self)
    }

    /// What arming every node took in this take (nil before it is armed), for the next take's lead.
    public var arming: TakeStart.Arming? { ledger.withLock { $0.arming } }

    public func run() async throws -> TakeOutcome {
        defer { phaseSink.finish() }
        if let problem = request.problem() { throw CoordError(.usage, problem) }
        try Self.requireWritable(request.takesDirectory)
        let links = try endpoints.map { try NodeLink(endpoint: $0, name: names[$0], context: context, keys: keys[$0]) }
        defer { links.forEach { $0.close() } }

        var take = try await plan(links)
        // Clock probing starts now and goes on until every camera has stopped.
        let tracker = take.tracker
        async let tracking: Void = tracker.run()
        let trackingSince = MonotonicClock.now()
        defer { tracker.stop() }
        // Configuring needs no clock: it runs while the clocks are aligned.
        let (plans, takeID) = (take.plans, take.takeID)
        async let configuring = configure(plans, takeID: takeID)
        do {
            try await align(&take)
        } catch {
            _ = await configuring
            await abortAll(plans, takeID: takeID, reason: "the clocks could not be aligned")
            throw error
        }
        try await start(&take, after: await configuring)
        let recorded = try await record(&take)
        tracker.stop()
        await tracking
        sayTracking(take, since: trackingSince)
        return try await collect(take, recorded)
    }

    /// The manifest before collection, from what the run knows now (see `PendingManifest`).
    func pendingManifest(_ take: TakeRun, groups: Int64, finalStatus: [String: NodeStatus]) -> TakeManifest {
        let grid = take.grid
        var pending = PendingManifest(
            takeID: take.takeID, name: request.name, grid: grid, groups: groups, startWallclock: take.startWallclock,
            nodes: take.plans.map { plan in
                PendingManifest.Node(name: plan.name, cameras: plan.cameras,
                                     clock: take.tracker.figures(plan.name, from: grid.t0, to: grid.instant(ofGroup: groups),
                                                                 timeService: plan.timeService))
            })
        pending.timecode = take.timecode
        pending.finalStatus = finalStatus
        (pending.controls, pending.events) = ledger.withLock { ($0.controls, $0.events) }
        (pending.devices, pending.micDevices) = ledger.withLock { ($0.devices, $0.micDevices) }
        pending.responderCameras = take.responder.cameras
        pending.disabledElsewhere = take.disabledElsewhere
        pending.clockTrack = take.tracker.clockTrack
        pending.budget = take.budget
        pending.audioRequired = request.audioRequired
        pending.afterConfirm = request.collectPolicy.afterConfirm
        var manifest = pending.manifest
        manifest.wallclockService = take.wallclockService
        return manifest
    }

    // MARK: what other threads see

    /// Asks a recording take to stop every camera at one instant soon, then collect as usual.
    /// Returns false when nothing is recording yet (the caller should then abandon the take).
    public func requestStop() -> Bool {
        phase.withLock { shared in
            guard shared.isRecording else { return false }
            shared.stopRequested = true
            return true
        }
    }

    /// The take directory once recording has ended and collection is under way (nil before).
    public func collectingTake() -> URL? { phase.withLock { $0.collecting } }

    func setCollecting(_ directory: URL) {
        phase.withLock { $0.collecting = directory }
        phaseSink.yield(.collecting)
    }

    /// Whether the cameras are recording now, and the take's id once its directory exists (for the live console).
    public var isRecording: Bool { phase.withLock { $0.isRecording } }
    public var takeID: String? { phase.withLock { $0.takeID } }
    /// Seconds recorded so far: from group 0, never past the stop instant; nil before the cameras record.
    public func recordedSeconds(now: Int64) -> Double? {
        phase.withLock { $0.span }.map { Double(max(0, min(now, $0.stop) - $0.groupZero)) / 1e6 }
    }

    /// Group 0's instant on this coordinator's clock (µs) once the take has placed it (the console's lead).
    public var groupZero: Int64? { phase.withLock { $0.span?.groupZero } }

    func setRecording(_ value: Bool) {
        let takeID = phase.withLock { $0.isRecording = value; return $0.takeID }
        if value { phaseSink.yield(.recording(takeID: takeID ?? "")) }
    }

    func takeStopRequest() -> Bool {
        phase.withLock { shared in
            defer { shared.stopRequested = false }
            return shared.stopRequested
        }
    }

    func addEvent(_ event: TakeEvent) {
        let entry = TakeManifest.Event(tMicroseconds: event.tMicroseconds, node: event.node, camera: event.camera,
                                       kind: event.kind, detail: event.detail)
        ledger.withLock { $0.events.append(entry) }
    }
}

// MARK: fan-out helpers

/// Runs `body` for every item concurrently; results in input order; the first error is thrown.
@discardableResult
func eachNode<Item: Sendable, T: Sendable>(_ items: [Item], _ body: @escaping @Sendable (Item) async throws -> T) async throws -> [T] {
    let results = await eachNodeResult(items, body)
    return try results.map { try $0.get() }
}

/// Runs `body` for every item concurrently and returns every outcome, in input order.
@discardableResult
func eachNodeResult<Item: Sendable, T: Sendable>(_ items: [Item], _ body: @escaping @Sendable (Item) async throws -> T) async -> [Result<T, Error>] {
    await withTaskGroup(of: (Int, Result<T, Error>).self) { group in
        for (index, item) in items.enumerated() {
            group.addTask {
                do { return (index, .success(try await body(item))) } catch { return (index, .failure(error)) }
            }
        }
        var results = [Result<T, Error>?](repeating: nil, count: items.count)
        for await (index, result) in group { results[index] = result }
        return results.map { $0! }
    }
}

extension Result {
    var failure: Failure? { if case .failure(let f) = self { return f } else { return nil } }
    var success: Success? { if case .success(let s) = self { return s } else { return nil } }
}
