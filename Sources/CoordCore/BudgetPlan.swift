// The plan as the cost model reads it (cameras, nodes, demands, loads) and the budget it returns: the rig's
// hardware cost, refused at 1.0, and its pressure forecast, with the sentences and table the operator reads.

/// One camera as the plan would run it: its node, the settings asked of it and what it offers.
public struct PlannedCamera: Equatable, Sendable {
    public var node: String
    public var settings: CameraSettings
    public var capabilities: CameraCapabilities
    /// Higher is more important: `Budget.fit` degrades the lowest first.
    public var priority: Int

    public init(node: String, settings: CameraSettings, capabilities: CameraCapabilities, priority: Int = 0) {
        self.node = node; self.settings = settings; self.capabilities = capabilities; self.priority = priority
    }

    /// `node/camera`, as loads, conflicts and changes name it.
    public var id: String { "\(node)/\(settings.camera)" }
}

/// One node of the plan: what it has to spend and the cameras it would run.
public struct PlannedNode: Equatable, Sendable {
    public var name: String
    public var resources: NodeResources
    public var cameras: [PlannedCamera]
    /// Preview tiles its cameras also encode while recording (the live console's); off for a plain take.
    public var preview: PreviewSettings
    /// Its microphones (CONTRACT §9), by name: each writes PCM to the same disk (no encoder).
    public var microphones: [String]

    public init(name: String, resources: NodeResources, cameras: [PlannedCamera], preview: PreviewSettings = .off,
                microphones: [String] = []) {
        self.name = name; self.resources = resources; self.cameras = cameras; self.preview = preview
        self.microphones = microphones
    }

    /// What one microphone writes: 48 kHz × 16-bit mono PCM, plus Matroska's framing (about 0.5 %).
    public static let microphoneBytesPerSecond = 96_500.0
}

/// What one camera asks of its node's resources at its settings.
public struct CameraDemand: Equatable, Sendable {
    /// The pixel format of the first offered format at the asked size; empty when no format has that size.
    public var pixelFormat: String
    /// w·h·fps / recordEvery: what the sensor delivers.
    public var capturedPixelsPerSecond: Double
    public var busBytesPerSecond: Double
    /// 0 for an MJPEG stream recorded as MJPEG: its packets are written as they come.
    public var encodePixelsPerSecond: Double
    /// nil when the calibration has no bytes-per-pixel figure for the codec (or there is no calibration).
    public var diskBytesPerSecond: Double?
    /// The camera's MJPEG packets go to the file without a re-encode.
    public var passthrough: Bool
}

/// One shared resource on a node and what the plan asks of it.
public struct ResourceLoad: Equatable, Sendable {
    public enum Kind: String, Equatable, Sendable { case bus, encoding, disk }
    public enum Unit: String, Equatable, Sendable { case bytesPerSecond = "bytes/s", pixelsPerSecond = "pixels/s" }

    public var kind: Kind
    /// For the operator: `bus usb1 (usb2)`, `encoding`, `disk write`.
    public var resource: String
    /// The codecs an encoding load encodes (`mjpeg`, `mjpeg + ffv1`); empty for other loads.
    public var detail: String
    public var demand: Double
    /// For a mix of codecs, the effective capacity: demand / cost.
    public var capacity: Double
    public var unit: Unit
    /// `node/camera` of every camera with a share of the demand, in plan order.
    public var cameras: [String]
    /// Each camera's part of `cost`, in the order of `cameras`.
    public var shares: [Double]
    /// The other nodes pooling this resource (one host's CPUs, one disk); empty when the node has it alone.
    public var sharedWith: [String]
    /// demand / capacity: at 1.0 the resource is fully spent.
    public var cost: Double

    public init(kind: Kind, resource: String, detail: String = "", demand: Double, capacity: Double, unit: Unit,
                cameras: [String], shares: [Double], sharedWith: [String] = [], cost: Double) {
        self.kind = kind; self.resource = resource; self.detail = detail; self.demand = demand; self.capacity = capacity
        self.unit = unit; self.cameras = cameras; self.shares = shares; self.sharedWith = sharedWith; self.cost = cost
    }
}

