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
    public var fps: Int
    public var width: Int
    public var height: Int
    public var codec: String
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
    /// What the refusal of an over-budget rig suggests, as the end of its sentence.
    public var overBudgetHint = "coord plan --fit proposes changes that fit"

    public init(name: String, seconds: Double, fps: Int, width: Int, height: Int, codec: String, takesDirectory: URL,
                camerasPerNode: Int? = nil) {
        self.name = name; self.seconds = seconds; self.fps = fps; self.width = width; self.height = height
        self.codec = codec; self.takesDirectory = takesDirectory; self.camerasPerNode = camerasPerNode
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
        if !seconds.isFinite || seconds * Double(fps) < 1 || seconds > Self.longestSeconds {
            return "--seconds must be between one frame (\(Self.decimal(1 / Double(fps))) s at \(fps) fps) and \(Int(Self.longestSeconds)) (24 h) (got \(seconds))."
        }
        if !["mjpeg", "ffv1", "h264"].contains(codec) { return "--codec must be mjpeg, ffv1 or h264 (got \(codec))." }
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

/// Runs one take across a set of node agents: handshake, plan, clock alignment, configure, arm, start on one
/// instant, wait for the stop instant, collect, and write the take directory.
// @unchecked: the state below `shared` (links, responder, budget, per-node bookkeeping) is touched only by the
// task running `run()`; what other threads reach (a stop request, the collecting take, events) is in `shared`.
public final class TakeSession: @unchecked Sendable {
    let endpoints: [String]
    let names: [String: String]
    let keys: [String: LinkKeys]
    let request: TakeRequest
    let console: Console
    let logger: Logger
    private let context = ZMQContext(realtimeIOThreads: true)
    private var links: [NodeLink] = []
    /// What the signal handlers (another thread) and `run` share.
    private struct Shared {
        var events: [TakeManifest.Event] = []
        var isRecording = false
        var takeID: String?
        /// Each camera's controls as its node armed it ("node/camera"), for the manifest.
        var controls: [String: CameraControls] = [:]
        var stopRequested = false
        var collecting: URL?
        /// Group 0's instant and the stop instant (rig timebase), once the cameras record; the stop moves when the
        /// operator stops early.
        var span: (groupZero: Int64, stop: Int64)?
    }
    private let shared = Mutex(Shared())
    /// The take's phases as they begin (recording, collecting), for the live console; ends when `run` returns.
    public let phases: AsyncStream<TakePhase>
    private let phaseSink: AsyncStream<TakePhase>.Continuation
    private var responder = PressureResponder(policy: PressurePolicy(), cameras: [])
    private var budgetSummary: TakeManifest.BudgetSummary?
    /// How many of each node's own events are already in the take's events.
    private var nodeEventsSeen: [String: Int] = [:]
    /// Cameras ("node/camera") someone other than this coordinator disabled during the take.
    private var disabledElsewhere: Set<String> = []

    /// `names`: each endpoint's node name in the rig file, so sentences name the node before its handshake.
    /// `keys`: each endpoint's CURVE keys (none: links in the clear).
    public init(endpoints: [String], names: [String: String] = [:], keys: [String: LinkKeys] = [:], request: TakeRequest,
                console: Console, logger: Logger) {
        self.endpoints = endpoints
        self.names = names
        self.keys = keys
        self.request = request
        self.console = console
        self.logger = logger
        (phases, phaseSink) = AsyncStream.makeStream(of: TakePhase.self)
    }

    struct NodePlan {
        var link: NodeLink
        var name: String
        var cameras: [CameraSettings]
        var timeService: String
        var mapping = ClockMapping.identity
    }

    public func run() async throws -> TakeOutcome {
        defer { phaseSink.finish() }
        if let problem = request.problem() { throw CoordError(.usage, problem) }
        try Self.requireWritable(request.takesDirectory)
        defer { links.forEach { $0.close() } }
        links = try endpoints.map { try NodeLink(endpoint: $0, name: names[$0], context: context, keys: keys[$0]) }

        // 1. Handshake.
        console.step("handshake with \(links.count) node(s)")
        let hellos = try await Self.handshake(links)

        // 2. Plan: which cameras record, with which settings; check the budgets and refuse before anything runs.
        let checked = try RigPlanner.check(try RigPlanner.plannedNodes(hellos, request: request), request: request)
        for change in checked.changes { console.step("fit: \(change.sentence)") }
        for note in checked.budget.notes { console.step("  note: \(note)") }
        console.step(Self.budgetLine(checked.budget))
        if request.untilStopped, checked.budget.longestSeconds != nil {
            console.step("  warning: \(checked.budget.forecastSentence) Stop the take before then.")
        }
        var plans: [NodePlan] = []
        var ordinal = 0
        var priorities: [String: Int] = [:]
        for (link, (hello, planned)) in zip(links, zip(hellos, checked.nodes)) {
            var cameras: [CameraSettings] = []
            for camera in planned.cameras {
                var s = camera.settings
                s.ordinal = ordinal
                cameras.append(s)
                priorities["\(planned.name)/\(s.camera)"] = camera.priority
                ordinal += 1
            }
            plans.append(NodePlan(link: link, name: planned.name, cameras: cameras,
                                  timeService: hello.reply.timeService.isEmpty ? "unknown" : hello.reply.timeService))
        }
        guard ordinal > 0 else { throw CoordError(.usage, "the rig has no cameras to record.") }
        if request.audioRequired, let silent = checked.nodes.first(where: { !$0.cameras.isEmpty && $0.microphones.isEmpty }) {
            throw CoordError(.usage, "the rig file requires sound (take.audio: required) but node \(silent.name) has no microphone: give it --audio NAME=DEVICE (or audio: in its node file), or make take.audio optional.", node: silent.name)
        }
        guard ordinal <= 256 else { throw CoordError(.usage, "the rig has \(ordinal) cameras; at most 256 fit the stripe's ordinal.") }
        // Nodes left with no camera (all disabled by --fit) take no part.
        let idle = plans.filter { $0.cameras.isEmpty }
        plans.removeAll { $0.cameras.isEmpty }
        for plan in idle { console.step("  node \(plan.name) has no camera left to record and takes no part") }
        responder = PressureResponder(policy: request.pressurePolicy, cameras: plans.flatMap { plan in
            plan.cameras.map { PressureResponder.Camera(node: plan.name, camera: $0.camera,
                                                        priority: priorities["\(plan.name)/\($0.camera)"] ?? 0, recordEvery: $0.recordEvery) }
        })
        for change in checked.changes {
            addEvent(TakeEvent(.fit, at: MonotonicClock.now(), node: change.node, camera: change.camera, change.sentence))
        }

        // 3. The take directory, never reused.
        let (takeID, directory) = try makeTakeDirectory()
        shared.withLock { $0.takeID = takeID }
        console.step("take \(takeID): \(ordinal) camera(s) on \(plans.count) node(s), \(request.width)x\(request.height) at \(request.fps) fps, \(request.codec)")
        budgetSummary = RigPlanner.summary(checked)

        // 4. Clock alignment: probing starts now and goes on until every camera has stopped.
        console.step("aligning clocks")
        let tracker = ClockTracker(nodes: plans.map { ClockTracker.Node(name: $0.name, link: $0.link) })
        async let tracking: Void = tracker.run()
        let trackingSince = MonotonicClock.now()
        defer { tracker.stop() }
        let mappings: [String: ClockMapping]
        let aligning = MonotonicClock.now()
        do {
            mappings = try await tracker.aligned()
            console.step(String(format: "clocks aligned in %.1f s", Double(MonotonicClock.now() - aligning) / 1e6))
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        for i in plans.indices { plans[i].mapping = mappings[plans[i].name]! }
        for plan in plans {
            let figures = TakeManifest.ClockTrackPoint(node: plan.name, at: MonotonicClock.now(), mapping: plan.mapping)
            console.step(String(format: "  %@: offset %+.0f µs, drift %+.2f ppm, uncertainty ±%.1f µs (bound ±%.0f µs); time service: %@",
                                plan.name, figures.offsetMicroseconds, figures.driftPPM, figures.uncertaintyMicroseconds,
                                figures.boundMicroseconds, plan.timeService))
        }

        // 5. Configure and arm every node; the grid's group 0 is far enough ahead for all to be ready.
        let period = FrameGrid.period(fps: request.fps)
        let plannedGroups = Int64((request.seconds * 1_000_000 / Double(period)).rounded())
        guard plannedGroups >= 1 else { throw CoordError(.usage, "--seconds \(request.seconds) is shorter than one frame.") }
        // Group 0 leaves time to arm every node and for each camera's phase loop to settle on the grid.
        var lead: Int64 = 0
        var slowestConfigure: Int64 = 0
        let margin = max(200_000, 3 * period)
        var grid = FrameGrid(t0: 0, periodMicroseconds: period)
        var t0Date = Date()
        var timecode = ""
        let byName = Dictionary(uniqueKeysWithValues: plans.map { ($0.name, $0) })
        /// Each node's failure as one sentence, by node name.
        func failures<T>(_ nodes: [String], _ results: [Result<T, Error>]) -> [String: String] {
            Dictionary(uniqueKeysWithValues: zip(nodes, results).compactMap { node, r in r.failure.map { (node, "\($0)") } })
        }
        var start = TakeStart(nodes: plans.map(\.name))
        var directive = start.begin()
        startLoop: while true {
            switch directive {
            case .configure(let nodes):
                let began = MonotonicClock.now()
                let results = await eachNodeResult(nodes.compactMap { byName[$0] }) { plan in
                    var c = Coord_V1_Configure()
                    c.takeID = takeID
                    c.cameras = plan.cameras.map(\.wire)
                    _ = try await plan.link.request(.configure(c), timeout: 5, what: "the configuration")
                }
                slowestConfigure = max(slowestConfigure, MonotonicClock.now() - began)
                directive = start.configured(nodes, failures: failures(nodes, results))
            case .arm(let nodes):
                lead = TakeStart.groupZeroLead(slowestConfigure: slowestConfigure)
                grid = FrameGrid(t0: MonotonicClock.now() + lead, periodMicroseconds: period)
                console.step("arming; group 0 in \(lead / 1000) ms")
                // Group 0's local time of day, for every file's timecode tag and the editorial timeline.
                // One reading of the wall clock at t0 gives both the manifest's start_wallclock and the timecode.
                t0Date = Date(timeIntervalSinceNow: Double(grid.t0 - MonotonicClock.now()) / 1e6)
                timecode = Timecode(date: t0Date, fps: request.fps, timeZone: TimeZone.current).description
                let (armGrid, armTimecode, armLead) = (grid, timecode, lead)
                let results = await eachNodeResult(nodes.compactMap { byName[$0] }) { plan -> Int64 in
                    let began = MonotonicClock.now()
                    var a = Coord_V1_Arm()
                    a.takeID = takeID
                    a.clock = plan.mapping.wire
                    a.t0Us = armGrid.t0
                    a.framePeriodUs = UInt64(armGrid.periodMicroseconds)
                    a.timecode = armTimecode
                    if self.request.preview.isOn {
                        a.preview.width = UInt32(self.request.preview.width)
                        a.preview.fps = UInt32(self.request.preview.fps)
                    }
                    tracker.armed(plan.name, at: began, with: plan.mapping)
                    let (reply, _) = try await plan.link.request(.arm(a), timeout: Double(armLead) / 1e6, what: "arming")
                    if case .armed(let armed) = reply.body {
                        let controls: [(camera: String, controls: CameraControls)]
                        do throws(FieldFault) { controls = try NodeReply.armed(armed, takeID: takeID, from: "node \(plan.name)") } catch { throw CoordError(error, node: plan.name) }
                        self.shared.withLock { shared in
                            for c in controls { shared.controls["\(plan.name)/\(c.camera)"] = c.controls }
                        }
                        for warning in armed.warnings {
                            self.console.step("  warning: \(warning)")
                            self.addEvent(TakeEvent(.phaseFixed, at: began, node: plan.name, warning))
                        }
                    }
                    return MonotonicClock.now() - began
                }
                let times = Dictionary(uniqueKeysWithValues: zip(nodes, results).compactMap { n, r in r.success.map { (n, $0) } })
                directive = start.armed(failures: failures(nodes, results), armTimes: times, now: MonotonicClock.now(),
                                        t0: grid.t0, margin: margin)
                if case .start = directive { tracker.startPushing(takeID: takeID) }
            case .start(let nodes):
                // 6. Start every camera on group 0, stop all after the last group.
                let startGrid = grid
                let results = await eachNodeResult(nodes.compactMap { byName[$0] }) { plan in
                    var s = Coord_V1_StartAt()
                    s.takeID = takeID
                    s.startGroup = 0
                    s.stopGroup = plannedGroups
                    _ = try await plan.link.request(.startAt(s), timeout: Double(startGrid.t0 - margin - MonotonicClock.now()) / 1e6,
                                                    what: "the start")
                }
                directive = start.started(failures: failures(nodes, results))
            case .abandon(let reason, let failure):
                await abortAll(plans, takeID: takeID, reason: reason)
                try? FileManager.default.removeItem(at: directory)
                throw CoordError(.failure, failure)
            case .recording:
                break startLoop
            }
        }
        let startWallclock = WallClock.rfc3339(t0Date)
        addEvent(TakeEvent(.start, at: grid.t0, "all \(ordinal) camera(s) start at group 0"))
        // Already now a manifest: should this coordinator die while recording, the nodes still stop at the planned
        // group and `coord collect` can bring the take home from it.
        var started = pendingManifest(plans, takeID: takeID, grid: grid, groups: plannedGroups, startWallclock: startWallclock,
                                      tracker: tracker, finalStatus: [:])
        started.timecode = timecode
        try? TakeDirectoryWriter(directory: directory).writePending(started)

        // 7. Record: show progress until every node reports its files final.
        setRecording(true)
        let (unfinishedNodes, finalGroups, finalStatus) = try await waitForFinish(plans, takeID: takeID, grid: grid, groups: plannedGroups)
        setRecording(false)
        tracker.stop()
        await tracking
        let tracked = Double(MonotonicClock.now() - trackingSince) / 1e6
        console.step(String(format: "clock probes: %d in %.1f s, %.0f a second for %d node(s) (100 a second each until a clock is known, then %.0f)",
                            tracker.probes, tracked, Double(tracker.probes) / max(tracked, 0.001), plans.count,
                            1e6 / Double(ClockProbePolicy.interval(nodes: plans.count, known: true))))
        for (node, failure) in tracker.failures {
            addEvent(TakeEvent(.clockUpdateFailed, at: MonotonicClock.now(), node: node, failure))
        }
        for (node, count) in tracker.held {
            addEvent(TakeEvent(.clockUpdateHeld, at: MonotonicClock.now(), node: node,
                     "\(count) clock update(s) for node \(node) were held back: the new estimate was far less certain than the one in force"))
        }
        let unfinished = unfinishedNodes
        let groups = finalGroups

        // 8. The manifest as recording left it, on disk before any file moves: if this coordinator dies while
        // collecting, `coord collect` finishes the take from it.
        var manifest = pendingManifest(plans, takeID: takeID, grid: grid, groups: groups, startWallclock: startWallclock,
                                       tracker: tracker, finalStatus: finalStatus)
        manifest.timecode = timecode
        try TakeDirectoryWriter(directory: directory).writePending(manifest)
        setCollecting(directory)
        if request.collectLater {
            console.step("the files stay on the nodes; collect them with: coord collect --rig RIG.yaml \(directory.path)")
            return TakeOutcome(directory: directory, manifest: manifest, report: SyncReport(groups: groups, grid: grid, inputs: []))
        }

        // 9. Collect, write manifest, report, page and timeline, and let the nodes release what arrived intact.
        // Every node is asked, also one that failed or went quiet: what it recorded before is worth having, and
        // one that does not answer is named within seconds.
        if !unfinished.isEmpty { console.step("collecting what \(unfinished.sorted().joined(separator: ", ")) recorded as well") }
        let linksByNode = Dictionary(uniqueKeysWithValues: plans.map { ($0.name, $0.link) })
        let lock = try CollectLock(directory: directory, takeID: takeID)
        defer { lock.release() }
        let (finished, report) = try await TakeCollection.run(directory: directory, manifest: manifest, links: linksByNode,
                                                              policy: request.collectPolicy, console: console)
        return TakeOutcome(directory: directory, manifest: finished, report: report)
    }

    /// The manifest before collection: every camera with its settings, clock figures and the node's counts, no
    /// files yet, status partial until collection verifies every file.
    private func pendingManifest(_ plans: [NodePlan], takeID: String, grid: FrameGrid, groups: Int64, startWallclock: String,
                                 tracker: ClockTracker, finalStatus: [String: NodeStatus]) -> TakeManifest {
        var cameras: [TakeManifest.Camera] = []
        for plan in plans {
            let clock = tracker.figures(plan.name, from: grid.t0, to: grid.instant(ofGroup: groups), timeService: plan.timeService)
            for s in plan.cameras {
                let status = finalStatus[plan.name]?.cameras.first(where: { $0.camera == s.camera })
                let responderCamera = responder.cameras.first { $0.node == plan.name && $0.camera == s.camera }
                var camera = TakeManifest.Camera(
                    node: plan.name, camera: s.camera, ordinal: s.ordinal, width: s.width, height: s.height, fps: s.fps,
                    codec: s.codec, frames: 0, dropped: 0, clock: clock, files: [])
                camera.priority = responderCamera?.priority
                camera.recordEvery = s.recordEvery
                camera.controls = shared.withLock { $0.controls["\(plan.name)/\(s.camera)"] }
                camera.held = status?.held ?? 0
                camera.disabled = responderCamera?.disabled == true ? true : nil
                if disabledElsewhere.contains("\(plan.name)/\(s.camera)") {
                    camera.disabled = true
                    camera.disabledBy = "another coordinator or peer"
                }
                if let status {
                    camera.timestampNoiseMicroseconds = (status.timestampNoiseMicroseconds * 10).rounded() / 10
                    camera.centerUncertaintyMicroseconds = (status.centerUncertaintyMicroseconds * 10).rounded() / 10
                }
                cameras.append(camera)
            }
        }
        var manifest = TakeManifest(
            takeID: takeID, name: request.name, status: .partial, t0Microseconds: grid.t0,
            framePeriodMicroseconds: grid.periodMicroseconds, groups: groups, startWallclock: startWallclock,
            cameras: cameras, events: sortedEvents())
        manifest.clockTrack = tracker.clockTrack
        manifest.budget = budgetSummary
        // Every microphone the nodes recorded (CONTRACT §9), with the node's own figures; checksums come with collection.
        let audio = plans.flatMap { plan in
            (finalStatus[plan.name]?.mics ?? []).map { m in
                var a = TakeManifest.Audio(node: plan.name, mic: m.mic, sampleRate: m.sampleRate, channels: m.channels,
                                           startMicroseconds: m.startMicroseconds, frames: m.frames,
                                           avOffsetMicroseconds: .init(p50: (m.offsetP50Microseconds * 10).rounded() / 10,
                                                                       p99: (m.offsetP99Microseconds * 10).rounded() / 10),
                                           rateErrorPPM: (m.rateErrorPPM * 100).rounded() / 100)
                a.ended = m.error.isEmpty ? nil : m.error
                return a
            }
        }
        manifest.audio = audio.isEmpty ? nil : audio
        manifest.audioRequired = request.audioRequired ? true : nil
        manifest.collection = CollectionRecord(state: .pending, afterConfirm: request.collectPolicy.afterConfirm.rawValue)
        return manifest
    }

    // MARK: steps

    /// Says hello to every node; fails naming a node that does not answer or answers wrongly, and refuses two
    /// nodes with one name.
    static func handshake(_ links: [NodeLink]) async throws -> [RigPlanner.Hello] {
        let hellos = try await eachNode(links) { link -> RigPlanner.Hello in
            var hello = Coord_V1_Hello()
            hello.coordinator = ProcessInfo.processInfo.hostName
            let (reply, _) = try await link.request(.hello(hello), timeout: 5, what: "the handshake")
            guard case .helloReply(let wire) = reply.body else {
                throw CoordError(.failure, "\(link.who) answered the handshake with something else.", node: link.named)
            }
            let r: Coord_V1_HelloReply
            do throws(FieldFault) { r = try NodeReply.hello(wire, from: link.who) } catch { throw CoordError(error, node: link.named) }
            link.setName(r.node)
            return RigPlanner.Hello(endpoint: link.endpoint, reply: r)
        }
        if let problem = duplicateProblem(hellos) { throw CoordError(.usage, problem) }
        return hellos
    }

    /// Two endpoints whose nodes answer with one name: the same node process listed twice (e.g. 127.0.0.1 and
    /// localhost; it answers with one instance id), or two nodes that share a name. Nil when every node is named once.
    static func duplicateProblem(_ hellos: [RigPlanner.Hello]) -> String? {
        var first: [String: RigPlanner.Hello] = [:]
        for h in hellos {
            guard let earlier = first[h.reply.node] else { first[h.reply.node] = h; continue }
            if !h.reply.instanceID.isEmpty, earlier.reply.instanceID == h.reply.instanceID {
                return "the rig file lists node \(h.reply.node) twice: \(earlier.endpoint) and \(h.endpoint) reach the same node (on host \(h.reply.host)); list it once."
            }
            return "two nodes are both named \(h.reply.node) (\(earlier.endpoint) on host \(earlier.reply.host) and \(h.endpoint) on host \(h.reply.host)); every node needs its own name."
        }
        return nil
    }

    /// "budget: hardware cost 0.42 (node-2, encoding); longest take 3 h 10 min (node-1, disk)".
    static func budgetLine(_ budget: RigBudget) -> String {
        var line = String(format: "budget: hardware cost %.2f", budget.cost)
        if let node = budget.limitingNode, let load = budget.limitingLoad { line += " (\(node), \(load.resource))" }
        if let longest = budget.longestSeconds, let node = budget.longestNode {
            line += "; longest take \(Budget.duration(longest)) (\(node), \(budget.nodes.first { $0.node == node }?.forecast.factor ?? ""))"
        }
        return line
    }

    /// Asks a recording take to stop every camera at one instant soon, then collect as usual.
    /// Returns false when nothing is recording yet (the caller should then abandon the take).
    public func requestStop() -> Bool {
        shared.withLock { shared in
            guard shared.isRecording else { return false }
            shared.stopRequested = true
            return true
        }
    }

    /// The take directory once recording has ended and collection is under way (nil before).
    public func collectingTake() -> URL? { shared.withLock { $0.collecting } }

    private func setCollecting(_ directory: URL) {
        shared.withLock { $0.collecting = directory }
        phaseSink.yield(.collecting)
    }

    /// Whether the cameras are recording now, and the take's id once its directory exists (for the live console).
    public var isRecording: Bool { shared.withLock { $0.isRecording } }
    public var takeID: String? { shared.withLock { $0.takeID } }
    /// Seconds recorded so far: from group 0, never past the stop instant; nil before the cameras record.
    public func recordedSeconds(now: Int64) -> Double? {
        shared.withLock { $0.span }.map { Double(max(0, min(now, $0.stop) - $0.groupZero)) / 1e6 }
    }

    private func setRecording(_ value: Bool) {
        let takeID = shared.withLock { $0.isRecording = value; return $0.takeID }
        if value { phaseSink.yield(.recording(takeID: takeID ?? "")) }
    }

    private func takeStopRequest() -> Bool {
        shared.withLock { shared in
            defer { shared.stopRequested = false }
            return shared.stopRequested
        }
    }

    /// Carries out the take's `TakeConductor` until every node reports its files final (or is given up on);
    /// returns the nodes that did not, the take's groups (fewer than planned if stopped early) and each node's
    /// last status.
    private func waitForFinish(_ plans: [NodePlan], takeID: String, grid: FrameGrid, groups plannedGroups: Int64) async throws -> (Set<String>, Int64, [String: NodeStatus]) {
        var conductor = TakeConductor(takeID: takeID, nodes: plans.map(\.name), grid: grid, groups: plannedGroups,
                                      now: MonotonicClock.now())
        let byName = Dictionary(uniqueKeysWithValues: plans.map { ($0.name, $0) })
        var lastStatus: [String: NodeStatus] = [:]
        var lastProgress: Int64 = 0
        var outcome: TakeConductor.Finish?
        // Carries out one batch of directives; what they bring back (acknowledgements, statuses) is fed back in.
        func perform(_ directives: [TakeConductor.Directive]) async {
            for directive in directives {
                switch directive {
                case .say(let line):
                    console.step(line)
                case .record(let event):
                    addEvent(event)
                case .finish(let finish):
                    outcome = finish
                case .sendStop(let group, let nodes, let fresh):
                    let context = self.context, keys = self.keys
                    let results = await eachNodeResult(nodes.compactMap { byName[$0] }) { plan in
                        var s = Coord_V1_StopAt()
                        s.takeID = takeID
                        s.stopGroup = group
                        guard fresh.contains(plan.name) else {
                            _ = try await plan.link.request(.stopAt(s), timeout: 0.5, what: "the stop")
                            return
                        }
                        let link = try NodeLink(endpoint: plan.link.endpoint, context: context, keys: keys[plan.link.endpoint])
                        link.setName(plan.name)
                        defer { link.close() }
                        _ = try await link.request(.stopAt(s), timeout: 0.5, what: "the stop")
                    }
                    for (node, result) in zip(nodes, results) {
                        if case .failure(let f) = result {
                            logger.warning("stop not acknowledged", metadata: ["node": "\(node)", "error": "\(f)"])
                            await perform(conductor.handle(.stopFailed(node: node)))
                        } else {
                            await perform(conductor.handle(.stopAcknowledged(node: node, now: MonotonicClock.now())))
                        }
                    }
                case .requestStatus(let nodes):
                    var faultSaid = Set<String>()
                    let pending = nodes.compactMap { byName[$0] }
                    let results = await eachNodeResult(pending) { plan -> NodeStatus in
                        let (reply, _) = try await plan.link.request(.statusRequest(Coord_V1_StatusRequest()), timeout: 2, what: "a status request")
                        guard case .status(let s) = reply.body else { throw CoordError(.failure, "node \(plan.name) answered status with something else.") }
                        // Events are the sender's: named after the node as this rig knows it.
                        var status: NodeStatus
                        do throws(FieldFault) { status = try NodeReply.status(s, from: "node \(plan.name)") } catch { throw CoordError(error, node: plan.name) }
                        status.node = plan.name
                        for i in status.events.indices { status.events[i].node = plan.name }
                        return status
                    }
                    for (plan, result) in zip(pending, results) {
                        let now = MonotonicClock.now()
                        switch result {
                        case .success(let s):
                            lastStatus[plan.name] = s
                            await perform(conductor.handle(.status(node: plan.name, s.report, now: now)))
                            let disabled = await respondToPressure(s, plan: plan, takeID: takeID, grid: grid, stopGroup: conductor.groups)
                            for camera in disabled { conductor.disabledByPolicy(node: plan.name, camera: camera) }
                        case .failure(let error):
                            logger.warning("status failed", metadata: ["node": "\(plan.name)", "error": "\(error)"])
                            // A reply the coordinator cannot use is said once: the node then counts as silent.
                            if let e = error as? CoordError, e.subject.field != nil, faultSaid.insert(plan.name).inserted {
                                console.step("  warning: \(e.message)")
                            }
                            await perform(conductor.handle(.statusFailed(node: plan.name, now: now)))
                        }
                    }
                }
            }
        }
        while outcome == nil {
            if takeStopRequest() { await perform(conductor.handle(.operatorStop(now: MonotonicClock.now()))) }
            await perform(conductor.handle(.tick(now: MonotonicClock.now())))
            let span = (groupZero: grid.t0, stop: conductor.stopInstant)
            shared.withLock { $0.span = span }
            guard outcome == nil else { break }
            let now = MonotonicClock.now()
            if now - lastProgress >= 1_000_000 {
                lastProgress = now
                showProgress(conductor, statuses: Array(lastStatus.values), now: now)
            }
            try await Task.sleep(nanoseconds: UInt64(conductor.pollInterval(now: MonotonicClock.now())) * 1000)
        }
        showProgress(conductor, statuses: Array(lastStatus.values), now: MonotonicClock.now())
        disabledElsewhere = conductor.disabledElsewhere
        return (outcome!.unfinished, outcome!.groups, lastStatus)
    }

    private func showProgress(_ conductor: TakeConductor, statuses: [NodeStatus], now: Int64) {
        let grid = conductor.grid
        let stopInstant = conductor.stopInstant
        let elapsed = max(0, min(Double(now - grid.t0), Double(stopInstant - grid.t0))) / 1e6
        let planned = Double(stopInstant - grid.t0) / 1e6
        let frames = statuses.flatMap(\.cameras).map(\.frames)
        let dups = statuses.flatMap(\.cameras).map(\.dropped).reduce(0, +)
        if now < grid.t0 {
            console.progress("armed: recording starts in \(String(format: "%.1f", Double(grid.t0 - now) / 1e6)) s")
        } else if request.untilStopped && !conductor.stopping {
            console.progress(String(format: "recording %.1f s (until Ctrl-C)  frames %d–%d per camera  dups %d",
                                    Double(now - grid.t0) / 1e6, frames.min() ?? 0, frames.max() ?? 0, dups))
        } else {
            console.progress(String(format: "recording %.1f / %.1f s  frames %d–%d of %d per camera  dups %d  nodes done %d/%d",
                                    elapsed, planned, frames.min() ?? 0, frames.max() ?? 0, conductor.groups, dups,
                                    conductor.finished.count, conductor.nodes.count))
        }
    }

    /// Copies the node's own events into the take's, and carries out what the pressure policy decides for it.
    /// Returns the cameras the policy disabled now (sent or not: a lost reply may still have been applied).
    @discardableResult
    private func respondToPressure(_ status: NodeStatus, plan: NodePlan, takeID: String, grid: FrameGrid, stopGroup: Int64) async -> [String] {
        var disabled: [String] = []
        let seen = nodeEventsSeen[plan.name] ?? 0
        if status.events.count > seen {
            for e in status.events[seen...] {
                addEvent(e)
                if e.kind == .pressureShutdown { console.step("node \(plan.name): \(e.detail)") }
            }
            nodeEventsSeen[plan.name] = status.events.count
        }
        guard status.state == .recording, let level = status.pressure else { return [] }
        let now = MonotonicClock.now()
        let reading = PressureReading(level: level, factor: "", cause: status.pressureCause)
        for decision in responder.observe(node: plan.name, reading: reading, now: now) {
            // A second ahead: the change reaches the node before the group it applies from is written.
            let from = grid.nearestGroup(to: now) + max(2, Int64(1_000_000 / grid.periodMicroseconds))
            guard from < stopGroup else { continue }
            var adjust = Coord_V1_AdjustCamera()
            adjust.takeID = takeID
            adjust.camera = decision.camera
            adjust.fromGroup = from
            adjust.reason = decision.sentence
            switch decision.action {
            case .slow(let every):
                adjust.action = .slow
                adjust.recordEvery = UInt32(every)
            case .disable:
                adjust.action = .disable
                disabled.append(decision.camera)
            case .restore(let every):
                adjust.action = .slow
                adjust.recordEvery = UInt32(every)
            }
            let (kind, failedKind): (TakeEvent.Kind, TakeEvent.Kind)
            switch decision.action {
            case .slow: (kind, failedKind) = (.cameraSlowed, .cameraSlowedFailed)
            case .disable: (kind, failedKind) = (.cameraDisabled, .cameraDisabledFailed)
            case .restore: (kind, failedKind) = (.cameraRestored, .cameraRestoredFailed)
            }
            do {
                _ = try await plan.link.request(.adjustCamera(adjust), timeout: 1, what: "the pressure policy's change")
                console.step("from group \(from): \(decision.sentence)")
                addEvent(TakeEvent(kind, at: grid.instant(ofGroup: from), node: plan.name, camera: decision.camera,
                                   "from group \(from): \(decision.sentence)"))
            } catch {
                addEvent(TakeEvent(failedKind, at: now, node: plan.name, camera: decision.camera,
                                   "\(decision.sentence) It was not applied: \(error)"))
            }
        }
        return disabled
    }

    private func abortAll(_ plans: [NodePlan], takeID: String, reason: String) async {
        await eachNodeResult(plans) { plan in
            var a = Coord_V1_Abort()
            a.takeID = takeID
            a.reason = reason
            _ = try await plan.link.request(.abort(a), timeout: 2, what: "the abort")
        }
    }

    /// The takes directory exists (made if need be) and this user may write in it; else a configuration error
    /// naming it, before any node is contacted.
    static func requireWritable(_ directory: URL) throws {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw CoordError(.usage, "the takes directory \(directory.path) cannot be created: \(reason(error)).")
        }
        guard access(directory.path, W_OK | X_OK) == 0 else {
            throw CoordError(.usage, "the takes directory \(directory.path) is not writable by this user (\(String(cString: strerror(errno)))).")
        }
    }

    private func makeTakeDirectory() throws -> (String, URL) {
        let fm = FileManager.default
        do {
            try fm.createDirectory(at: request.takesDirectory, withIntermediateDirectories: true)
        } catch {
            throw CoordError(.failure, "cannot create the takes directory \(request.takesDirectory.path): \(reason(error)).")
        }
        for _ in 0..<16 {
            let (y, mo, d, h, mi, s) = WallClock.utcFields()
            let id = TakeID(year: y, month: mo, day: d, hour: h, minute: mi, second: s, name: request.name,
                            nonce: UInt32.random(in: 0...0xFF_FFFF)).value
            let url = request.takesDirectory.appendingPathComponent(id, isDirectory: true)
            // mkdir without intermediates fails if the directory exists: a take is never reused.
            if (try? fm.createDirectory(at: url, withIntermediateDirectories: false)) != nil { return (id, url) }
        }
        throw CoordError(.failure, "cannot create a new take directory under \(request.takesDirectory.path).")
    }

    private func sortedEvents() -> [TakeManifest.Event] {
        shared.withLock { $0.events.sorted { $0.tMicroseconds < $1.tMicroseconds } }
    }

    private func addEvent(_ event: TakeEvent) {
        let entry = TakeManifest.Event(tMicroseconds: event.tMicroseconds, node: event.node, camera: event.camera,
                                       kind: event.kind, detail: event.detail)
        shared.withLock { $0.events.append(entry) }
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
