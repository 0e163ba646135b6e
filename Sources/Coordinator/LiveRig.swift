import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import Synchronization
import VersionedYAML
import ZeroMQ

/// The rig seen live, for the operator's console: every node's state once a second, the cameras opened for
/// preview while idle (their clocks aligned and their frames steered onto one preview grid), the tiles matched
/// into sets by group, and takes started and stopped as `coord start-take`/`stop-take` do. What the console
/// serves are snapshots of this (LiveRigViews.swift) and a stream of the same as they change.
public final class LiveRig: Sendable {
    // MARK: State

    public let spec: RigSpec
    public let template: TakeRequest
    public let preview: PreviewSettings
    /// The rig file the console was started with (nil: a demo's rig, made by the console).
    public let rigFile: String?
    let logger: Logger
    let context = ZMQContext()
    private let startedAt = MonotonicClock.now()
    /// The idle preview's grid: one for the console's life, at the rig's frame rate.
    let previewGrid: FrameGrid

    struct Node {
        var spec: RigSpec.Node
        var link: NodeLink?
        var name: String
        var cameras: [CameraSettings] = []
        /// What the node's cameras offer, as its last handshake said (a Snap at another size picks from these).
        var capabilities: [CameraCapabilities] = []
        var view: NodeView
        var previewSubscribed = false
        var cameraProgress: [String: (drops: Int64, phase: Int64?)] = [:]
        /// Each camera's centre uncertainty (1σ, µs) as its newest preview tile gave it: what a console Snap states.
        var centerUncertainty: [String: Double] = [:]
        /// Each camera's controls as its node last reported them applied.
        var controls: [String: CameraControls] = [:]
        /// The controls the operator set on each camera from this console (the values the node applied): sent
        /// again to a node that restarts, and what saving writes into the rig file.
        var operatorControls: [String: CameraControls] = [:]
        /// What became of those controls at the node's last restart, shown as its message when the node has none.
        var controlsNote: String?
        /// What `/metrics` says of this node, from its last status (nil: never reached).
        var metrics: NodeMetricsSample?
        /// The node process last shaken hands with (another one: the node restarted), its host and boot, where
        /// it publishes tiles, and when (monotonic µs) the handshake was.
        var instanceID = ""
        var hostID = ""
        var previewEndpoint: String?
        var handshakeAt: Int64 = 0
        var counts = CameraCounts()
        /// The node's last status (nil: not reached at the last try), and when (monotonic µs) it last answered.
        var lastStatus: NodeStatus?
        var lastHeardAt: Int64?
        /// Free bytes on its staging disk at its last handshake.
        var diskFreeBytes: UInt64?
        var runway = DiskRunway()
    }
    /// A node's camera counters over the console's life: its status counts each take from zero, so a take's last
    /// counts are kept when the next take (or none) replaces them, and a take this console ran is topped up to its
    /// manifest's figures; `/metrics` never goes backwards or loses a take.
    struct CameraCounts {
        typealias Camera = NodeMetricsSample.Camera
        var past: [String: Camera] = [:]
        var current: [String: Camera] = [:]
        /// Each camera's take last moved into `past`, as it was then.
        var retired: [String: Camera] = [:]

        /// The cameras' counts in a status now: a camera of another take, or absent, ended its take.
        mutating func seen(_ now: [Camera]) {
            // A take already counted whole (its manifest came first) is not counted again.
            let byName = Dictionary(now.filter { retired[$0.camera]?.takeID != $0.takeID }.map { ($0.camera, $0) }) { first, _ in first }
            for (name, last) in current where byName[name]?.takeID != last.takeID {
                add(last, to: name)
                retired[name] = last
            }
            current = byName
        }

        /// A take's final figures (its manifest): what the statuses seen did not count yet is added.
        mutating func finished(_ final: Camera) {
            let name = final.camera
            if var c = current[name], c.takeID == final.takeID {
                c.frames = max(c.frames, final.frames); c.dups = max(c.dups, final.dups)
                current[name] = c
            } else if let r = retired[name], r.takeID == final.takeID {
                var more = Camera(camera: name, takeID: final.takeID)
                more.frames = final.frames > r.frames ? final.frames - r.frames : 0
                more.dups = final.dups > r.dups ? final.dups - r.dups : 0
                add(more, to: name)
                retired[name]?.frames = max(r.frames, final.frames); retired[name]?.dups = max(r.dups, final.dups)
            } else {
                add(final, to: name)
                retired[name] = final
            }
        }

