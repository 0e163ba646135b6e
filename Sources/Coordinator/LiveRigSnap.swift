import CoordCore
import CoordWire
import Foundation
import Platform

/// The console's Snap, the warm path of a shot (CONTRACT §18): the nodes already preview on the console's grid with
/// their clocks followed, so the shot is the first group the nodes can still reach; each keeps that group's frame of
/// every camera at the camera's size (KeepStills), and the stills are collected and sealed as `coord snap`'s are.
extension LiveRig {
    struct SnapRoom {
        var busy = false
        /// The slowest node's KeepStills round trip at the last Snap (µs).
        var roundTrip = WarmSnap.firstRoundTripMicroseconds
    }

    /// What a Snap gave: the shot's directory, its group and how long after the click (or request) that group was.
    public struct SnapView: Sendable {
        public var takeID: String
        public var directory: String
        public var status: String
        public var group: Int64
        public var centerMicroseconds: Int64
        public var periodMicroseconds: Int64
        public var leadMicroseconds: Int64
        public var latencyMicroseconds: Int64
        public var latencyFrom: String
        public var stills: Int
        public var message: String?
        /// Every shot's group (a burst's `g0 + k × every / period`).
        public var groups: [Int64] = []
        /// The cameras switched to the still's mode (`node/camera`), and what the switch added to the lead (µs).
        public var switched: [String] = []
        public var switchLeadMicroseconds: Int64 = 0
    }

    /// What the operator asks of a Snap, as `coord snap`'s flags (CONTRACT §18): checked by SnapPlan.
    public struct SnapAsk: Sendable {
        public var name: String?
        public var format: String?
        public var size: String?
        public var count: Int?
        public var everyMilliseconds: Int?
        public var clickedAtMs: Double?
        public init(name: String? = nil, format: String? = nil, size: String? = nil, count: Int? = nil, everyMilliseconds: Int? = nil, clickedAtMs: Double? = nil) {
            self.name = name; self.format = format; self.size = size; self.count = count
            self.everyMilliseconds = everyMilliseconds; self.clickedAtMs = clickedAtMs
        }
    }

    /// Takes one shot now. `clickedAtMs`: the page's wall clock at the click, so the latency counts from there.
    public func snap(name: String?, format: String?, clickedAtMs: Double?) async throws(Refusal) -> SnapView {
        try await snap(SnapAsk(name: name, format: format, clickedAtMs: clickedAtMs))
    }

