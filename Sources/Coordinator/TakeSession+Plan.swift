import CoordCore
import CoordWire
import Foundation
import Platform

/// One take as it runs, handed from phase to phase (plan → align → start → record → collect). Only the task
/// running the take touches it; what other threads see is in the session's `phase` and `ledger`.
struct TakeRun {
    let takeID: String
    let directory: URL
    var plans: [TakeSession.NodePlan]
    /// Cameras recording, over all nodes.
    let cameraCount: Int
    var responder: PressureResponder
    let budget: TakeManifest.BudgetSummary?
    /// Probes every recording node's clock from the alignment until every camera has stopped.
    let tracker: ClockTracker
    // From the start phase on:
    var grid: FrameGrid
    var plannedGroups: Int64 = 0
    var timecode = ""
    var startWallclock = ""
    /// The wall clock against its time service as group 0 was placed on it.
    var wallclockService: TakeManifest.WallclockService?
    // From the record phase on:
    /// How many of each node's own events are already in the take's events.
    var nodeEventsSeen: [String: Int] = [:]
    /// Cameras ("node/camera") someone other than this coordinator disabled during the take.
    var disabledElsewhere: Set<String> = []

    var byName: [String: TakeSession.NodePlan] { Dictionary(uniqueKeysWithValues: plans.map { ($0.name, $0) }) }
}

extension TakeSession {
    struct NodePlan: Sendable {
        var link: NodeLink
        var name: String
        var cameras: [CameraSettings]
        var timeService: String
        var mapping = ClockMapping.identity
    }

    /// Phase 1: handshake, which cameras record with which settings, the budgets (refused before anything runs),
    /// and the take directory, never reused.
    func plan(_ links: [NodeLink]) async throws -> TakeRun {
        console.step("handshake with \(links.count) node(s)")
        let hellos = try await Self.handshake(links)

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
        let responder = PressureResponder(policy: request.pressurePolicy, cameras: plans.flatMap { plan in
            plan.cameras.map { PressureResponder.Camera(node: plan.name, camera: $0.camera,
                                                        priority: priorities["\(plan.name)/\($0.camera)"] ?? 0, recordEvery: $0.recordEvery) }
        })
        for change in checked.changes {
            addEvent(TakeEvent(.fit, at: MonotonicClock.now(), node: change.node, camera: change.camera, change.sentence))
        }

        let (takeID, directory) = try makeTakeDirectory()
        phase.withLock { $0.takeID = takeID }
        console.step("take \(takeID): \(ordinal) camera(s) on \(plans.count) node(s), \(request.width)x\(request.height) at \(request.rate) fps, \(request.codec.rawValue)")
        let tracker = ClockTracker(nodes: plans.map { ClockTracker.Node(name: $0.name, link: $0.link) }, followed: followed,
                                   instances: Dictionary(hellos.map { ($0.endpoint, $0.reply.instanceID) }) { first, _ in first })
        return TakeRun(takeID: takeID, directory: directory, plans: plans, cameraCount: ordinal, responder: responder,
                       budget: RigPlanner.summary(checked), tracker: tracker,
                       grid: FrameGrid(t0: 0, rate: request.rate))
    }

    /// Says hello to every node; fails naming a node that does not answer or answers wrongly, and refuses two
    /// nodes with one name.
    static func handshake(_ links: [NodeLink]) async throws -> [RigPlanner.Hello] {
        let hellos = try await eachNode(links) { link -> RigPlanner.Hello in
            let (reply, _) = try await link.request(CoordRequest.hello(coordinator: ProcessInfo.processInfo.hostName),
                                                    timeout: 5, what: "the handshake")
            guard case .helloReply(let wire) = reply.body else {
                throw CoordError(.failure, "\(link.who) answered the handshake with something else.", node: link.named)
            }
            let r: Coord_V1_HelloReply
            do throws(FieldFault) { r = try NodeReply.hello(wire, from: link.who) } catch { throw CoordError(error, node: link.named) }
            link.setName(r.node)
            return RigPlanner.Hello(endpoint: link.endpoint, reply: r)
        }
        if let problem = HandshakeAnswer.duplicateProblem(hellos.map(\.answer)) { throw CoordError(.usage, problem) }
        return hellos
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

    /// The takes directory exists (made if need be) and this user may write in it; else a configuration error
    /// naming it, before any node is contacted.
    static func requireWritable(_ directory: URL) throws {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw CoordError(.usage, "the takes directory \(directory.path) cannot be created: \(reason(error)).")
        }
        do { try POSIX.retryingEINTR("access") { access(directory.path, W_OK | X_OK) } } catch {
            throw CoordError(.usage, "the takes directory \(directory.path) is not writable by this user (\(error.reason)).")
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
}