        private mutating func add(_ c: Camera, to name: String) {
            var p = past[name] ?? Camera(camera: name, takeID: "")
            p.frames += c.frames; p.dups += c.dups; p.drops += c.drops; p.bytesWritten += c.bytesWritten
            past[name] = p
        }

        /// Every camera's totals (over the console's life, so `takeID` is empty).
        var totals: [Camera] {
            Set(past.keys).union(current.keys).sorted().map { name in
                var total = past[name] ?? Camera(camera: name, takeID: "")
                if let c = current[name] {
                    total.frames += c.frames; total.dups += c.dups; total.drops += c.drops; total.bytesWritten += c.bytesWritten
                    total.phaseErrorMicroseconds = c.phaseErrorMicroseconds
                }
                return total
            }
        }
    }
    /// The nodes as the console follows them, the views last sent, and the clock follower.
    struct State {
        var nodes: [Node] = []
        var lastRig: RigView?
        var lastTakes: [TakeEntry] = []
        var tracker: ClockTracker?
        var trackedNodes: [String] = []
        /// The rig file's text as this console loaded it (or last saved it): a file changed since is not saved over.
        var rigFileText: String?
        /// The operator's preview trigger train (LiveRigTrain.swift).
        var previewTrain = PreviewTrain()
    }
    /// The preview: tiles matched into sets by group, the newest complete set, and the JPEGs kept for `/preview`.
    struct Tiles {
        var assembler = MultiviewAssembler(cameras: [], patienceGroups: 3)
        var grid = TileGrid()
        var images: [String: [UInt8]] = [:]
        var imageOrder: [String] = []
        var newestComplete: MultiviewView?
        /// When (monotonic µs) the newest complete set was matched, and each camera's newest tile arrived.
        var newestCompleteAt: Int64 = 0
        var tileArrivedAt: [CameraKey: Int64] = [:]
        var lastTiles: [CameraKey: PreviewTile] = [:]
    }
    /// Who watches the console live, and the newest events replayed to one who connects later.
    struct Viewers {
        var subscribers: [UInt64: AsyncStream<Message>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        var recentEvents: [EventView] = []
    }
    let state = Mutex(State())
    let tileRoom = Mutex(Tiles())
    let viewers = Mutex(Viewers())
    /// The console's take: its pure state, the session of a take started here, and what arming took last.
    struct TakeRoom {
        var state = ConsoleTakeState()
        var session: TakeSession?
        /// What arming took in the previous take from here: the next take's lead grows with it.
        var lastArming: TakeStart.Arming?
    }
    let takeRoom = Mutex(TakeRoom())
    /// The console's Snaps: one at a time, and the nodes' last KeepStills round trip (LiveRigSnap.swift).
    let snapRoom = Mutex(SnapRoom())
    /// Each take directory's listing, by name, kept until its manifest changes.
    let listedTakes = Mutex<[String: ListedTake]>([:])
    let receiver: PreviewReceiver
    /// Takes started from the page, run by `runTakes` as child tasks of the console's take service.
    /// Clock trackers the console starts, run by `run` as child tasks until each is stopped.
    let trackers: AsyncStream<ClockTracker>
    let trackerSink: AsyncStream<ClockTracker>.Continuation
    let takeWork: AsyncStream<TakeWork>
    let takeWorkSink: AsyncStream<TakeWork>.Continuation
    /// Tiles kept for `/preview/...` (64 groups' worth per camera at most).
    public static let keptImagesPerCamera = 64

