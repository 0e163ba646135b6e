// The hardware cost of a plan across the rig, as AVCaptureMultiCamSession tallies its hardwareCost: every shared
// resource (a bus, a host's encoders, a disk) gets demand / capacity, a node costs its worst resource, the rig
// its worst node, and the take is refused at 1.0 (CONTRACT §1, exit 3). The pressure forecast says how long a
// take can run before a disk fills or a node reaches its throttling temperature.

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

/// The cost model: pure functions from a plan to its budget, and (`fit`, in BudgetFit.swift) to a plan that fits.
public enum Budget {
    /// The smallest k ≥ 1 with fps / k ≤ cap: the camera records one group in k. A cap below 1 records one
    /// group in fps (one frame a second).
    public static func recordEvery(fps: Int, cap: Int) -> Int {
        guard fps > 0 else { return 1 }
        guard cap > 0 else { return fps }
        return max(1, (fps + cap - 1) / cap)
    }

    /// What a node keeps free on its staging disk: max(16 MiB, 3 s of writing). The node stops its cameras when
    /// free space falls to this, so its files can still be finalized.
    public static func diskReserveBytes(writeBytesPerSecond: Double) -> Double {
        PressureGauge.diskReserveBytes(writeBytesPerSecond: writeBytesPerSecond)
    }

    /// A node's recording pipeline costs more CPU per pixel than the bare encoder `coord-node calibrate` times:
    /// the camera source, phase loop, muxing, frames.csv, clock probes and status. bench/budget.py measured the
    /// nodes' CPU at 1.35–1.54× the calibrated encoding cost (mjpeg, ffv1, h264, release build), so the
    /// encoding demand counts each pixel this many times.
    public static let recordingOverhead = 1.5

    /// Codecs whose every packet stands alone: a held group repeats the whole packet on disk.
    static func isIntra(_ codec: String) -> Bool { codec.lowercased() != "h264" }

    static func isMJPEG(_ pixelFormat: String) -> Bool { ["mjpeg", "mjpg", "jpeg"].contains(pixelFormat.lowercased()) }

    /// What `camera` asks of its node at its settings; `calibration` gives the codec's bytes per pixel on disk.
    public static func demand(of camera: PlannedCamera, calibration: Calibration?) -> CameraDemand {
        let s = camera.settings
        // The stream the node will open: MJPG for an mjpeg take that can pass it through, else a raw format (a
        // V4L2 camera lists MJPG first, and its raw formats cost far more bus).
        let sized = camera.capabilities.formats.filter { $0.offers(width: s.width, height: s.height) }
        let raw = sized.first { !isMJPEG($0.pixelFormat) }
        let mjpeg = sized.first { isMJPEG($0.pixelFormat) }
        let chosen = s.codec.lowercased() == "mjpeg" ? (mjpeg ?? raw) : (raw ?? mjpeg)
        let pixelFormat = chosen?.pixelFormat ?? ""
        let area = Double(max(s.width, 0)) * Double(max(s.height, 0))
        let fps = Double(max(s.fps, 0))
        let captured = area * s.capturedFPS
        let bus = captured * PixelFormats.bytesPerPixel(pixelFormat)
        // An MJPEG stream recorded as MJPEG is written packet for packet: no pixel is encoded.
        let passthrough = isMJPEG(pixelFormat) && s.codec.lowercased() == "mjpeg"
        let disk: Double?
        if passthrough {
            // The stream's own packets; a held group repeats the whole packet, so every group costs one.
            disk = area * fps * PixelFormats.bytesPerPixel(pixelFormat)
        } else if let bpp = calibration?.encode[s.codec]?.bytesPerPixel {
            // An intra codec's held group repeats a whole packet; h264's repeat is a near-empty skip frame.
            disk = area * (isIntra(s.codec) ? fps : s.capturedFPS) * bpp
        } else {
            disk = nil
        }
        return CameraDemand(pixelFormat: pixelFormat, capturedPixelsPerSecond: captured, busBytesPerSecond: bus,
                            encodePixelsPerSecond: passthrough ? 0 : captured, diskBytesPerSecond: disk, passthrough: passthrough)
    }

