// The hardware cost of a plan across the rig, as AVCaptureMultiCamSession tallies its hardwareCost: every shared
// resource (a bus, a host's encoders, a disk) gets demand / capacity, a node costs its worst resource, the rig
// its worst node, and the take is refused at 1.0 (CONTRACT §1, exit 3). The pressure forecast says how long a
// take can run before a disk fills or a node reaches its throttling temperature.

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

    /// A bus load's detail when a camera on it reserves isochronous bandwidth (its refusal then says so).
    public static let isochronousDetail = "isochronous reservations"

    static func isMJPEG(_ pixelFormat: String) -> Bool { ["mjpeg", "mjpg", "jpeg"].contains(pixelFormat.lowercased()) }

    /// What `camera` asks of its node at its settings; `calibration` gives the codec's bytes per pixel on disk.
    public static func demand(of camera: PlannedCamera, calibration: Calibration?) -> CameraDemand {
        let s = camera.settings
        // The stream the node will open: MJPG for an mjpeg take that can pass it through, else a raw format (a
        // V4L2 camera lists MJPG first, and its raw formats cost far more bus).
        let sized = camera.capabilities.formats.filter { $0.offers(width: s.width, height: s.height) }
        let raw = sized.first { !isMJPEG($0.pixelFormat) }
        let mjpeg = sized.first { isMJPEG($0.pixelFormat) }
        let chosen = s.codec == .mjpeg ? (mjpeg ?? raw) : (raw ?? mjpeg)
        let pixelFormat = chosen?.pixelFormat ?? ""
        let area = Double(max(s.width, 0)) * Double(max(s.height, 0))
        let fps = s.fps > 0 ? s.rate.value : 0
        let captured = area * s.capturedFPS
        // An isochronous USB camera takes from its bus what the controller reserves, not what its frames carry.
        let reserved = camera.capabilities.usbReservedBytesPerSecond
        let bus = reserved > 0 ? reserved : captured * PixelFormats.bytesPerPixel(pixelFormat)
        // An MJPEG stream recorded as MJPEG is written packet for packet: no pixel is encoded.
        let passthrough = isMJPEG(pixelFormat) && s.codec == .mjpeg
        let disk: Double?
        if passthrough {
            // The stream's own packets; a held group repeats the whole packet, so every group costs one.
            disk = area * fps * PixelFormats.bytesPerPixel(pixelFormat)
        } else if let bpp = calibration?.encode[s.codec.rawValue]?.bytesPerPixel {
            // An intra codec's held group repeats a whole packet; h264's repeat is a near-empty skip frame.
            disk = area * (s.codec.isIntra ? fps : s.capturedFPS) * bpp
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
                uncounted[camera.id] = (node, owner, camera.settings.codec.rawValue, [])
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
                let reserving = on.contains { node.cameras[$0].capabilities.usbReservedBytesPerSecond > 0 }
                loads[n].append(ResourceLoad(kind: .bus, resource: "bus \(bus.id) (\(bus.kind))",
                                             detail: reserving ? Budget.isochronousDetail : "", demand: total,
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
                    guard let rate = calibration.encode[camera.settings.codec.rawValue] else {
                        leaveOut(camera, node: n, owner: nodes[members[0]].name, part: "encoding")
                        continue
                    }
                    let p = demands[n][c].encodePixelsPerSecond * recordingOverhead
                    cameras.append(camera.id); pixels.append(p); shares.append(ratio(p, rate.pixelsPerSecond))
                    if !codecs.contains(camera.settings.codec.rawValue) { codecs.append(camera.settings.codec.rawValue) }
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
