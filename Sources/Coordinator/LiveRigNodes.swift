import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import Synchronization
import ZeroMQ

// Reaching the nodes, their status, clocks and idle preview, and the tiles they send.
extension LiveRig {
    /// Handshake with nodes not reached yet; status from every node reached.
    func refreshNodes() async {
        let nodes = state.withLock { $0.nodes }
        await withTaskGroup(of: Void.self) { group in
            for (index, node) in nodes.enumerated() {
                group.addTask { await self.refresh(index, node) }
            }
        }
    }

    private func refresh(_ index: Int, _ node: Node) async {
        var node = node
        do {
            if node.link == nil {
                let link = try NodeLink(endpoint: node.spec.endpoint, name: node.spec.name, context: context, keys: spec.linkKeys(for: node.spec))
                node.link = link
                state.withLock { $0.nodes[index].link = link }
            }
            let link = node.link!
            // Shaken hands with again every few seconds and after any silence: a node that restarted (another
            // process, perhaps another preview port) or moved its preview is followed, not lost.
            if node.cameras.isEmpty || !node.view.reachable || MonotonicClock.now() - node.handshakeAt >= Self.handshakeEveryMicroseconds {
                // A new process starts from its cameras' own controls: the operator's are set again.
                if try await handshake(index, &node, link: link) { await reapplyControls(node.name) }
            }
            let (reply, _) = try await link.request(.statusRequest(Coord_V1_StatusRequest()), timeout: 1, what: "status")
            guard case .status(let wire) = reply.body else { return }
            let status: NodeStatus
            do throws(FieldFault) { status = try NodeReply.status(wire, from: "node \(node.name)") } catch { throw CoordError(error, node: node.name) }
            // The console's own estimate while it follows the clocks; during a take, the node's mapping for it.
            let uncertainty = state.withLock { $0.tracker }?.estimate(node.name)?.uncertaintyMicroseconds ?? status.clockUncertaintyMicroseconds
            state.withLock { s in
                let wasReachable = s.nodes[index].view.reachable
                s.nodes[index].lastStatus = status
                s.nodes[index].lastHeardAt = MonotonicClock.now()
                s.nodes[index].runway.seen(takeID: status.takeID, recording: status.state == .recording,
                                           bytes: status.cameras.reduce(0) { $0 &+ $1.bytesWritten } &+ status.mics.reduce(0) { $0 &+ $1.bytesWritten },
                                           now: MonotonicClock.now())
                s.nodes[index].view = NodeView(
                    name: node.name, reachable: true, state: NodeState(status.state),
                    pressure: status.pressure ?? .nominal, clockUncertaintyUs: uncertainty.map { ($0 * 10).rounded() / 10 },
                    takeId: status.takeID.isEmpty ? nil : status.takeID,
                    message: Self.message(status, controlsNote: s.nodes[index].controlsNote))
                s.nodes[index].view.mics = status.mics.map { MicView(mic: $0.mic, levelDbfs: ($0.levelDBFS * 10).rounded() / 10,
                                                                     error: $0.error.isEmpty ? nil : $0.error) }
                for c in status.cameras {
                    s.nodes[index].cameraProgress[c.camera, default: (0, nil)].drops = c.dropped
                }
                // The node's word on each camera's controls in force: shown before anyone sets one, and true after
                // the node restarts or anyone else sets them.
                let rigCameras = Set(s.nodes[index].cameras.map(\.camera))
                for (camera, values) in status.controls where rigCameras.contains(camera) {
                    s.nodes[index].controls[camera] = values
                }
                var metrics = NodeMetricsSample(node: node.name)
                metrics.recording = status.state == .recording
                metrics.pressure = status.pressure
                metrics.clockUncertaintyMicroseconds = uncertainty
                let now = status.cameras.map {
                    NodeMetricsSample.Camera(camera: $0.camera, takeID: status.takeID, frames: UInt64(max(0, $0.frames)),
                                             dups: UInt64(max(0, $0.dropped)), bytesWritten: $0.bytesWritten,
                                             phaseErrorMicroseconds: s.nodes[index].cameraProgress[$0.camera]?.phase.map(Double.init))
                }
                s.nodes[index].counts.seen(now)
                s.nodes[index].metrics = metrics
                if !wasReachable { s.nodes[index].view.message = s.nodes[index].controlsNote }
            }
        } catch {
            let sentence = "\(error)"
            let changed = state.withLock { s -> Bool in
                let was = s.nodes[index].view.reachable || s.nodes[index].view.message == "not reached yet"
                s.nodes[index].view.reachable = false
                s.nodes[index].lastStatus = nil
                s.nodes[index].view.state = .unreachable
                s.nodes[index].view.message = sentence
                return was
            }
            if changed { event("node-unreachable", node: node.name, sentence) }
        }
    }