    /// Every node's loads, cost and forecast, and the rig's.
    public static func evaluate(_ nodes: [PlannedNode]) -> RigBudget {
        var notes = [[String]](repeating: [], count: nodes.count)
        var loads = [[ResourceLoad]](repeating: [], count: nodes.count)
        let demands = nodes.map { node in node.cameras.map { demand(of: $0, calibration: node.resources.calibration) } }
        // Codec figures a camera's calibration lacks, so the note names what is left out once per camera.
        var uncounted: [String: (node: Int, owner: String, codec: String, parts: [String])] = [:]
        var uncountedOrder: [String] = []
        func leaveOut(_ camera: PlannedCamera, node: Int, owner: String, part: String) {
            if uncounted[camera.id] == nil {
                uncounted[camera.id] = (node, owner, camera.settings.codec, [])
                uncountedOrder.append(camera.id)
            }
            if !uncounted[camera.id]!.parts.contains(part) { uncounted[camera.id]!.parts.append(part) }
        }

        for (n, node) in nodes.enumerated() {
            if node.resources.calibration == nil && !node.cameras.isEmpty {
                notes[n].append("node \(node.name) is not calibrated: its encoding and disk write are not counted (run coord-node calibrate on it).")
            }
            for (c, camera) in node.cameras.enumerated() where demands[n][c].pixelFormat.isEmpty {
                notes[n].append("\(camera.id) offers no \(camera.settings.width)x\(camera.settings.height) format: its bus load is taken at \(BudgetFigures.sig3(PixelFormats.bytesPerPixel(""))) bytes per pixel.")
            }
            // Bus: the cameras on one bus share its bandwidth.
            var busIDs: [String] = []
            for camera in node.cameras where !camera.capabilities.bus.isEmpty && !busIDs.contains(camera.capabilities.bus) {
                busIDs.append(camera.capabilities.bus)
            }
            for id in busIDs {
                let on = node.cameras.indices.filter { node.cameras[$0].capabilities.bus == id }
                guard let bus = node.resources.buses.first(where: { $0.id == id }) else {
                    let names = on.map { node.cameras[$0].id }
                    notes[n].append("\(BudgetFigures.list(names)) \(names.count == 1 ? "is" : "are") on bus \(id), which node \(node.name) did not report: \(names.count == 1 ? "its" : "their") bus load is not counted.")
                    continue
                }
                let bytes = on.map { demands[n][$0].busBytesPerSecond }
                let total = bytes.reduce(0, +)
                loads[n].append(ResourceLoad(kind: .bus, resource: "bus \(bus.id) (\(bus.kind))", demand: total,
                                             capacity: bus.bandwidthBytesPerSecond, unit: .bytesPerSecond,
                                             cameras: on.map { node.cameras[$0].id },
                                             shares: bytes.map { ratio($0, bus.bandwidthBytesPerSecond) },
                                             cost: ratio(total, bus.bandwidthBytesPerSecond)))
            }
        }

        // Encoding: nodes on one host share its CPUs, so their pixels are pooled against one calibration.
        for members in pools(nodes, by: \.hostID) {
            let calibration = nodes[members[0]].resources.calibration!
            var cameras: [String] = [], pixels: [Double] = [], shares: [Double] = [], codecs: [String] = []
            for n in members {
                // The preview's tiles are JPEG-encoded too (at mjpeg's calibrated rate), whatever the take's codec.
                if nodes[n].preview.isOn, let mjpeg = calibration.encode["mjpeg"] {
                    for camera in nodes[n].cameras {
                        let tile = nodes[n].preview.tileSize(width: camera.settings.width, height: camera.settings.height)
                        let p = Double(tile.width * tile.height) * Double(nodes[n].preview.fps)
                        cameras.append(camera.id + " (preview)"); pixels.append(p); shares.append(ratio(p, mjpeg.pixelsPerSecond))
                        if !codecs.contains("preview") { codecs.append("preview") }
                    }
                }
                for (c, camera) in nodes[n].cameras.enumerated() where demands[n][c].encodePixelsPerSecond > 0 {
                    guard let rate = calibration.encode[camera.settings.codec] else {
                        leaveOut(camera, node: n, owner: nodes[members[0]].name, part: "encoding")
                        continue
                    }
                    let p = demands[n][c].encodePixelsPerSecond * recordingOverhead
                    cameras.append(camera.id); pixels.append(p); shares.append(ratio(p, rate.pixelsPerSecond))
                    if !codecs.contains(camera.settings.codec) { codecs.append(camera.settings.codec) }
                }
            }
            guard !cameras.isEmpty else { continue }
            let demand = pixels.reduce(0, +)
            let cost = shares.reduce(0, +)
            for n in members {
                loads[n].append(ResourceLoad(kind: .encoding, resource: "encoding",
                                             detail: codecs.joined(separator: " + ") + ", ×\(BudgetFigures.sig3(recordingOverhead)) for the pipeline",
                                             demand: demand, capacity: cost > 0 && cost.isFinite ? demand / cost : 0,
                                             unit: .pixelsPerSecond, cameras: cameras, shares: shares,
                                             sharedWith: members.filter { $0 != n }.map { nodes[$0].name }, cost: cost))
            }
        }

        // Disk: nodes writing to one filesystem share its write rate.
        var diskWrite = [Double](repeating: 0, count: nodes.count)
        var diskPeers = [[String]](repeating: [], count: nodes.count)
        for members in pools(nodes, by: \.diskID) {
            let capacity = nodes[members[0]].resources.calibration!.diskWriteBytesPerSecond
            var cameras: [String] = [], bytes: [Double] = []
            for n in members {
                for (c, camera) in nodes[n].cameras.enumerated() {
                    guard let b = demands[n][c].diskBytesPerSecond else {
                        leaveOut(camera, node: n, owner: nodes[n].name, part: "disk write")
                        continue
                    }
                    guard b > 0 else { continue }
                    cameras.append(camera.id); bytes.append(b)
                }
                for mic in nodes[n].microphones {
                    cameras.append("\(nodes[n].name)/\(mic)"); bytes.append(PlannedNode.microphoneBytesPerSecond)
                }
            }
            let demand = bytes.reduce(0, +)
            for n in members {
                diskWrite[n] = demand
                diskPeers[n] = members.filter { $0 != n }.map { nodes[$0].name }
            }
            guard !cameras.isEmpty else { continue }
            for n in members {
                loads[n].append(ResourceLoad(kind: .disk, resource: "disk write", demand: demand, capacity: capacity,
                                             unit: .bytesPerSecond, cameras: cameras,
                                             shares: bytes.map { ratio($0, capacity) }, sharedWith: diskPeers[n],
                                             cost: ratio(demand, capacity)))
            }
        }
        for id in uncountedOrder {
            let u = uncounted[id]!
            notes[u.node].append("node \(u.owner)'s calibration has no figure for codec \(u.codec): the \(BudgetFigures.list(u.parts)) of \(id) \(u.parts.count == 1 ? "is" : "are") not counted.")
        }

        var budgets: [NodeBudget] = []
        for (n, node) in nodes.enumerated() {
            let worst = loads[n].reduce(nil as ResourceLoad?) { best, load in
                best.map { load.cost > $0.cost ? load : $0 } ?? load
            }
            let encodingCost = loads[n].first { $0.kind == .encoding }?.cost ?? 0
            budgets.append(NodeBudget(node: node.name, loads: loads[n], cost: worst?.cost ?? 0, limiting: worst, notes: notes[n],
                                      forecast: forecast(node, writeBytesPerSecond: diskWrite[n], diskPeers: diskPeers[n],
                                                         encodingCost: encodingCost)))
        }
        let worstNode = budgets.reduce(nil as NodeBudget?) { best, b in best.map { b.cost > $0.cost ? b : $0 } ?? b }
        let shortest = budgets.filter { $0.forecast.longestSeconds != nil }
            .reduce(nil as NodeBudget?) { best, b in best.map { b.forecast.longestSeconds! < $0.forecast.longestSeconds! ? b : $0 } ?? b }
        return RigBudget(nodes: budgets, cost: worstNode?.cost ?? 0,
                         limitingNode: worstNode?.limiting == nil ? nil : worstNode?.node, limitingLoad: worstNode?.limiting,
                         longestSeconds: shortest?.forecast.longestSeconds, longestNode: shortest?.node,
                         forecastSentence: forecastSentence(shortest?.forecast.sentence, nodes))
    }