/// How long a node can record before system pressure stops it.
public struct PressureForecast: Equatable, Sendable {
    /// nil: no limit was found (nothing fills a disk, no thermal trip to reach, or nothing to judge by).
    public var longestSeconds: Double?
    /// `disk`, `thermal`, or `none`.
    public var factor: String
    /// Why, as a clause with its figures (`its disk has 1.20 GiB free, …`); empty without a limit.
    public var reason: String
    /// One sentence for the operator.
    public var sentence: String

    public init(longestSeconds: Double?, factor: String, reason: String, sentence: String) {
        self.longestSeconds = longestSeconds; self.factor = factor; self.reason = reason; self.sentence = sentence
    }
}

/// One node's hardware cost and pressure forecast.
public struct NodeBudget: Equatable, Sendable {
    public var node: String
    /// Its buses, then encoding, then disk write; a pooled load appears on every node sharing it.
    public var loads: [ResourceLoad]
    /// The highest load cost; 0 without loads.
    public var cost: Double
    public var limiting: ResourceLoad?
    /// What the cost leaves out and why, one sentence each.
    public var notes: [String]
    public var forecast: PressureForecast
}

/// The rig's hardware cost (refused at 1.0) and how long its take can run.
public struct RigBudget: Equatable, Sendable {
    public var nodes: [NodeBudget]
    /// The highest node cost; the take is refused at 1.0 or more.
    public var cost: Double
    public var limitingNode: String?
    public var limitingLoad: ResourceLoad?
    /// The shortest forecast over the nodes; nil when no node limits the take.
    public var longestSeconds: Double?
    public var longestNode: String?
    /// The limiting node's forecast sentence, or that none limits the take.
    public var forecastSentence: String

    /// Every node's notes, in node order.
    public var notes: [String] { nodes.flatMap(\.notes) }

    /// The plan stays under budget.
    public var fits: Bool { cost < 1.0 }

    /// Why the plan is refused (exit 3), naming node, resource and figures; nil when the cost is below 1.0.
    public func refusal() -> String? {
        guard cost >= 1.0, let node = limitingNode, let load = limitingLoad else { return nil }
        let (demand, capacity) = BudgetFigures.ratePair(load.demand, load.capacity, load.unit)
        let tail = ", a hardware cost of \(BudgetFigures.sig3(load.cost)) (it must stay below 1.0)."
        let shared = load.sharedWith.isEmpty ? "" : ", shared with \(BudgetFigures.list(load.sharedWith)),"
        switch load.kind {
        case .bus where load.detail == Budget.isochronousDetail:
            // What uvcvideo's alternate settings claim of the periodic schedule, camera by camera.
            let prefix = "\(node)/"
            let each = zip(load.cameras, load.shares).map { camera, share in
                (camera.hasPrefix(prefix) ? String(camera.dropFirst(prefix.count)) : camera) + " "
                    + BudgetFigures.rate(share * load.capacity, load.unit)
            }
            return "node \(node) is over budget: \(load.resource) cannot reserve the isochronous bandwidth its cameras' "
                + "streams claim (\(BudgetFigures.list(each))): \(demand) where it leaves \(capacity) to periodic transfers" + tail
        case .bus:
            return "node \(node) is over budget: \(load.resource) needs \(demand) where it carries \(capacity)" + tail
        case .encoding:
            return "node \(node) is over budget: encoding\(shared) needs \(demand) (\(load.detail)) where its calibration measured \(capacity)" + tail
        case .disk:
            return "node \(node) is over budget: disk write\(shared) needs \(demand) where its calibration measured \(capacity)" + tail
        }
    }

    /// Why a take of `requestedSeconds` cannot run to its end, naming the node that stops it first, how long it
    /// can record and why; nil when it fits (or nothing limits it).
    public func pressureRefusal(requestedSeconds: Double) -> String? {
        guard let longest = longestSeconds, longest < requestedSeconds, let name = longestNode,
              let node = nodes.first(where: { $0.node == name }) else { return nil }
        let asked = BudgetFigures.duration(requestedSeconds.rounded(.up))
        let can = longest <= 0 ? "cannot record at all" : "can record only \(BudgetFigures.duration(longest))"
        return "the take asks for \(asked) but node \(name) \(can): \(node.forecast.reason)."
    }

