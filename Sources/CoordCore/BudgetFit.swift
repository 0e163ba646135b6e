// `coord plan --fit`: degrade an over-budget plan one step at a time, the cheapest kind of step first and the
// least important camera first, until it fits, as AVCaptureMultiCamSession's users lower formats, override
// frame rates and finally drop a camera.

/// One step `Budget.fit` took.
public struct FitChange: Equatable, Sendable {
    public enum Kind: String, Equatable, Sendable {
        /// One offered size smaller, same pixel format.
        case lowerFormat
        /// One more in recordEvery: the camera records one group in k.
        case capRate
        /// Removed from the plan.
        case disable
    }

    public var node: String
    public var camera: String
    public var kind: Kind
    /// For the operator: `node-1/cam2 (priority 0): 1920x1080 → 1280x720, relieving bus usb1 (usb2) at cost 1.21.`
    public var sentence: String

    public init(node: String, camera: String, kind: Kind, sentence: String) {
        self.node = node; self.camera = camera; self.kind = kind; self.sentence = sentence
    }
}

/// The plan `Budget.fit` arrived at, the steps it took and the budget of the result.
public struct FitResult: Equatable, Sendable {
    public var nodes: [PlannedNode]
    public var changes: [FitChange]
    public var budget: RigBudget
    /// The fitted plan's cost is below 1.0.
    public var fits: Bool
}

extension Budget {
    /// A frame-rate cap records at least this share of the groups (fps / 4): slower, and a camera is better off
    /// disabled than nearly still.
    static let slowestRecordEvery = 4

    /// Degrades `nodes` until the rig's cost is below 1.0: every candidate camera (one with a share of a load at
    /// cost ≥ 1.0) first lowers its format one size at a time, down to half the width it was asked for; then caps
    /// its frame rate, down to fps / 4; and only then is one disabled, never the rig's last camera. Each stage
    /// takes the lowest priority first (ties: more pixels/s, then name), one step at a time, re-evaluating after
    /// each. `fits` is false when no step is left and the cost is still 1.0 or more.
    public static func fit(_ nodes: [PlannedNode]) -> FitResult {
        var plan = nodes
        var changes: [FitChange] = []
        var requestedWidth: [String: Int] = [:]
        for node in nodes { for camera in node.cameras { requestedWidth[camera.id] = camera.settings.width } }
        var budget = evaluate(plan)
        // Every step shrinks a finite quantity (a size, a cap ≤ 4, a camera count); the bound is a safety net.
        var steps = 0
        while budget.cost >= 1.0, steps < 100_000, let change = step(&plan, budget: budget, requestedWidth: requestedWidth) {
            changes.append(change)
            budget = evaluate(plan)
            steps += 1
        }
        return FitResult(nodes: plan, changes: changes, budget: budget, fits: budget.cost < 1.0)
    }