    /// The rig's forecast in one sentence. A node that is not calibrated may well fill its disk or run out of CPU,
    /// only nothing says when: the sentence says so rather than "no disk fills".
    static func forecastSentence(_ shortest: String?, _ nodes: [PlannedNode]) -> String {
        let unknown = nodes.filter { $0.resources.calibration == nil && !$0.cameras.isEmpty }.map(\.name)
        guard !unknown.isEmpty else { return shortest ?? "no node limits the take's length: no disk fills and no thermal trip is in reach." }
        let one = unknown.count == 1
        let clause = (one ? "node \(unknown[0]) is" : "nodes \(BudgetFigures.list(unknown)) are")
            + " not calibrated, so when \(one ? "its disk fills" : "their disks fill") and how much CPU the encoding takes cannot be counted (run coord-node calibrate on \(one ? "it" : "them"))."
        guard let shortest else { return "how long the take can run is not known: " + clause }
        return String(shortest.dropLast()) + "; but " + clause
    }

    /// demand / capacity; a resource with no capacity cannot carry any demand.
    static func ratio(_ demand: Double, _ capacity: Double) -> Double {
        capacity > 0 ? demand / capacity : (demand > 0 ? .infinity : 0)
    }

    /// Calibrated nodes grouped by a shared id (an empty id pools a node with itself alone), in plan order.
    /// An uncalibrated node stays out of every pool: nothing says what its machine can do.
    static func pools(_ nodes: [PlannedNode], by key: KeyPath<NodeResources, String>) -> [[Int]] {
        var order: [String] = []
        var members: [String: [Int]] = [:]
        for (n, node) in nodes.enumerated() where node.resources.calibration != nil {
            let id = node.resources[keyPath: key]
            let k = id.isEmpty ? "node \(n)" : "id \(id)"
            if members[k] == nil { order.append(k) }
            members[k, default: []].append(n)
        }
        return order.map { members[$0]! }
    }

