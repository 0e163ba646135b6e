import CoordCore
import CoordWire
import Foundation

/// Turns the nodes' handshakes and the operator's request into the plan the cost model weighs: which
/// cameras record, at what size and rate, with what priority, on what resources. Shared by `start-take`,
/// `demo` and `plan`.
public enum RigPlanner {
    /// One node as it answered the handshake.
    public struct Hello: Sendable {
        public var endpoint: String
        public var reply: Coord_V1_HelloReply
        public init(endpoint: String, reply: Coord_V1_HelloReply) { self.endpoint = endpoint; self.reply = reply }
        /// What tells this node apart from the others.
        public var answer: HandshakeAnswer {
            HandshakeAnswer(endpoint: endpoint, node: reply.node, instanceID: reply.instanceID, host: reply.host)
        }
    }

    /// The plan before any budget check: every chosen camera with the take's settings, its rig-file size,
    /// frame-rate cap and priority. Ordinals are assigned later, once the plan is final. A camera that cannot
    /// run the settings at all is a usage error naming it.
    public static func plannedNodes(_ hellos: [Hello], request: TakeRequest) throws -> [PlannedNode] {
        var nodes: [PlannedNode] = []
        for hello in hellos {
            let name = hello.reply.node
            let offered = hello.reply.cameras.map(CameraCapabilities.init(wire:))
            if let k = request.camerasPerNode, offered.count < k {
                throw CoordError(.usage, "node \(name) offers \(offered.count) camera(s), \(k) were asked for.")
            }
            var chosen: [(CameraCapabilities, RigSpec.Camera?)] = (request.camerasPerNode.map { Array(offered.prefix($0)) } ?? offered)
                .map { ($0, nil) }
            if let entries = request.camerasByEndpoint[hello.endpoint] {
                chosen = try entries.map { entry in
                    guard let camera = offered.first(where: { $0.name == entry.name }) else {
                        throw CoordError(.usage, "node \(name) has no camera \(entry.name); it offers \(offered.map(\.name).joined(separator: ", ")).")
                    }
                    return (camera, entry)
                }
            }
            var cameras: [PlannedCamera] = []
            for (capability, entry) in chosen {
                var width = request.width, height = request.height
                if let size = entry?.size, let parsed = RigSpec.parseSize(size) { (width, height) = parsed }
                if request.largestSize, let largest = largestSize(of: capability, fps: request.fps, every: request.recordEvery ?? 1) {
                    (width, height) = largest
                }
                let every = request.recordEvery ?? entry?.maxFPS.map { Budget.recordEvery(fps: request.fps, cap: $0) } ?? 1
                var settings = CameraSettings(camera: capability.name, ordinal: 0, width: width, height: height, fps: request.fps,
                                              codec: request.codec, recordEvery: every, controls: entry?.controls ?? CameraControls())
                settings.setRate(request.rate)
                if let problem = settings.problem(on: name, with: capability) { throw CoordError(.usage, problem) }
                // A triggered camera exposes one frame per pulse: its exposure (the rig's, else the half frame the
                // node locks) plus readout must fit the period, and the rate its AcquisitionFrameRate limit.
                if let t = capability.trigger, let problem = TriggerRate.problem(
                    camera: "\(name)/\(capability.name)", rate: settings.rate,
                    exposureMicroseconds: Int64(settings.controls.exposureMicroseconds ?? 0), readoutMicroseconds: t.readoutMicroseconds,
                    maximumFrameRate: t.maximumFrameRate) {
                    throw CoordError(.usage, problem)
                }
                cameras.append(PlannedCamera(node: name, settings: settings, capabilities: capability, priority: entry?.priority ?? 0))
            }
            let resources = hello.reply.hasResources ? NodeResources(wire: hello.reply.resources) : NodeResources()
            // A node records its microphones with every take it has cameras in (a node left out records nothing).
            let mics = cameras.isEmpty ? [] : hello.reply.mics.filter(RigName.isValid)
            nodes.append(PlannedNode(name: name, resources: resources, cameras: cameras, preview: request.preview, microphones: mics))
        }
        return nodes
    }