    /// For each resource at cost 1.0 or more, which cameras cannot run together on it and how many of them
    /// could; one sentence each, every pooled resource once.
    public var conflicts: [String] {
        var seen = Set<String>()
        var out: [String] = []
        for node in nodes {
            for load in node.loads where load.cost >= 1.0 && !load.cameras.isEmpty {
                let members = ([node.node] + load.sharedWith).sorted()
                let key = "\(load.kind)|\(load.resource)|\(members.joined(separator: ","))"
                guard seen.insert(key).inserted else { continue }
                out.append(Self.conflict(load, on: node.node))
            }
        }
        return out
    }

    static func conflict(_ load: ResourceLoad, on node: String) -> String {
        let (demand, capacity) = BudgetFigures.ratePair(load.demand, load.capacity, load.unit)
        let what: String
        switch load.kind {
        case .bus: what = "\(demand) on \(load.resource), which carries \(capacity)"
        case .encoding: what = "\(demand) of encoding (\(load.detail)), where the calibration measured \(capacity)"
        case .disk: what = "\(demand) of disk write, where the calibration measured \(capacity)"
        }
        if load.cameras.count == 1 { return "\(load.cameras[0]) alone needs \(what)." }
        let prefix = "\(node)/"
        let local = load.sharedWith.isEmpty && load.cameras.allSatisfy { $0.hasPrefix(prefix) }
        let names = local ? load.cameras.map { String($0.dropFirst(prefix.count)) } : load.cameras
        let owners = local ? node : BudgetFigures.list([node] + load.sharedWith)
        // Smallest shares first: the most cameras that fit together (a cost must stay below 1.0).
        var sum = 0.0, fitting = 0
        for share in load.shares.sorted() {
            sum += share
            if sum < 1.0 { fitting += 1 } else { break }
        }
        let most = fitting == 0 ? "not one of them fits even alone" : "at most \(fitting) of them \(fitting == 1 ? "fits" : "fit")"
        return "\(owners): \(BudgetFigures.list(names)) cannot run together at these settings: they need \(what); \(most)."
    }

    /// Aligned text lines: one per load (node, resource, demand, capacity, cost, cameras, in MB/s and Mpx/s),
    /// each node's cost, the rig's cost, then the longest take per node and the notes.
    public func table() -> [String] {
        var rows: [[String]] = [["node", "resource", "demand", "capacity", "cost", "cameras"]]
        for node in nodes {
            for load in node.loads {
                var resource = load.resource
                if !load.detail.isEmpty { resource += " (\(load.detail))" }
                if !load.sharedWith.isEmpty { resource += ", shared with \(load.sharedWith.joined(separator: ", "))" }
                let prefix = "\(node.node)/"
                let cams = load.cameras.map { $0.hasPrefix(prefix) ? String($0.dropFirst(prefix.count)) : $0 }
                rows.append([node.node, resource, BudgetFigures.tableRate(load.demand, load.unit),
                             BudgetFigures.tableRate(load.capacity, load.unit), BudgetFigures.sig3(load.cost),
                             cams.joined(separator: ", ")])
            }
            let why = node.limiting.map { "limited by \($0.resource)" } ?? "no loads"
            rows.append([node.node, "node cost", "", "", BudgetFigures.sig3(node.cost), why])
        }
        let verdict: String
        if let node = limitingNode, let load = limitingLoad {
            verdict = (fits ? "under budget" : "over budget") + ": worst is \(node), \(load.resource)"
        } else {
            verdict = "under budget"
        }
        rows.append(["rig", "rig cost", "", "", BudgetFigures.sig3(cost), verdict])
        for node in nodes {
            let take = node.forecast.longestSeconds.map { BudgetFigures.duration($0) } ?? "no limit"
            let factor = node.forecast.longestSeconds == nil ? "" : node.forecast.factor
            rows.append([node.node, "longest take", take, "", "", factor])
        }
        var widths = [Int](repeating: 0, count: 6)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        let rightAligned: Set<Int> = [2, 3, 4]
        var lines = rows.map { row -> String in
            var line = ""
            for (i, cell) in row.enumerated() {
                let pad = String(repeating: " ", count: widths[i] - cell.count)
                line += (i == 0 ? "" : "  ") + (rightAligned.contains(i) ? pad + cell : cell + pad)
            }
            while line.hasSuffix(" ") { line.removeLast() }
            return line
        }
        lines += notes.map { "note: \($0)" }
        return lines
    }
}