    /// How long `node` can record: until its disk falls to the reserve, or its hottest zone reaches its passive
    /// trip at the calibrated heating scaled by how busy encoding keeps its CPUs; the sooner of the two.
    static func forecast(_ node: PlannedNode, writeBytesPerSecond rate: Double, diskPeers: [String],
                         encodingCost: Double) -> PressureForecast {
        let name = node.name
        guard !node.cameras.isEmpty else {
            return PressureForecast(longestSeconds: nil, factor: "none", reason: "",
                                    sentence: "node \(name) records no camera, so it sets no limit on the take's length.")
        }
        guard let calibration = node.resources.calibration else {
            return PressureForecast(longestSeconds: nil, factor: "none", reason: "",
                                    sentence: "node \(name) sets no known limit on the take's length: it is not calibrated.")
        }
        var limits: [(seconds: Double, factor: String, reason: String)] = []
        if rate > 0 {
            let free = Double(node.resources.freeDiskBytes)
            let reserve = diskReserveBytes(writeBytesPerSecond: rate)
            let with = diskPeers.isEmpty ? "" : " (with \(BudgetFigures.list(diskPeers)))"
            if free <= reserve {
                limits.append((0, "disk", "its disk has \(BudgetFigures.binaryBytes(free)) free, no more than the \(BudgetFigures.binaryBytes(reserve)) it keeps to finalize its files"))
            } else {
                limits.append(((free - reserve) / rate, "disk",
                               "its disk has \(BudgetFigures.binaryBytes(free)) free, less \(BudgetFigures.binaryBytes(reserve)) kept to finalize its files, and the take writes \(BudgetFigures.rate(rate, .bytesPerSecond)) there\(with)"))
            }
        }
        if let heating = calibration.heatingCelsiusPerSecond,
           let zone = node.resources.thermalZones.filter({ $0.passiveCelsius != nil })
               .min(by: { $0.passiveCelsius! - $0.celsius < $1.passiveCelsius! - $1.celsius }) {
            let passive = zone.passiveCelsius!
            let degrees = { (x: Double) in "\(BudgetFigures.fixed(x, 1)) °C" }
            if zone.celsius >= passive {
                limits.append((0, "thermal", "its thermal zone \(zone.name) is at \(degrees(zone.celsius)), at or above its passive trip of \(degrees(passive))"))
            } else if heating > 0 && encodingCost > 0 {
                // Calibration heated the node with every CPU encoding; a lighter take heats it in proportion.
                let rise = heating * min(1, encodingCost)
                limits.append(((passive - zone.celsius) / rise, "thermal",
                               "its thermal zone \(zone.name) is at \(degrees(zone.celsius)), \(degrees(passive - zone.celsius)) under its passive trip, and the take's encoding heats it by \(BudgetFigures.fixed(rise, 3)) °C/s"))
            }
        }
        guard let limit = limits.min(by: { $0.seconds < $1.seconds }) else {
            return PressureForecast(longestSeconds: nil, factor: "none", reason: "",
                                    sentence: "node \(name) sets no limit on the take's length: nothing fills its disk and no thermal trip is in reach.")
        }
        let can = limit.seconds <= 0 ? "cannot record at all" : "can record \(BudgetFigures.duration(limit.seconds))"
        return PressureForecast(longestSeconds: limit.seconds, factor: limit.factor, reason: limit.reason,
                                sentence: "node \(name) \(can): \(limit.reason).")
    }
}