    /// A node's message: its own word (a take's detail, else what raised its pressure), then what became of the
    /// controls set here when it last restarted.
    static func message(_ status: NodeStatus, controlsNote: String?) -> String? {
        let own = !status.detail.isEmpty ? status.detail
            : (status.pressure ?? .nominal) > .nominal && !status.pressureCause.isEmpty ? status.pressureCause : nil
        let parts = [own, controlsNote].compactMap { $0 }
        return parts.isEmpty ? nil : parts.joined(separator: " · ")
    }

    /// How often a reached node is shaken hands with again, to see a restart or a moved preview endpoint.
    static let handshakeEveryMicroseconds: Int64 = 5_000_000

    /// Shakes hands with a node; whether it is another process than the one shaken hands with before.
    private func handshake(_ index: Int, _ node: inout Node, link: NodeLink) async throws -> Bool {
        var hello = Coord_V1_Hello()
        hello.coordinator = ProcessInfo.processInfo.hostName
        let (reply, _) = try await link.request(.hello(hello), timeout: 2, what: "the handshake")
        guard case .helloReply(let wire) = reply.body else { throw CoordError(.failure, "node \(node.name) answered the handshake with something else.") }
        let r: Coord_V1_HelloReply
        do throws(FieldFault) { r = try NodeReply.hello(wire, from: "node \(node.name)") } catch { throw CoordError(error, node: node.name) }
        let now = MonotonicClock.now()
        let settings = cameraSettings(node.spec, reply: r)
        let endpoint = PreviewReceiver.endpoint(published: r.previewEndpoint, control: node.spec.endpoint)
        let first = node.cameras.isEmpty
        let restarted = !first && r.instanceID != node.instanceID
        let rebooted = !first && r.resources.hostID != node.hostID
        let camerasChanged = settings.map(\.camera) != node.cameras.map(\.camera)
        let previewMoved = first || endpoint != node.previewEndpoint
        node.handshakeAt = now
        state.withLock { $0.nodes[index].handshakeAt = now; $0.nodes[index].diskFreeBytes = r.resources.freeDiskBytes }
        guard first || restarted || camerasChanged || previewMoved else { return false }
        if previewMoved {
            if let old = node.previewEndpoint { receiver.disconnect(old) }
            if let endpoint { receiver.connect(endpoint, keys: spec.linkKeys(for: node.spec)) }
        }
        let cameras = state.withLock { s -> [CameraSettings] in
            s.nodes[index].previewSubscribed = endpoint != nil
            s.nodes[index].previewEndpoint = endpoint
            s.nodes[index].instanceID = r.instanceID
            s.nodes[index].hostID = r.resources.hostID
            s.nodes[index].capabilities = r.cameras.map(CameraCapabilities.init(wire:))
            if restarted {
                // A new process starts from its cameras' own controls, and counts afresh.
                s.nodes[index].controls = [:]
                s.nodes[index].cameraProgress = [:]
            }
            guard first || camerasChanged else { return s.nodes[index].cameras }
            s.nodes[index].cameras = settings
            // Ordinals run through the rig in its order, as a take's do (the stripe carries them).
            var ordinal = 0
            for n in s.nodes.indices {
                for c in s.nodes[n].cameras.indices { s.nodes[n].cameras[c].ordinal = ordinal; ordinal += 1 }
            }
            let keys = s.nodes.flatMap { n in n.cameras.map { CameraKey(node: n.name, camera: $0.camera) } }
            let patience = 3 * preview.groupStride(framePeriodMicroseconds: previewGrid.periodMicroseconds)
            tileRoom.withLock { $0.assembler.reset(cameras: keys, patienceGroups: patience) }
            return s.nodes[index].cameras
        }
        node.cameras = cameras
        node.previewEndpoint = endpoint
        node.instanceID = r.instanceID
        // Another boot is another monotonic clock: the clocks are followed afresh.
        if rebooted {
            stopTracker()
        } else if restarted {
            // Another process may keep another clock (a simulated offset does): its exchanges start afresh.
            state.withLock { $0.tracker }?.forget(node.name)
        }
        let tiles = endpoint.map { "preview at \($0)" } ?? "no preview"
        if first {
            event("node-reached", node: node.name, "node \(node.name) reached at \(node.spec.endpoint): \(settings.count) camera(s), \(tiles)")
        } else if restarted {
            event("node-restarted", node: node.name, "node \(node.name) restarted (a new process): \(settings.count) camera(s), \(tiles)")
        } else {
            event("node-changed", node: node.name, "node \(node.name) changed: \(settings.count) camera(s), \(tiles)")
        }
        return restarted
    }