    /// Takes one step on `plan`, or returns nil when no step is left.
    static func step(_ plan: inout [PlannedNode], budget: RigBudget, requestedWidth: [String: Int]) -> FitChange? {
        // Each candidate with the worst over-budget load it takes part in, so its change can say what it relieves.
        var worst: [String: ResourceLoad] = [:]
        var over: [String: [ResourceLoad]] = [:]
        for node in budget.nodes {
            for load in node.loads where load.cost >= 1.0 {
                for (camera, share) in zip(load.cameras, load.shares) where share > 0 {
                    if worst[camera].map({ load.cost > $0.cost }) ?? true { worst[camera] = load }
                    over[camera, default: []].append(load)
                }
            }
        }
        var candidates: [(n: Int, c: Int, captured: Double)] = []
        for (n, node) in plan.enumerated() {
            for (c, camera) in node.cameras.enumerated() where worst[camera.id] != nil {
                candidates.append((n, c, demand(of: camera, calibration: node.resources.calibration).capturedPixelsPerSecond))
            }
        }
        candidates.sort { a, b in
            let x = plan[a.n].cameras[a.c], y = plan[b.n].cameras[b.c]
            if x.priority != y.priority { return x.priority < y.priority }
            if a.captured != b.captured { return a.captured > b.captured }
            return x.id < y.id
        }
        func change(_ kind: FitChange.Kind, _ camera: PlannedCamera, _ what: String, relieving: ResourceLoad? = nil) -> FitChange {
            let load = relieving ?? worst[camera.id]!
            let shared = load.kind == .bus ? "" : " on node \(camera.node)"
            return FitChange(node: camera.node, camera: camera.settings.camera, kind: kind,
                             sentence: "\(camera.id) (priority \(camera.priority)): \(what), relieving \(load.resource)\(shared) at cost \(BudgetFigures.sig3(load.cost)).")
        }

        // Stage 1: a smaller size costs every resource less and keeps the full frame rate.
        for candidate in candidates {
            let camera = plan[candidate.n].cameras[candidate.c]
            // An isochronous webcam reserves its alternate setting whatever its size: a smaller one relieves no bus.
            if camera.capabilities.usbReservedBytesPerSecond > 0, over[camera.id, default: []].allSatisfy({ $0.kind == .bus }) { continue }
            guard let size = smallerSize(camera, requestedWidth: requestedWidth[camera.id] ?? camera.settings.width) else { continue }
            let before = "\(camera.settings.width)x\(camera.settings.height)"
            plan[candidate.n].cameras[candidate.c].settings.width = size.width
            plan[candidate.n].cameras[candidate.c].settings.height = size.height
            return change(.lowerFormat, camera, "\(before) → \(size.width)x\(size.height)")
        }
        // Stage 2: recording one group in k lowers the bus and encoding (and h264's disk), keeping every camera.
        for candidate in candidates {
            let camera = plan[candidate.n].cameras[candidate.c]
            var capped = camera
            capped.settings.recordEvery += 1
            guard capped.settings.recordEvery <= slowestRecordEvery,
                  capped.settings.problem(on: camera.node, with: camera.capabilities) == nil else { continue }
            // Only a cap that lowers some over-budget load helps: an intra codec's disk write does not shrink.
            let calibration = plan[candidate.n].resources.calibration
            let was = demand(of: camera, calibration: calibration), will = demand(of: capped, calibration: calibration)
            let relieved = over[camera.id, default: []].filter { load in
                switch load.kind {
                case .bus: return will.busBytesPerSecond < was.busBytesPerSecond
                case .encoding: return will.encodePixelsPerSecond < was.encodePixelsPerSecond
                case .disk: return (will.diskBytesPerSecond ?? 0) < (was.diskBytesPerSecond ?? 0)
                }
            }
            guard let eased = relieved.max(by: { $0.cost < $1.cost }) else { continue }
            plan[candidate.n].cameras[candidate.c] = capped
            let rate = { (s: CameraSettings) in BudgetFigures.sig3(s.capturedFPS).trimmedZeros }
            return change(.capRate, camera, "records one group in \(capped.settings.recordEvery), \(rate(camera.settings)) → \(rate(capped.settings)) of its \(camera.settings.fps) fps", relieving: eased)
        }
        // Stage 3: the last resort, and never the rig's last camera (an empty take records nothing).
        let total = plan.reduce(0) { $0 + $1.cameras.count }
        guard total > 1, let candidate = candidates.first else { return nil }
        let camera = plan[candidate.n].cameras.remove(at: candidate.c)
        return change(.disable, camera, "disabled")
    }

    /// The next smaller offered size for `camera`: same pixel format (so its bus cost per pixel holds), at least
    /// half the width first asked for, and a frame period the format still allows; nil when there is none.
    static func smallerSize(_ camera: PlannedCamera, requestedWidth: Int) -> (width: Int, height: Int)? {
        let s = camera.settings
        let formats = camera.capabilities.formats
        guard let current = formats.first(where: { $0.offers(width: s.width, height: s.height) }) else { return nil }
        let period = s.rate.periodMicroseconds * Int64(max(s.recordEvery, 1))
        var best: (width: Int, height: Int)?
        for f in formats where f.pixelFormat == current.pixelFormat && f.width * f.height < s.width * s.height && f.width * 2 >= requestedWidth {
            // The cost model reads the first format at a size: it must be this pixel format too.
            guard formats.first(where: { $0.width == f.width && $0.height == f.height })?.pixelFormat == current.pixelFormat,
                  period >= f.minFramePeriodMicroseconds, period <= f.maxFramePeriodMicroseconds else { continue }
            var lowered = s
            lowered.width = f.width; lowered.height = f.height
            guard lowered.problem(on: camera.node, with: camera.capabilities) == nil else { continue }
            if let b = best, b.width * b.height > f.width * f.height || (b.width * b.height == f.width * f.height && b.width >= f.width) { continue }
            best = (f.width, f.height)
        }
        return best
    }
}

extension String {
    /// `15.00` → `15`, `7.50` → `7.5`: a frame rate reads best without trailing zeros.
    fileprivate var trimmedZeros: String {
        guard contains(".") else { return self }
        var s = self
        while s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
        return s
    }
}