/// Figures as the operator reads them, without Foundation's locale-dependent formatting.
enum BudgetFigures {
    /// `x` rounded to `decimals` places.
    static func fixed(_ x: Double, _ decimals: Int) -> String {
        guard x.isFinite else { return x.isNaN ? "?" : (x > 0 ? "∞" : "-∞") }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let r = (abs(x) * scale).rounded()
        guard r < 9e18 else { return String(x) }
        let n = Int64(r), s = Int64(scale)
        var text = String(n / s)
        if decimals > 0 {
            let f = String(n % s)
            text += "." + String(repeating: "0", count: decimals - f.count) + f
        }
        return (x < 0 && n != 0 ? "-" : "") + text
    }

    /// Decimals that show about three significant figures of a value of this size.
    static func decimals(for x: Double) -> Int { abs(x) >= 99.95 ? 0 : abs(x) >= 9.995 ? 1 : 2 }

    static func sig3(_ x: Double) -> String { fixed(x, decimals(for: x)) }

    static func scale(_ x: Double, _ unit: ResourceLoad.Unit) -> (Double, String) {
        let names = unit == .bytesPerSecond ? ["GB/s", "MB/s", "kB/s", "B/s"] : ["Gpx/s", "Mpx/s", "kpx/s", "px/s"]
        let a = x.isFinite ? abs(x) : 0
        if a >= 1e9 { return (1e9, names[0]) }
        if a >= 1e6 { return (1e6, names[1]) }
        if a >= 1e3 { return (1e3, names[2]) }
        return (1, names[3])
    }

    static func rate(_ x: Double, _ unit: ResourceLoad.Unit) -> String {
        let (s, name) = scale(x, unit)
        return "\(sig3(x / s)) \(name)"
    }

    /// Two rates in one unit and precision, chosen by the larger, so they compare at a glance.
    static func ratePair(_ a: Double, _ b: Double, _ unit: ResourceLoad.Unit) -> (String, String) {
        let big = max(a.isFinite ? abs(a) : 0, b.isFinite ? abs(b) : 0)
        let (s, name) = scale(big, unit)
        let d = decimals(for: big / s)
        return ("\(fixed(a / s, d)) \(name)", "\(fixed(b / s, d)) \(name)")
    }

    /// The table's fixed units, MB/s and Mpx/s, so a column compares down the page.
    static func tableRate(_ x: Double, _ unit: ResourceLoad.Unit) -> String {
        "\(fixed(x / 1e6, 1)) \(unit == .bytesPerSecond ? "MB/s" : "Mpx/s")"
    }

    /// Free space as `df -h` shows it, in powers of 1024.
    static func binaryBytes(_ x: Double) -> String {
        let k = 1024.0
        if x >= k * k * k { return "\(sig3(x / (k * k * k))) GiB" }
        if x >= k * k { return "\(sig3(x / (k * k))) MiB" }
        if x >= k { return "\(sig3(x / k)) KiB" }
        return "\(fixed(x, 0)) B"
    }

    /// `45 s`, `12 min 30 s`, `2 h 5 min`; whole seconds rounded down, so a forecast never promises too much.
    static func duration(_ seconds: Double) -> String {
        // Beyond a million years (a node's figures can say so) is forever too; Int(_:) would trap far beyond it.
        guard seconds.isFinite, seconds < 3e13 else { return "forever" }
        let t = max(0, Int(seconds.rounded(.down)))
        if t < 60 { return "\(t) s" }
        if t < 3600 { return t % 60 == 0 ? "\(t / 60) min" : "\(t / 60) min \(t % 60) s" }
        let m = (t % 3600) / 60
        return m == 0 ? "\(t / 3600) h" : "\(t / 3600) h \(m) min"
    }

    /// `a`, `a and b`, `a, b and c`.
    static func list(_ items: [String]) -> String {
        guard items.count > 1 else { return items.first ?? "" }
        return items.dropLast().joined(separator: ", ") + " and " + items.last!
    }
}