    /// The cameras a node previews: the rig file's list for it (or every camera it has), at the take's size and rate.
    private func cameraSettings(_ node: RigSpec.Node, reply: Coord_V1_HelloReply) -> [CameraSettings] {
        let names = node.cameras?.map(\.name) ?? reply.cameras.map(\.name)
        return names.enumerated().map { index, name in
            let camera = node.cameras?.first { $0.name == name }
            let size = camera?.size.flatMap(RigSpec.parseSize) ?? (template.width, template.height)
            var settings = CameraSettings(camera: name, ordinal: index, width: size.0, height: size.1, fps: template.fps, codec: template.codec)
            settings.setRate(template.rate)
            return settings
        }
    }

    /// While no take runs from here: clocks followed, and every idle node's preview renewed with its newest mapping.
    func keepPreview() async {
        let busy = takeRoom.withLock { $0.session != nil }
        let nodes = state.withLock { $0.nodes }
        // A take's Arm ended every preview train (the take's own replaces it); asked again once the preview resumes.
        guard !busy else { state.withLock { $0.previewTrain.running = [] }; return }
        let reached = nodes.filter { $0.link != nil && !$0.cameras.isEmpty && $0.view.reachable }
        ensureTracker(reached)
        guard preview.isOn else { return }
        guard let tracker = state.withLock({ $0.tracker }) else { return }
        await withTaskGroup(of: Void.self) { group in
            for node in reached where node.previewSubscribed && node.view.state.previews {
                guard let mapping = tracker.estimate(node.name, ahead: 1_000_000), mapping.uncertaintyMicroseconds < 1000 else { continue }
                group.addTask {
                    var m = Coord_V1_StartPreview()
                    m.cameras = node.cameras.map(\.wire)
                    m.clock = mapping.wire
                    m.t0Us = self.previewGrid.t0
                    m.framePeriodUs = UInt64(self.previewGrid.periodMicroseconds)
                    (m.fpsNum, m.fpsDen) = Wire.rateFields(self.previewGrid.rationalRate)
                    m.preview.width = UInt32(self.preview.width)
                    m.preview.fps = UInt32(self.preview.fps)
                    m.leaseMs = 5000
                    do {
                        _ = try await node.link!.request(.startPreview(m), timeout: 4, what: "the preview")
                        await self.readControls(node)
                        await self.keepPreviewTrain(node)
                    } catch {
                        self.logger.warning("preview refused", metadata: ["node": "\(node.name)", "error": "\(error)"])
                    }
                }
            }
        }
    }

    private func ensureTracker(_ nodes: [Node]) {
        let names = nodes.map(\.name)
        let current = state.withLock { $0.trackedNodes }
        guard names != current else { return }
        stopTracker()
        guard !nodes.isEmpty else { return }
        let tracker = ClockTracker(nodes: nodes.map { ClockTracker.Node(name: $0.name, link: $0.link!) })
        state.withLock { s in
            s.tracker = tracker
            s.trackedNodes = names
        }
        // Run by `run`'s clock follower; a console that is closing runs none (the tracker is stopped with it).
        if case .terminated = trackerSink.yield(tracker) { tracker.stop() }
    }

    /// The clocks this console follows, by endpoint, each with the node process it was following (the handshake's
    /// instance), for a take that starts now: one whose handshake meets the same process need not confirm them.
    func followedClocks() -> [String: FollowedClock] {
        let (tracker, instances) = state.withLock { s in
            (s.tracker, Dictionary(s.nodes.map { ($0.spec.endpoint, $0.instanceID) }) { first, _ in first })
        }
        var followed = tracker?.followed() ?? [:]
        for (endpoint, clock) in followed {
            var clock = clock
            clock.instance = instances[endpoint].flatMap { $0.isEmpty ? nil : $0 }
            followed[endpoint] = clock
        }
        return followed
    }

    func stopTracker() {
        let tracker = state.withLock { s in
            defer { s.tracker = nil; s.trackedNodes = [] }
            return s.tracker
        }
        tracker?.stop()
    }

    // MARK: Tiles