    /// Takes a shot (or a burst) now, at the asked size: a camera previewing at another size is switched to it.
    public func snap(_ ask: SnapAsk) async throws(Refusal) -> SnapView {
        let (name, clickedAtMs) = (ask.name, ask.clickedAtMs)
        let arrivedAt = MonotonicClock.now()
        let arrivedWallMs = Date().timeIntervalSince1970 * 1000
        let fps = max(template.fps, 1)
        let asked: SnapPlan
        do {
            asked = try SnapPlan(count: ask.count ?? 1, everyMilliseconds: ask.everyMilliseconds, fps: fps, size: ask.size.map { String($0.prefix(32)) },
                                 format: String((ask.format ?? "png").prefix(32)), prefix: "a Snap's ")
        } catch {
            throw Refusal(.invalid, error.sentence)
        }
        let format = asked.format
        guard format.isLossless else {
            throw Refusal(.invalid, "a Snap's format must be png or tiff (got \"\(format.rawValue)\"): the console keeps the cameras' pixels exactly; `coord snap` writes jpeg.")
        }
        if asked.count > 1, ask.everyMilliseconds == nil {
            throw Refusal(.invalid, "a Snap's count of \(asked.count) needs its every (ms between shots, a whole number of frame periods).")
        }
        if let name, let problem = RigName.problem(with: name, kind: "shot") { throw Refusal(.invalid, problem + ".") }
        // The take holds the cameras (its own grid, its own files): a Snap waits for it to end.
        if let take, take.state.isRunning {
            throw Refusal(.conflict, "take \(take.takeId ?? take.name) is \(take.state.rawValue); a Snap is taken while no take records.")
        }
        guard snapRoom.withLock({ r in r.busy ? false : { r.busy = true; return true }() }) else {
            throw Refusal(.conflict, "a Snap is already being taken; wait for it to land.")
        }
        defer { snapRoom.withLock { $0.busy = false } }
        let (nodes, tracker) = state.withLock { s in
            (s.nodes.filter { $0.link != nil && !$0.cameras.isEmpty && $0.view.reachable && $0.view.state.previews && $0.previewSubscribed }, s.tracker)
        }
        guard let tracker, !nodes.isEmpty, nodes.allSatisfy({ tracker.estimate($0.name) != nil }) else {
            throw Refusal(.conflict, "no node previews on the console's grid yet, so there is no frame to keep; wait for the tiles.")
        }
        // Cameras at another size than the still's are switched to it for the shot: the group lies far enough ahead.
        let switches: [StillModeSwitch.Switch]
        if asked.size != nil, let n = nodes.first(where: { n in n.cameras.contains { c in !n.capabilities.contains { $0.name == c.camera } } }) {
            throw Refusal(.conflict, "node \(n.name) has not said what sizes its cameras offer yet, so a Snap at a size cannot be planned; Snap again after its handshake.")
        }
        do {
            switches = try StillModeSwitch.switches(nodes.flatMap { n in
                n.cameras.compactMap { c in n.capabilities.first { $0.name == c.camera }.map { StillModeSwitch.Camera(node: n.name, settings: c, capabilities: $0) } }
            }, plan: asked, fps: fps)
        } catch {
            throw Refusal(.invalid, error.sentence)
        }
        let (takeID, directory) = try makeShotDirectory(name: name)
        let grid = previewGrid
        let warm = WarmSnap.lead(roundTripMicroseconds: snapRoom.withLock { $0.roundTrip }, periodMicroseconds: grid.periodMicroseconds)
        let lead = StillModeSwitch.lead(warm: warm, switches: switches, periodMicroseconds: grid.periodMicroseconds)
        let group = StillModeSwitch.group(now: MonotonicClock.now(), lead: lead, grid: grid, switches: switches)
        let plan: SnapPlan
        do {
            plan = try SnapPlan(count: asked.count, everyMilliseconds: ask.everyMilliseconds, fps: fps, size: ask.size, format: format.rawValue, firstGroup: group)
        } catch {
            throw Refusal(.invalid, error.sentence)
        }
        let answers = await withTaskGroup(of: (String, Int64, String?).self) { tasks in
            for node in nodes {
                let modes = switches.filter { $0.node == node.name }.map(\.mode)
                let request = CoordRequest.keepStills(shotID: takeID, groups: plan.groups, format: format, modes: modes)
                tasks.addTask {
                    let sent = MonotonicClock.now()
                    do {
                        let (reply, at) = try await node.link!.request(request, timeout: 4, what: "the Snap")
                        if case .error(let e) = reply.body { return (node.name, at - sent, e.message) }
                        return (node.name, at - sent, nil)
                    } catch {
                        return (node.name, MonotonicClock.now() - sent, "node \(node.name) did not take the Snap: \(error)")
                    }
                }
            }
            return await tasks.reduce(into: []) { $0.append($1) }
        }
        snapRoom.withLock { $0.roundTrip = answers.map(\.1).max() ?? $0.roundTrip }
        let refusals = Dictionary(answers.compactMap { a in a.2.map { (a.0, $0) } }) { first, _ in first }
        guard refusals.count < nodes.count else {
            try? FileManager.default.removeItem(at: directory)
            throw Refusal(.conflict, "the Snap was refused: \(refusals.values.sorted().joined(separator: " "))")
        }
        let instant = grid.instant(ofGroup: group)
        let latency = WarmSnap.latency(groupInstant: instant, arrivedAt: arrivedAt, arrivedWallMs: arrivedWallMs, clickedWallMs: clickedAtMs)
        event("snap", "Snap \(takeID): group \(group), \(latency.microseconds / 1000) ms after the \(latency.from)"
              + (switches.isEmpty ? "" : "; \(switches.count) camera(s) switched to the still's mode, \((lead - warm) / 1000) ms more lead"))
        let outcome: SnapOutcome
        do {
            // A node that refused is named in the shot (partial); the others' stills are collected, not left behind.
            outcome = try await collectShot(takeID: takeID, name: name ?? "snap", directory: directory, plan: plan, switches: switches, nodes: nodes,
                                            refused: refusals, tracker: tracker)
        } catch {
            throw Refusal(.conflict, "shot \(takeID) at group \(group) was not collected: \(error)")
        }
        takesChanged()
        let status = outcome.manifest.status.rawValue
        event("snap", "Snap \(takeID): \(outcome.stills.count) still(s), \(status)")
        return SnapView(takeID: takeID, directory: "takes/\(takeID)/", status: status, group: group, centerMicroseconds: instant,
                        periodMicroseconds: grid.periodMicroseconds, leadMicroseconds: lead, latencyMicroseconds: latency.microseconds,
                        latencyFrom: latency.from, stills: outcome.stills.count,
                        message: outcome.manifest.events.first.map(\.detail), groups: plan.groups,
                        switched: switches.map { "\($0.node)/\($0.camera)" }, switchLeadMicroseconds: lead - warm)
    }