    public init(spec: RigSpec, template: TakeRequest, preview: PreviewSettings = .standard, rigFile: String? = nil, logger: Logger) {
        self.spec = spec
        self.rigFile = rigFile
        self.template = template
        self.preview = preview
        self.logger = logger
        (takeWork, takeWorkSink) = AsyncStream.makeStream(of: TakeWork.self)
        (trackers, trackerSink) = AsyncStream.makeStream(of: ClockTracker.self)
        previewGrid = FrameGrid(t0: MonotonicClock.now(), rate: template.rate)
        let box = WeakBox()
        receiver = PreviewReceiver(logger: logger) { box.rig?.received($0) }
        box.rig = self
        let loaded = rigFile.flatMap { try? VersionedYAML.read($0, kind: "rig file") }
        state.withLock { s in
            s.rigFileText = loaded
            s.nodes = spec.nodes.map { n in
                Node(spec: n, link: nil, name: n.name,
                     view: NodeView(name: n.name, reachable: false, state: .unreachable, pressure: .nominal,
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
        let take = self.take
        let (rig, takes) = state.withLock { ($0.lastRig, $0.lastTakes) }
        let id = viewers.withLock { v -> UInt64 in
            v.nextSubscriber += 1
            v.subscribers[v.nextSubscriber] = continuation
            if let rig { continuation.yield(.rig(rig)) }
            continuation.yield(.take(take))
            continuation.yield(.takes(takes))
            for e in v.recentEvents.suffix(24) { continuation.yield(.event(e)) }
            return v.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in self?.viewers.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
        return stream
    }

    func broadcast(_ message: Message) {
        let subscribers = viewers.withLock { Array($0.subscribers.values) }
        for s in subscribers { s.yield(message) }
    }

    func event(_ kind: String, node: String? = nil, camera: String? = nil, _ text: String) {
        let view = EventView(time: Date().formatted(.iso8601), kind: kind, node: node, camera: camera, text: text)
        viewers.withLock { v in
            v.recentEvents.append(view)
            if v.recentEvents.count > 100 { v.recentEvents.removeFirst(v.recentEvents.count - 100) }
        }
        broadcast(.event(view))
    }

    // MARK: Snapshots

    public var rig: RigView {
        let now = MonotonicClock.now()
        return state.withLock { Self.rigView($0, template: template, rigFile: rigFile != nil, now: now) }
    }
    public var multiview: MultiviewView? { tileRoom.withLock { $0.newestComplete } }
    /// A complete set older than this is not current (`/api/multiview` says so instead of serving it).
    public static let multiviewFreshSeconds = 3.0
    /// The newest complete set if it is current; else one sentence: how old it is and which cameras are silent.
    public var currentMultiview: Result<MultiviewView, Refusal> {
        let (cameras, unpublished) = state.withLock { s in
            (s.nodes.flatMap { n in n.cameras.map { CameraKey(node: n.name, camera: $0.camera) } },
             s.nodes.filter { !$0.cameras.isEmpty && !$0.previewSubscribed }.map(\.name))
        }
        return tileRoom.withLock { s in
            guard let set = s.newestComplete else {
                // Which cameras hold it back: a node that publishes no preview (its log says why), a camera silent.
                let silent = cameras.filter { s.tileArrivedAt[$0] == nil && !unpublished.contains($0.node) }
                var why = unpublished.map { "node \($0) publishes no preview" }
                if !silent.isEmpty { why.append("no tile yet from \(silent.map(\.description).joined(separator: ", "))") }
                let detail = why.isEmpty ? "" : " (\(why.joined(separator: "; ")))"
                return .failure(Refusal(.notFound, "no complete frame-matched set yet: every camera must deliver a tile of one group\(detail)."))
            }
            let now = MonotonicClock.now()
            let age = Double(now - s.newestCompleteAt) / 1e6
            guard age > Self.multiviewFreshSeconds else { return .success(set) }
            let silent = cameras.filter {
                s.tileArrivedAt[$0].map { Double(now - $0) / 1e6 > Self.multiviewFreshSeconds } ?? true
            }
            let who = silent.isEmpty ? "the cameras' tiles no longer match one group"
                : "no tile from \(silent.map { "\($0.node)/\($0.camera)" }.joined(separator: ", ")) for over \(Int(Self.multiviewFreshSeconds)) s"
            return .failure(Refusal(.unavailable, "the newest complete set (group \(set.group)) is \(String(format: "%.1f", age)) s old: \(who)."))
        }
    }
    /// The take shown, its elapsed time up to date (CONTRACT §6b: from group 0, never past the stop).
    public var take: TakeView? {
        takeRoom.withLock { r in
            Self.shown(r, now: MonotonicClock.now())
        }
    }
    /// The take as shown at `now`: a take started here is starting until its group 0.
    static func shown(_ r: TakeRoom, now: Int64) -> TakeView? {
        r.state.view(now: now, ownRecorded: r.session?.recordedSeconds(now: now), ownGroupZero: r.session?.groupZero)
    }
    public var takes: [TakeEntry] { listTakes() }
    /// Every node as the rig's `/metrics` exports it (an unreachable node: up 0, its last counts kept).
    public var metricsSamples: [NodeMetricsSample] {
        state.withLock { s in
            s.nodes.map { n in
                var sample = n.metrics ?? NodeMetricsSample(node: n.name)
                sample.reachable = n.view.reachable
                sample.cameras = n.counts.totals
                return sample
            }
        }
    }

    public func image(node: String, camera: String, group: Int64) -> [UInt8]? {
        tileRoom.withLock { $0.images["\(node)/\(camera)/\(group)"] }
    }

    private static func rigView(_ s: State, template: TakeRequest, rigFile: Bool, now: Int64) -> RigView {
        RigView(nodes: s.nodes.map { n in
            var view = n.view
            view.lastHeardS = n.lastHeardAt.map { view.reachable ? 0 : Double((now - $0) / 1_000_000) }
            view.diskFreeBytes = n.diskFreeBytes.map { Int64(clamping: $0) }
            view.recordingLeftS = n.runway.secondsLeft(freeBytes: n.diskFreeBytes)
            return view
        }, cameras: s.nodes.flatMap { n in
            n.cameras.map { c in
                let progress = n.cameraProgress[c.camera]
                return CameraView(node: n.name, camera: c.camera, width: c.width, height: c.height, fps: c.fps,
                                  controls: n.controls[c.camera] ?? CameraControls(),
                                  takeControls: takeControls(file: template.camerasByEndpoint[n.spec.endpoint], camera: c.camera,
                                                             setHere: n.operatorControls[c.camera]),
                                  drops: progress?.drops ?? 0, phaseErrorUs: progress?.phase)
            }
        }, rigFile: rigFile, previewTrain: PreviewTrainView(s.previewTrain))
    }

    // MARK: Running

    /// Runs until cancelled: reaches the nodes, keeps their status, clocks and preview going. The clock follower
    /// (whichever tracker follows the reached nodes now) runs as a child task of this one.
    public func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.runClockFollowers() }
            await follow()
            trackerSink.finish()
            stopTracker()
        }
        receiver.stop()
        let links = state.withLock { $0.nodes.compactMap(\.link) }
        links.forEach { $0.close() }
    }

    /// Runs each clock tracker the console starts until it is stopped (another set of nodes, a take of its own).
    private func runClockFollowers() async {
        await withDiscardingTaskGroup { group in
            for await tracker in trackers {
                group.addTask { await tracker.run() }
            }
        }
    }

    private func follow() async {
        event("console", "console started for \(spec.nodes.count) node(s); preview \(preview.width) px at \(preview.fps) fps")
        while !Task.isCancelled {
            let tick = MonotonicClock.now()
            await refreshNodes()
            followAdopted()
            await keepPreview()
            let rig = state.withLock { s -> RigView? in
                let view = Self.rigView(s, template: template, rigFile: rigFile != nil, now: MonotonicClock.now())
                guard view != s.lastRig else { return nil }
                s.lastRig = view
                return view
            }
            if let rig { broadcast(.rig(rig)) }
            // Cheap once the manifests are read: a directory listing and a stat per take (a take another coordinator
            // wrote here appears; a manifest is read again only when it changed).
            takesChanged()
            if let take = take, [.starting, .recording, .stopping].contains(take.state) { broadcast(.take(take)) }
            let spent = MonotonicClock.now() - tick
            try? await Task.sleep(nanoseconds: UInt64(max(100_000, 1_000_000 - spent)) * 1000)
        }
    }

}