    func received(_ r: PreviewReceiver.Received) {
        // A tile's centre is on this console's clock only on its own grids (the idle preview, a take started here):
        // a take another coordinator runs is on that coordinator's clock, which may be anywhere.
        let ownTake = r.takeID.isEmpty || takeRoom.withLock { $0.session?.takeID } == r.takeID
        let (sets, phase, future): ([MultiviewView], Int64?, (count: Int, ahead: Int64)?) = tileRoom.withLock { s in
            let now = MonotonicClock.now()
            if s.grid.switched(to: r.takeID, now: now) {
                // A take's grid numbers its groups afresh: sets never mix the idle grid's tiles with a take's.
                s.assembler.restartGroups()
            }
            let phase = s.grid.phase(of: r.tile, now: now)
            let key = "\(r.tile.key)/\(r.tile.group)"
            s.images[key] = r.jpeg
            s.imageOrder.append(key)
            let limit = Self.keptImagesPerCamera * max(1, s.assembler.cameras.count)
            if s.imageOrder.count > limit {
                for old in s.imageOrder.prefix(s.imageOrder.count - limit) { s.images[old] = nil }
                s.imageOrder.removeFirst(s.imageOrder.count - limit)
            }
            s.lastTiles[r.tile.key] = r.tile
            s.tileArrivedAt[r.tile.key] = now
            let grid = s.grid
            let refusedBefore = s.assembler.futureTiles
            let sets = s.assembler.add(r.tile, rigNow: ownTake ? now : nil).map { set in
                let view = Self.view(of: set, takeID: r.takeID, lastTiles: s.lastTiles, grid: grid)
                if set.complete { s.newestComplete = view; s.newestCompleteAt = now }
                return view
            }
            let refused = s.assembler.futureTiles
            return (sets, phase, refused > refusedBefore ? (refused, r.tile.centerMicroseconds - now) : nil)
        }
        // Named the first time and every hundredth after: a node whose stamps run ahead of its clock mapping.
        if let future, future.count % 100 == 1 {
            event("preview", node: r.tile.key.node, camera: r.tile.key.camera,
                  "a tile of \(r.tile.key) is stamped \(String(format: "%.1f", Double(future.ahead) / 1e6)) s in the future of the rig's clock and is not shown (\(future.count) such tile(s) so far).")
        }
        state.withLock { s in
            if let i = s.nodes.firstIndex(where: { $0.name == r.tile.key.node }) {
                s.nodes[i].cameraProgress[r.tile.key.camera, default: (0, nil)].phase = phase
                s.nodes[i].centerUncertainty[r.tile.key.camera] = r.centerUncertainty
            }
        }
        for set in sets { broadcast(.multiview(set)) }
    }

    static func view(of set: MultiviewSet, takeID: String, lastTiles: [CameraKey: PreviewTile], grid: TileGrid) -> MultiviewView {
        MultiviewView(group: set.group, centerUs: set.centerMicroseconds, complete: set.complete,
                      takeId: takeID.isEmpty ? nil : takeID,
                      tiles: set.tiles.map { key, tile in
                          TileView(node: key.node, camera: key.camera, group: tile?.group, centerUs: tile?.centerMicroseconds,
                                   image: tile.map { "preview/\(key.node)/\(key.camera)/\($0.group).jpg" }, missing: tile == nil,
                                   phaseErrorUs: tile.flatMap(grid.shown), drops: tile?.dropped ?? lastTiles[key]?.dropped ?? 0)
                      })
    }
}

/// The grid the tiles come on (the idle preview's, or a take's) and the cameras whose phase has settled onto it
/// since it changed. A camera moving from a take's grid to the preview's is steered there over seconds: its phase
/// then (−15 ms, say) is the steering, not a fault, and is not shown until it reads within a millisecond (or
/// 5 s have passed, after which whatever it reads is the camera's true phase).
struct TileGrid: Sendable {
    private(set) var take = ""
    private(set) var since: Int64 = 0
    private(set) var settled: Set<CameraKey> = []
    static let settledMicroseconds: Int64 = 1_000
    static let settleMicroseconds: Int64 = 5_000_000

    /// Tiles of `take` arrive at `now`: whether that is another grid than before (its phases are measured afresh).
    mutating func switched(to take: String, now: Int64) -> Bool {
        guard take != self.take || since == 0 else { return false }
        let changed = take != self.take
        self.take = take; since = now; settled = []
        return changed
    }

    /// The phase to show for a tile arriving at `now` (nil while its camera settles onto the grid).
    mutating func phase(of tile: PreviewTile, now: Int64) -> Int64? {
        if abs(tile.phaseErrorMicroseconds) <= Self.settledMicroseconds || now - since >= Self.settleMicroseconds { settled.insert(tile.key) }
        return shown(tile)
    }

    func shown(_ tile: PreviewTile) -> Int64? { settled.contains(tile.key) ? tile.phaseErrorMicroseconds : nil }
}