    /// Brings the nodes' stills home, confirms them, and writes the shot's manifest, report and seal.
    private func collectShot(takeID: String, name: String, directory: URL, plan: SnapPlan, switches: [StillModeSwitch.Switch], nodes all: [Node],
                             refused: [String: String], tracker: ClockTracker) async throws -> SnapOutcome {
        let nodes = all.filter { refused[$0.name] == nil }
        let (group, format) = (plan.firstGroup, plan.format)
        let console = Console(quiet: true)
        let table = { (node: String, camera: String) in "\(node)/\(camera).stills.csv" }
        let pulses = { (node: String, camera: String) in "\(node)/\(camera).trigger.json" }
        let collector = Collector(directory: directory, takeID: takeID, policy: template.collectPolicy, console: console)
        let outcome = await collector.collect(nodes.map { node in
            Collector.Node(name: node.name, link: node.link,
                           expected: node.cameras.flatMap { c in (0..<plan.count).map { plan.path(node: node.name, camera: c.camera, shot: $0) } + [table(node.name, c.camera)] },
                           known: [], unreachable: nil)
        })
        let grid = previewGrid
        let writer = TakeDirectoryWriter(directory: directory)
        var cameras: [TakeManifest.Camera] = []
        var kept: [SnapSession.KeptStill] = []
        var events: [TakeManifest.Event] = []
        var track: [TakeManifest.ClockTrackPoint] = []
        for node in all {
            // The previews follow the tracker's estimate (not mappings pushed for a take, which `figures` reads): the
            // shot states the estimate's offset, drift, uncertainty and bound at its group, or its report claims ±0.
            let at = grid.instant(ofGroup: group)
            let figures: TakeManifest.ClockFigures
            if let mapping = tracker.estimate(node.name) {
                let point = TakeManifest.ClockTrackPoint(node: node.name, at: at, mapping: mapping)
                track.append(point)
                figures = TakeManifest.ClockFigures(offsetMicroseconds: point.offsetMicroseconds.rounded(), driftPPM: point.driftPPM,
                                                    uncertaintyMicroseconds: point.uncertaintyMicroseconds,
                                                    boundMicroseconds: point.boundMicroseconds, timeService: "")
            } else {
                figures = tracker.figures(node.name, from: at, to: at + grid.periodMicroseconds, timeService: "")
            }
            for var settings in node.cameras {
                // A switched camera's stills are at the still's size, not the preview's.
                let switched = switches.first { $0.node == node.name && $0.camera == settings.camera }
                if let switched { (settings.width, settings.height) = (switched.width, switched.height) }
                var camera = TakeManifest.Camera(node: node.name, camera: settings.camera, ordinal: settings.ordinal, width: settings.width,
                                                 height: settings.height, fps: settings.fps, codec: format.rawValue, frames: 0, dropped: 0,
                                                 clock: figures, files: [])
                camera.rate = grid.rate
                // The newest tile's real-time figure: the still's settled centre is at least this certain.
                camera.centerUncertaintyMicroseconds = node.centerUncertainty[settings.camera].map { ($0 * 10).rounded() / 10 }
                let rows = writer.rows(csvPath: table(node.name, settings.camera))
                // A triggered camera's pulse for the shot (its node's `<camera>.trigger.json`, CONTRACT §17's block).
                // Read where it enters: a file that does not decode, or states impossible figures, is said, not kept.
                let pulsesFile = pulses(node.name, settings.camera)
                if let data = try? Data(contentsOf: directory.appendingPathComponent(pulsesFile)) {
                    let figures = try? JSONDecoder().decode(TriggerFigures.self, from: data)
                    if let why = figures.map({ $0.problem(file: pulsesFile) }) ?? "\(pulsesFile) is not the node's trigger figures." {
                        events.append(.init(tMicroseconds: grid.instant(ofGroup: group), node: node.name, camera: settings.camera, kind: .incomplete,
                                            detail: "camera \(node.name)/\(settings.camera): \(why)"))
                    } else {
                        camera.trigger = figures
                    }
                }
                for (shot, wanted) in plan.groups.enumerated() {
                    let path = plan.path(node: node.name, camera: settings.camera, shot: shot)
                    if let row = rows.first(where: { $0.group == wanted }), outcome.verified[path] != nil {
                        // The size the file has: a camera that could not open in the still's mode was kept at its preview's.
                        let size = (try? Data(contentsOf: directory.appendingPathComponent(path), options: .alwaysMapped))
                            .flatMap { StillImageSize.of([UInt8]($0.prefix(1 << 20))) ?? StillImageSize.of([UInt8]($0)) }
                            ?? (settings.width, settings.height)
                        var still = SnapSession.KeptStill(camera: cameras.count, shot: shot, row: row, path: path, width: size.width, height: size.height)
                        still.modeSwitch = switched.map { $0.width == size.width && $0.height == size.height } ?? false
                        if let switched, !still.modeSwitch {
                            events.append(.init(tMicroseconds: grid.instant(ofGroup: wanted), node: node.name, camera: settings.camera, kind: .incomplete,
                                                detail: "camera \(node.name)/\(settings.camera) could not be switched to \(switched.width)x\(switched.height) for the shot (its node's log says why): its still of group \(wanted) is \(size.width)x\(size.height), from its preview"))
                        }
                        kept.append(still)
                    } else {
                        let why = refused[node.name].map { ": \($0)" }
                            ?? camera.trigger.map { ": its trigger output \($0.output) pulsed \($0.pulses) time(s) and the camera gave no frame of it" }
                            ?? switched.map { ": it was switched to \($0.width)x\($0.height) for the shot and gave no frame of that group in that mode" } ?? ""
                        events.append(.init(tMicroseconds: grid.instant(ofGroup: wanted), node: node.name, camera: settings.camera, kind: .incomplete,
                                            detail: "camera \(node.name)/\(settings.camera) has no still of group \(wanted)\(why)"))
                    }
                }
                if let last = kept.last(where: { $0.camera == cameras.count }) { (camera.width, camera.height) = (last.width, last.height) }
                cameras.append(camera)
            }
        }
        // The nodes let go of what arrived intact; the tables' centres are in the manifest from here on.
        for node in nodes {
            guard let files = outcome.confirmable[node.name], !files.isEmpty else { continue }
            _ = try? await node.link!.request(CoordRequest.confirmCollected(takeID: takeID, files: files, keep: template.collectPolicy.afterConfirm == .keep),
                                              timeout: 30, what: "the collection confirmation")
        }
        for node in nodes {
            for c in node.cameras {
                try? FileManager.default.removeItem(at: directory.appendingPathComponent(table(node.name, c.camera)))
                try? FileManager.default.removeItem(at: directory.appendingPathComponent(pulses(node.name, c.camera)))
            }
        }
        var manifest = TakeManifest(takeID: takeID, name: name, status: events.isEmpty ? .complete : .partial,
                                    t0Microseconds: grid.t0, framePeriodMicroseconds: grid.periodMicroseconds, groups: Int64(plan.count),
                                    startWallclock: WallClock.rfc3339(), cameras: cameras, events: events)
        manifest.collection = CollectionRecord(state: outcome.missing.isEmpty ? .complete : .incomplete, afterConfirm: template.collectPolicy.afterConfirm.rawValue)
        manifest.clockTrack = track.isEmpty ? nil : track
        return try SnapSession.finishShot(manifest, kept: kept, plan: plan, budget: nil, directory: directory, console: console)
    }

    /// A new shot directory under the takes directory, named as a take is.
    private func makeShotDirectory(name: String?) throws(Refusal) -> (String, URL) {
        let root = template.takesDirectory
        do { try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true) } catch {
            throw Refusal(.conflict, "cannot create the takes directory \(root.path): \(error.localizedDescription).")
        }
        for _ in 0..<16 {
            let (y, mo, d, h, mi, s) = WallClock.utcFields()
            let id = TakeID(year: y, month: mo, day: d, hour: h, minute: mi, second: s, name: name ?? "snap",
                            nonce: UInt32.random(in: 0...0xFF_FFFF)).value
            let url = root.appendingPathComponent(id, isDirectory: true)
            if (try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)) != nil { return (id, url) }
        }
        throw Refusal(.conflict, "cannot create a new shot directory under \(root.path).")
    }
}
