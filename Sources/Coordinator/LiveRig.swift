import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import Synchronization
import ZeroMQ

/// The rig seen live, for the operator's console: every node's state once a second, the cameras opened for
/// preview while idle (their clocks aligned and their frames steered onto one preview grid), the tiles matched
/// into sets by group, and takes started and stopped as `coord start-take`/`stop-take` do. What the console
/// serves are snapshots of this (Codable, snake_case on the wire) and a stream of the same as they change.
public final class LiveRig: Sendable {
    // MARK: What the console shows

    public struct NodeView: Codable, Equatable, Sendable {
        public var name: String
        public var reachable: Bool
        public var state: String
        public var pressure: String
        public var clockUncertaintyUs: Double?
        public var takeId: String?
        public var message: String?
        /// The node's microphones while a take runs: the console's level meters (CONTRACT §9).
        public var mics: [MicView] = []

        /// Absent values are written as null, so every key is always there.
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(name, forKey: .name)
            try c.encode(reachable, forKey: .reachable)
            try c.encode(state, forKey: .state)
            try c.encode(pressure, forKey: .pressure)
            try c.encode(clockUncertaintyUs, forKey: .clockUncertaintyUs)
            try c.encode(takeId, forKey: .takeId)
            try c.encode(message, forKey: .message)
            try c.encode(mics, forKey: .mics)
        }
    }
    public struct MicView: Codable, Equatable, Sendable {
        public var mic: String
        public var levelDbfs: Double
        public var error: String?
    }
    public typealias Controls = CameraControls
    public struct CameraControlsView: Codable, Equatable, Sendable {
        public var node: String
        public var camera: String
        public var controls: CameraControls
    }
    public struct CameraView: Codable, Equatable, Sendable {
        public var node: String
        public var camera: String
        public var width: Int
        public var height: Int
        public var fps: Int
        public var controls: Controls
        public var drops: Int64
        public var phaseErrorUs: Int64?

        /// Absent values are written as null, so every key is always there.
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(node, forKey: .node)
            try c.encode(camera, forKey: .camera)
            try c.encode(width, forKey: .width)
            try c.encode(height, forKey: .height)
            try c.encode(fps, forKey: .fps)
            try c.encode(controls, forKey: .controls)
            try c.encode(drops, forKey: .drops)
            try c.encode(phaseErrorUs, forKey: .phaseErrorUs)
        }
    }
    public struct RigView: Codable, Equatable, Sendable {
        public var nodes: [NodeView]
        public var cameras: [CameraView]
    }
    public struct TileView: Codable, Equatable, Sendable {
        public var node: String
        public var camera: String
        public var group: Int64?
        public var centerUs: Int64?
        public var image: String?
        public var missing: Bool
        public var phaseErrorUs: Int64?
        public var drops: Int64

        /// Absent values are written as null, so every key is always there.
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(node, forKey: .node)
            try c.encode(camera, forKey: .camera)
            try c.encode(group, forKey: .group)
            try c.encode(centerUs, forKey: .centerUs)
            try c.encode(image, forKey: .image)
            try c.encode(missing, forKey: .missing)
            try c.encode(phaseErrorUs, forKey: .phaseErrorUs)
            try c.encode(drops, forKey: .drops)
        }
    }
    public struct MultiviewView: Codable, Equatable, Sendable {
        public var group: Int64
        public var centerUs: Int64
        public var complete: Bool
        public var takeId: String?
        public var tiles: [TileView]

        /// Absent values are written as null, so every key is always there.
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(group, forKey: .group)
            try c.encode(centerUs, forKey: .centerUs)
            try c.encode(complete, forKey: .complete)
            try c.encode(takeId, forKey: .takeId)
            try c.encode(tiles, forKey: .tiles)
        }
    }
    public struct TakeView: Codable, Equatable, Sendable {
        public var takeId: String?
        public var name: String
        public var state: String
        public var seconds: Double?
        public var elapsedS: Double
        public var message: String?
        public var report: String?

        /// Absent values are written as null, so every key is always there.
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(takeId, forKey: .takeId)
            try c.encode(name, forKey: .name)
            try c.encode(state, forKey: .state)
            try c.encode(seconds, forKey: .seconds)
            try c.encode(elapsedS, forKey: .elapsedS)
            try c.encode(message, forKey: .message)
            try c.encode(report, forKey: .report)
        }
    }
    public struct TakeEntry: Codable, Equatable, Sendable {
        public var takeId: String
        public var name: String
        public var status: String
        public var started: String
        public var report: String?

        /// Absent values are written as null, so every key is always there.
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(takeId, forKey: .takeId)
            try c.encode(name, forKey: .name)
            try c.encode(status, forKey: .status)
            try c.encode(started, forKey: .started)
            try c.encode(report, forKey: .report)
        }
    }
    public struct EventView: Codable, Equatable, Sendable {
        public var time: String
        public var kind: String
        public var node: String?
        public var camera: String?
        public var text: String

        /// Absent values are written as null, so every key is always there.
        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(time, forKey: .time)
            try c.encode(kind, forKey: .kind)
            try c.encode(node, forKey: .node)
            try c.encode(camera, forKey: .camera)
            try c.encode(text, forKey: .text)
        }
    }
    public enum Message: Sendable {
        case rig(RigView)
        case multiview(MultiviewView)
        case take(TakeView?)
        case takes([TakeEntry])
        case event(EventView)
    }

    /// A request the console cannot carry out, with the HTTP status that says why.
    public struct Refusal: Error, Sendable {
        public enum Kind: Sendable { case conflict, invalid, notFound }
        public var kind: Kind
        public var sentence: String
        public init(_ kind: Kind, _ sentence: String) { self.kind = kind; self.sentence = sentence }
    }

    // MARK: State

    public let spec: RigSpec
    public let template: TakeRequest
    public let preview: PreviewSettings
    private let logger: Logger
    private let context = ZMQContext()
    private let startedAt = MonotonicClock.now()
    /// The idle preview's grid: one for the console's life, at the rig's frame rate.
    private let previewGrid: FrameGrid

    private struct Node {
        var spec: RigSpec.Node
        var link: NodeLink?
        var name: String
        var cameras: [CameraSettings] = []
        var view: NodeView
        var previewSubscribed = false
        var cameraProgress: [String: (drops: Int64, phase: Int64?)] = [:]
        /// Each camera's controls as its node last reported them applied.
        var controls: [String: CameraControls] = [:]
        /// What `/metrics` says of this node, from its last status (nil: never reached).
        var metrics: NodeMetricsSample?
    }
    private struct State {
        var nodes: [Node] = []
        var assembler = MultiviewAssembler(cameras: [], patienceGroups: 3)
        var tileTake = ""
        var images: [String: [UInt8]] = [:]
        var imageOrder: [String] = []
        var newestComplete: MultiviewView?
        var lastTiles: [CameraKey: PreviewTile] = [:]
        var take: TakeView?
        var session: TakeSession?
        var subscribers: [UInt64: AsyncStream<Message>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        var lastRig: RigView?
        var lastTakes: [TakeEntry] = []
        /// The newest events, replayed to a viewer that connects later.
        var recentEvents: [EventView] = []
        var tracker: ClockTracker?
        var trackerTask: Task<Void, Never>?
        var trackedNodes: [String] = []
    }
    private let state = Mutex(State())
    private let receiver: PreviewReceiver
    /// Tiles kept for `/preview/...` (64 groups' worth per camera at most).
    public static let keptImagesPerCamera = 64

    public init(spec: RigSpec, template: TakeRequest, preview: PreviewSettings = .standard, logger: Logger) {
        self.spec = spec
        self.template = template
        self.preview = preview
        self.logger = logger
        previewGrid = FrameGrid(t0: MonotonicClock.now(), periodMicroseconds: FrameGrid.period(fps: template.fps))
        let box = WeakBox()
        receiver = PreviewReceiver(logger: logger) { box.rig?.received($0) }
        box.rig = self
        state.withLock { s in
            s.nodes = spec.nodes.map { n in
                Node(spec: n, link: nil, name: n.name,
                     view: NodeView(name: n.name, reachable: false, state: "unreachable", pressure: "nominal",
                                    clockUncertaintyUs: nil, takeId: nil, message: "not reached yet"))
            }
        }
    }

    /// The receiver's way back to this rig, without a retain cycle.
    private final class WeakBox: Sendable {
        private struct Weak { weak var rig: LiveRig? }
        private let value = Mutex(Weak())
        var rig: LiveRig? {
            get { value.withLock { $0.rig } }
            set { value.withLock { $0.rig = newValue } }
        }
    }

    // MARK: Streams

    /// Every change from now on; a subscriber that does not keep up loses the oldest messages, never slows the rig.
    public func subscribe() -> AsyncStream<Message> {
        let (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: .bufferingNewest(32))
        let id = state.withLock { s -> UInt64 in
            s.nextSubscriber += 1
            s.subscribers[s.nextSubscriber] = continuation
            if let rig = s.lastRig { continuation.yield(.rig(rig)) }
            continuation.yield(.take(s.take))
            continuation.yield(.takes(s.lastTakes))
            for e in s.recentEvents.suffix(24) { continuation.yield(.event(e)) }
            return s.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
        return stream
    }

    private func broadcast(_ message: Message) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for s in subscribers { s.yield(message) }
    }

    private func event(_ kind: String, node: String? = nil, camera: String? = nil, _ text: String) {
        let view = EventView(time: ISO8601DateFormatter().string(from: Date()), kind: kind, node: node, camera: camera, text: text)
        state.withLock { s in
            s.recentEvents.append(view)
            if s.recentEvents.count > 100 { s.recentEvents.removeFirst(s.recentEvents.count - 100) }
        }
        broadcast(.event(view))
    }

    // MARK: Snapshots

    public var rig: RigView { state.withLock { Self.rigView($0) } }
    public var multiview: MultiviewView? { state.withLock { $0.newestComplete } }
    public var take: TakeView? { state.withLock { s in s.take.map { Self.withElapsed($0, session: s.session) } } }
    public var takes: [TakeEntry] { listTakes() }
    /// Every node as the rig's `/metrics` exports it (an unreachable node: up 0, its last counts kept).
    public var metricsSamples: [NodeMetricsSample] {
        state.withLock { s in
            s.nodes.map { n in
                var sample = n.metrics ?? NodeMetricsSample(node: n.name)
                sample.reachable = n.view.reachable
                return sample
            }
        }
    }

    public func image(node: String, camera: String, group: Int64) -> [UInt8]? {
        state.withLock { $0.images["\(node)/\(camera)/\(group)"] }
    }

    private static func rigView(_ s: State) -> RigView {
        RigView(nodes: s.nodes.map(\.view), cameras: s.nodes.flatMap { n in
            n.cameras.map { c in
                let progress = n.cameraProgress[c.camera]
                return CameraView(node: n.name, camera: c.camera, width: c.width, height: c.height, fps: c.fps,
                                  controls: n.controls[c.camera] ?? CameraControls(),
                                  drops: progress?.drops ?? 0, phaseErrorUs: progress?.phase)
            }
        })
    }

    /// A running take's elapsed time counts from group 0 (CONTRACT §6b), not from the click: 0 while it starts,
    /// never past the stop instant (so never past `seconds`).
    private static func withElapsed(_ take: TakeView, session: TakeSession?) -> TakeView {
        var t = take
        if let session, ["starting", "recording", "stopping", "collecting"].contains(t.state) {
            t.elapsedS = session.recordedSeconds(now: MonotonicClock.now()) ?? 0
        }
        return t
    }

    // MARK: Running

    /// Runs until cancelled: reaches the nodes, keeps their status, clocks and preview going.
    public func run() async {
        event("console", "console started for \(spec.nodes.count) node(s); preview \(preview.width) px at \(preview.fps) fps")
        var lastTakes: [TakeEntry] = []
        while !Task.isCancelled {
            let tick = MonotonicClock.now()
            await refreshNodes()
            await keepPreview()
            let rig = state.withLock { s -> RigView? in
                let view = Self.rigView(s)
                guard view != s.lastRig else { return nil }
                s.lastRig = view
                return view
            }
            if let rig { broadcast(.rig(rig)) }
            let takes = listTakes()
            if takes != lastTakes {
                lastTakes = takes
                state.withLock { $0.lastTakes = takes }
                broadcast(.takes(takes))
            }
            if let take = take, take.state == "recording" { broadcast(.take(take)) }
            let spent = MonotonicClock.now() - tick
            try? await Task.sleep(nanoseconds: UInt64(max(100_000, 1_000_000 - spent)) * 1000)
        }
        stopTracker()
        receiver.stop()
        let links = state.withLock { $0.nodes.compactMap(\.link) }
        links.forEach { $0.close() }
    }

    /// Handshake with nodes not reached yet; status from every node reached.
    private func refreshNodes() async {
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
            if node.cameras.isEmpty {
                var hello = Coord_V1_Hello()
                hello.coordinator = ProcessInfo.processInfo.hostName
                let (reply, _) = try await link.request(.hello(hello), timeout: 2, what: "the handshake")
                guard case .helloReply(let wire) = reply.body else { throw CoordError(.failure, "node \(node.name) answered the handshake with something else.") }
                let r: Coord_V1_HelloReply
                do throws(FieldFault) { r = try NodeReply.hello(wire, from: "node \(node.name)") } catch { throw CoordError(error, node: node.name) }
                let settings = cameraSettings(node.spec, reply: r)
                let endpoint = PreviewReceiver.endpoint(published: r.previewEndpoint, control: node.spec.endpoint)
                if let endpoint { receiver.connect(endpoint, keys: spec.linkKeys(for: node.spec)) }
                state.withLock { s in
                    s.nodes[index].cameras = settings
                    s.nodes[index].previewSubscribed = endpoint != nil
                    // Ordinals run through the rig in its order, as a take's do (the stripe carries them).
                    var ordinal = 0
                    for n in s.nodes.indices {
                        for c in s.nodes[n].cameras.indices { s.nodes[n].cameras[c].ordinal = ordinal; ordinal += 1 }
                    }
                    let keys = s.nodes.flatMap { n in n.cameras.map { CameraKey(node: n.name, camera: $0.camera) } }
                    s.assembler.reset(cameras: keys, patienceGroups: 3 * preview.groupStride(framePeriodMicroseconds: previewGrid.periodMicroseconds))
                }
                node.cameras = settings
                event("node-reached", node: node.name, "node \(node.name) reached at \(node.spec.endpoint): \(settings.count) camera(s)\(endpoint == nil ? ", no preview" : "")")
            }
            let (reply, _) = try await link.request(.statusRequest(Coord_V1_StatusRequest()), timeout: 1, what: "status")
            guard case .status(let wire) = reply.body else { return }
            let status: NodeStatus
            do throws(FieldFault) { status = try NodeReply.status(wire, from: "node \(node.name)") } catch { throw CoordError(error, node: node.name) }
            let uncertainty = state.withLock { $0.tracker }?.estimate(node.name)?.uncertaintyMicroseconds
            state.withLock { s in
                let wasReachable = s.nodes[index].view.reachable
                s.nodes[index].view = NodeView(
                    name: node.name, reachable: true, state: status.state.name,
                    pressure: (status.pressure ?? .nominal).name, clockUncertaintyUs: uncertainty.map { ($0 * 10).rounded() / 10 },
                    takeId: status.takeID.isEmpty ? nil : status.takeID,
                    message: !status.detail.isEmpty ? status.detail : (status.pressure ?? .nominal) > .nominal && !status.pressureCause.isEmpty ? status.pressureCause : nil)
                s.nodes[index].view.mics = status.mics.map { MicView(mic: $0.mic, levelDbfs: ($0.levelDBFS * 10).rounded() / 10,
                                                                     error: $0.error.isEmpty ? nil : $0.error) }
                for c in status.cameras {
                    s.nodes[index].cameraProgress[c.camera, default: (0, nil)].drops = c.dropped
                }
                var metrics = NodeMetricsSample(node: node.name)
                metrics.recording = status.state == .recording
                metrics.pressure = status.pressure
                metrics.clockUncertaintyMicroseconds = uncertainty
                metrics.cameras = status.cameras.map {
                    .init(camera: $0.camera, takeID: status.takeID, frames: UInt64(max(0, $0.frames)),
                          dups: UInt64(max(0, $0.dropped)), bytesWritten: $0.bytesWritten,
                          phaseErrorMicroseconds: s.nodes[index].cameraProgress[$0.camera]?.phase.map(Double.init))
                }
                s.nodes[index].metrics = metrics
                if !wasReachable { s.nodes[index].view.message = nil }
            }
        } catch {
            let sentence = "\(error)"
            let changed = state.withLock { s -> Bool in
                let was = s.nodes[index].view.reachable || s.nodes[index].view.message == "not reached yet"
                s.nodes[index].view.reachable = false
                s.nodes[index].view.state = "unreachable"
                s.nodes[index].view.message = sentence
                return was
            }
            if changed { event("node-unreachable", node: node.name, sentence) }
        }
    }

    /// The cameras a node previews: the rig file's list for it (or every camera it has), at the take's size and rate.
    private func cameraSettings(_ node: RigSpec.Node, reply: Coord_V1_HelloReply) -> [CameraSettings] {
        let names = node.cameras?.map(\.name) ?? reply.cameras.map(\.name)
        return names.enumerated().map { index, name in
            let camera = node.cameras?.first { $0.name == name }
            let size = camera?.size.flatMap(RigSpec.parseSize) ?? (template.width, template.height)
            return CameraSettings(camera: name, ordinal: index, width: size.0, height: size.1, fps: template.fps, codec: template.codec)
        }
    }

    /// While no take runs from here: clocks followed, and every idle node's preview renewed with its newest mapping.
    private func keepPreview() async {
        let (busy, nodes) = state.withLock { ($0.session != nil, $0.nodes) }
        guard !busy else { return }
        let reached = nodes.filter { $0.link != nil && !$0.cameras.isEmpty && $0.view.reachable }
        ensureTracker(reached)
        guard preview.isOn else { return }
        guard let tracker = state.withLock({ $0.tracker }) else { return }
        await withTaskGroup(of: Void.self) { group in
            for node in reached where node.previewSubscribed && ["idle", "finished", "failed"].contains(node.view.state) {
                guard let mapping = tracker.estimate(node.name, ahead: 1_000_000), mapping.uncertaintyMicroseconds < 1000 else { continue }
                group.addTask {
                    var m = Coord_V1_StartPreview()
                    m.cameras = node.cameras.map(\.wire)
                    m.clock = mapping.wire
                    m.t0Us = self.previewGrid.t0
                    m.framePeriodUs = UInt64(self.previewGrid.periodMicroseconds)
                    m.preview.width = UInt32(self.preview.width)
                    m.preview.fps = UInt32(self.preview.fps)
                    m.leaseMs = 5000
                    do {
                        _ = try await node.link!.request(.startPreview(m), timeout: 4, what: "the preview")
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
        let task = Task { await tracker.run() }
        state.withLock { s in
            s.tracker = tracker
            s.trackerTask = task
            s.trackedNodes = names
        }
    }

    private func stopTracker() {
        let (tracker, task) = state.withLock { s in
            defer { s.tracker = nil; s.trackerTask = nil; s.trackedNodes = [] }
            return (s.tracker, s.trackerTask)
        }
        tracker?.stop()
        task?.cancel()
    }

    // MARK: Tiles

    private func received(_ r: PreviewReceiver.Received) {
        let sets: [MultiviewView] = state.withLock { s in
            if r.takeID != s.tileTake {
                // A take's grid numbers its groups afresh: sets never mix the idle grid's tiles with a take's.
                s.tileTake = r.takeID
                s.assembler.restartGroups()
            }
            let key = "\(r.tile.key)/\(r.tile.group)"
            s.images[key] = r.jpeg
            s.imageOrder.append(key)
            let limit = Self.keptImagesPerCamera * max(1, s.assembler.cameras.count)
            if s.imageOrder.count > limit {
                for old in s.imageOrder.prefix(s.imageOrder.count - limit) { s.images[old] = nil }
                s.imageOrder.removeFirst(s.imageOrder.count - limit)
            }
            if let i = s.nodes.firstIndex(where: { $0.name == r.tile.key.node }) {
                s.nodes[i].cameraProgress[r.tile.key.camera, default: (0, nil)].phase = r.tile.phaseErrorMicroseconds
            }
            s.lastTiles[r.tile.key] = r.tile
            return s.assembler.add(r.tile).map { set in
                let view = Self.view(of: set, takeID: r.takeID, lastTiles: s.lastTiles)
                if set.complete { s.newestComplete = view }
                return view
            }
        }
        for set in sets { broadcast(.multiview(set)) }
    }

    static func view(of set: MultiviewSet, takeID: String, lastTiles: [CameraKey: PreviewTile]) -> MultiviewView {
        MultiviewView(group: set.group, centerUs: set.centerMicroseconds, complete: set.complete,
                      takeId: takeID.isEmpty ? nil : takeID,
                      tiles: set.tiles.map { key, tile in
                          TileView(node: key.node, camera: key.camera, group: tile?.group, centerUs: tile?.centerMicroseconds,
                                   image: tile.map { "preview/\(key.node)/\(key.camera)/\($0.group).jpg" }, missing: tile == nil,
                                   phaseErrorUs: tile?.phaseErrorMicroseconds, drops: tile?.dropped ?? lastTiles[key]?.dropped ?? 0)
                      })
    }

    // MARK: Controls

    /// Sets one camera's controls on its node (at once if the camera is open, else when it opens); the values the
    /// node applied. An unknown camera is `.notFound`; a control it lacks or a value out of range `.invalid`,
    /// with the node's sentence naming camera, control and range.
    public func setControls(node: String, camera: String, _ controls: CameraControls) async throws(Refusal) -> CameraControlsView {
        guard let target = state.withLock({ $0.nodes.first { $0.name == node } }),
              target.cameras.contains(where: { $0.camera == camera }) else {
            throw Refusal(.notFound, "the rig has no camera \(node)/\(camera).")
        }
        guard let link = target.link, target.view.reachable else { throw Refusal(.conflict, "node \(node) is unreachable: \(target.view.message ?? "no answer").") }
        if let problem = Self.basicProblem(controls, camera: "\(node)/\(camera)") { throw Refusal(.invalid, problem) }
        var m = Coord_V1_SetControls()
        m.camera = camera
        m.controls = controls.wire
        let applied: CameraControls
        do {
            let (reply, _) = try await link.request(.setControls(m), timeout: 3, what: "the controls")
            guard case .controlsApplied(let r) = reply.body else { throw Refusal(.conflict, "node \(node) answered the controls with something else.") }
            do throws(FieldFault) { applied = try NodeReply.controlsApplied(r, from: "node \(node)") } catch { throw Refusal(.conflict, error.sentence) }
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            let sentence = "\(error)"
            throw Refusal(sentence.contains("refused") ? .invalid : .conflict, sentence)
        }
        state.withLock { s in
            if let i = s.nodes.firstIndex(where: { $0.name == node }) { s.nodes[i].controls[camera] = applied }
        }
        event("controls", node: node, camera: camera, "camera \(node)/\(camera): \(Self.describe(applied))")
        let rig = self.rig
        state.withLock { $0.lastRig = rig }
        broadcast(.rig(rig))
        return CameraControlsView(node: node, camera: camera, controls: applied)
    }

    /// "Apply to all": the same controls on every camera of the rig, in parallel. The cameras that took them, and
    /// one sentence for each that did not.
    public func setControlsEverywhere(_ controls: CameraControls) async -> (applied: [CameraControlsView], refused: [String]) {
        let cameras = state.withLock { $0.nodes.flatMap { n in n.cameras.map { (n.name, $0.camera) } } }
        return await withTaskGroup(of: Result<CameraControlsView, Refusal>.self) { group in
            for (node, camera) in cameras {
                group.addTask {
                    do throws(Refusal) { return .success(try await self.setControls(node: node, camera: camera, controls)) } catch { return .failure(error) }
                }
            }
            var applied: [CameraControlsView] = [], refused: [String] = []
            for await result in group {
                switch result {
                case .success(let v): applied.append(v)
                case .failure(let r): refused.append(r.sentence)
                }
            }
            return (applied.sorted { ($0.node, $0.camera) < ($1.node, $1.camera) }, refused.sorted())
        }
    }

    /// The controls set here, as the `nodes:` part of a rig file (each camera's `controls:`), to paste into the
    /// rig file so every take starts with them.
    public var controlsYAML: String {
        let nodes = state.withLock { $0.nodes }
        var lines = ["# Camera controls from coord console, \(ISO8601DateFormatter().string(from: Date())).",
                     "# Paste each camera's controls into the rig file's nodes[].cameras[] entries.", "nodes:"]
        for node in nodes where !node.cameras.isEmpty {
            lines.append("  - name: \(node.name)")
            lines.append("    endpoint: \(node.spec.endpoint)")
            lines.append("    cameras:")
            for camera in node.cameras {
                lines.append("      - name: \(camera.camera)")
                let c = node.controls[camera.camera] ?? CameraControls()
                var parts: [String] = []
                if let v = c.exposureMicroseconds { parts.append("exposure_us: \(v)") }
                if let v = c.gainDecibels { parts.append("gain_db: \(v)") }
                if let v = c.whiteBalanceKelvin { parts.append("white_balance_k: \(v)") }
                if let v = c.focus { parts.append("focus: \(v)") }
                if !parts.isEmpty { lines.append("        controls: {\(parts.joined(separator: ", "))}") }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// What no camera can take (the node checks each camera's own ranges).
    public static func basicProblem(_ c: CameraControls, camera: String) -> String? {
        if c.isEmpty { return "no control given for camera \(camera): set any of exposure_us, gain_db, white_balance_k, focus." }
        if let e = c.exposureMicroseconds, e <= 0 { return "camera \(camera): exposure_us \(e) must be positive." }
        for v in [c.gainDecibels, c.focus].compactMap({ $0 }) where !v.isFinite { return "camera \(camera): \(v) is not a number a control can take." }
        return nil
    }

    static func describe(_ c: CameraControls) -> String {
        var parts: [String] = []
        if let v = c.exposureMicroseconds { parts.append("exposure \(v) µs") }
        if let v = c.gainDecibels { parts.append("gain \(v)") }
        if let v = c.whiteBalanceKelvin { parts.append("white balance \(v) K") }
        if let v = c.focus { parts.append("focus \(v)") }
        return parts.joined(separator: ", ")
    }

    // MARK: Takes

    /// Starts a take as `coord start-take` does (the rig file's settings), with preview tiles from its cameras.
    public func startTake(name: String?, seconds: Double?) throws(Refusal) -> TakeView {
        var request = template
        request.name = name ?? template.name
        if let seconds { request.seconds = seconds }
        request.untilStopped = seconds == nil
        if request.untilStopped { request.seconds = TakeRequest.longestSeconds }
        request.preview = preview
        if let problem = request.problem() { throw Refusal(.invalid, problem) }
        let console = Console(quiet: false) { [weak self] line in self?.event("take", line.trimmingCharacters(in: .whitespaces)) }
        let session = TakeSession(endpoints: spec.nodes.map(\.endpoint),
                                  names: Dictionary(spec.nodes.map { ($0.endpoint, $0.name) }) { first, _ in first },
                                  keys: spec.linkKeysByEndpoint, request: request, console: console, logger: logger)
        let view = TakeView(takeId: nil, name: request.name, state: "starting", seconds: seconds, elapsedS: 0, message: nil, report: nil)
        let accepted = state.withLock { s -> Bool in
            guard s.session == nil else { return false }
            s.session = session
            s.take = view
            return true
        }
        guard accepted else { throw Refusal(.conflict, "a take is already running from this console; stop it first.") }
        // The take's own clock tracking takes over; two trackers would probe every node twice.
        stopTracker()
        broadcast(.take(view))
        event("take-start", "take \(request.name) starting (\(seconds.map { "\($0) s" } ?? "until stopped"))")
        Task.detached { [self] in
            let recording = Task { [self] in
                // The take's state follows the session: recording once it says so.
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 200_000_000)
                    let recording = session.isRecording
                    let changed = state.withLock { s -> TakeView? in
                        guard var t = s.take, recording, t.state == "starting" else { return nil }
                        t.state = "recording"
                        t.takeId = session.takeID
                        s.take = t
                        return t
                    }
                    if let changed { broadcast(.take(changed)) }
                }
            }
            defer { recording.cancel() }
            var final = view
            do {
                let outcome = try await session.run()
                final.takeId = outcome.manifest.takeID
                final.state = outcome.manifest.status == .partial ? "partial" : "done"
                final.message = outcome.manifest.status == .partial ? "the take is partial: \(outcome.manifest.partialCause)." : nil
                final.report = "takes/\(outcome.manifest.takeID)/sync-report.html"
                // What was recorded: the take's groups on its grid.
                final.elapsedS = Double(outcome.manifest.groups) * Double(outcome.manifest.framePeriodMicroseconds) / 1e6
            } catch {
                final.state = "failed"
                final.message = "\(error)"
            }
            recording.cancel()
            if final.state == "failed" { final.elapsedS = session.recordedSeconds(now: MonotonicClock.now()) ?? 0 }
            let finished = state.withLock { s -> TakeView in
                s.take = final
                s.session = nil
                return final
            }
            broadcast(.take(finished))
            event(finished.state == "done" ? "take-done" : "take-\(finished.state)",
                  "take \(finished.takeId ?? finished.name): \(finished.state)\(finished.message.map { "; \($0)" } ?? "")")
        }
        return view
    }

    /// Stops the running take on one group, as `coord stop-take` does.
    public func stopTake() throws(Refusal) -> TakeView {
        let (session, take) = state.withLock { ($0.session, $0.take) }
        guard let session, var take else { throw Refusal(.conflict, "no take is running from this console.") }
        guard session.requestStop() else { throw Refusal(.conflict, "the take is not recording yet (it is \(take.state)); stop it once it records.") }
        take.state = "stopping"
        let view = take
        state.withLock { $0.take = view }
        broadcast(.take(view))
        event("operator-stop", "stop requested from the console")
        return view
    }

    /// The take directories under the takes directory, newest first by group 0's wall-clock time. The take this
    /// console is recording is listed as what it is now (its manifest says "partial" until it ends, CONTRACT §6b).
    private func listTakes() -> [TakeEntry] {
        let root = template.takesDirectory
        let running = state.withLock { s -> (id: String, state: String)? in
            guard s.session != nil, let take = s.take, let id = take.takeId ?? s.session?.takeID else { return nil }
            return (id, take.state)
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        var entries: [(String, TakeEntry)] = []
        for name in names where RigName.isValid(name) {
            let directory = root.appendingPathComponent(name)
            guard let data = try? Data(contentsOf: directory.appendingPathComponent("manifest.json")),
                  let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { continue }
            let modified = (try? FileManager.default.attributesOfItem(atPath: directory.path)[.modificationDate] as? Date) ?? nil
            // RFC 3339 in UTC sorts as text; a manifest without it falls back to the folder's time.
            let started = json["start_wallclock"] as? String ?? WallClock.rfc3339(modified ?? Date(timeIntervalSince1970: 0))
            let hasReport = FileManager.default.fileExists(atPath: directory.appendingPathComponent("sync-report.html").path)
            let status = name == running?.id ? running!.state : json["status"] as? String ?? "unknown"
            entries.append((started, TakeEntry(takeId: name, name: json["name"] as? String ?? name, status: status, started: started,
                                               report: hasReport && name != running?.id ? "takes/\(name)/sync-report.html" : nil)))
        }
        return entries.sorted { ($0.0, $0.1.takeId) > ($1.0, $1.1.takeId) }.map(\.1)
    }
}