    /// The largest size `capability` offers at `fps` with a sensor recording one group in `every` (by area; a range
    /// format's upper bound); nil when no format runs at that rate.
    static func largestSize(of capability: CameraCapabilities, fps: Int, every: Int) -> (width: Int, height: Int)? {
        let period = FrameGrid.period(fps: fps) * Int64(max(every, 1))
        return capability.formats
            .filter { period >= $0.minFramePeriodMicroseconds && period <= $0.maxFramePeriodMicroseconds }
            .map { (width: $0.width - $0.width % 2, height: $0.height - $0.height % 2) }
            .max { $0.width * $0.height < $1.width * $1.height }
    }

    /// The outcome of the budget step: the plan to record, its budget, and what `--fit` changed.
    public struct Checked: Sendable {
        public var nodes: [PlannedNode]
        public var budget: RigBudget
        public var changes: [FitChange]
    }

    /// Refuses (exit 3) a plan at or over a hardware cost of 1.0, unless `fit` finds one under it; refuses a take
    /// asked to run longer than the nodes can sustain. The sentence names node, resource and figure.
    public static func check(_ nodes: [PlannedNode], request: TakeRequest) throws -> Checked {
        var checked = Checked(nodes: nodes, budget: Budget.evaluate(nodes), changes: [])
        if let refusal = checked.budget.refusal() {
            guard request.fit else {
                throw CoordError(.overBudget, refusal.dropLast() + "; \(request.overBudgetHint).")
            }
            let fitted = Budget.fit(nodes)
            guard fitted.fits else {
                throw CoordError(.overBudget, (fitted.budget.refusal() ?? refusal).dropLast() + ", even after --fit lowered every camera it could.")
            }
            checked = Checked(nodes: fitted.nodes, budget: fitted.budget, changes: fitted.changes)
        }
        if !request.untilStopped, let refusal = checked.budget.pressureRefusal(requestedSeconds: request.seconds) {
            throw CoordError(.overBudget, refusal)
        }
        return checked
    }

    /// The budget as the manifest records it.
    public static func summary(_ checked: Checked) -> TakeManifest.BudgetSummary {
        func round3(_ x: Double) -> Double { (x * 1000).rounded() / 1000 }
        return TakeManifest.BudgetSummary(
            cost: round3(checked.budget.cost), longestSeconds: checked.budget.longestSeconds.map { $0.rounded() },
            nodes: checked.budget.nodes.map { node in
                TakeManifest.BudgetSummary.Node(
                    node: node.node, cost: round3(node.cost),
                    loads: node.loads.map {
                        .init(resource: $0.resource + ($0.detail.isEmpty ? "" : " (\($0.detail))"), demand: $0.demand.rounded(),
                              capacity: $0.capacity.rounded(), unit: $0.unit.rawValue, cost: round3($0.cost))
                    },
                    longestSeconds: node.forecast.longestSeconds.map { $0.rounded() }, notes: node.notes)
            },
            changes: checked.changes.map(\.sentence))
    }

    /// What to write in the rig file so the fitted plan is what the rig records every time.
    public static func rigFileLines(_ changes: [FitChange], fitted: [PlannedNode], fps: Int) -> [String] {
        var lines: [String] = []
        var seen = Set<String>()
        for change in changes where seen.insert("\(change.node)/\(change.camera)").inserted {
            let camera = fitted.first { $0.name == change.node }?.cameras.first { $0.settings.camera == change.camera }
            guard let camera else {
                lines.append("nodes[\(change.node)].cameras: leave out \(change.camera)")
                continue
            }
            var keys = ["name: \(change.camera)", "size: \(camera.settings.width)x\(camera.settings.height)"]
            if camera.settings.recordEvery > 1 { keys.append("max_fps: \(Int(camera.settings.capturedFPS.rounded(.up)))") }
            lines.append("nodes[\(change.node)].cameras: { \(keys.joined(separator: ", ")) }")
        }
        return lines
    }
}
