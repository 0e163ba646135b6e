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
/// serves are snapshots of this (LiveRigViews.swift) and a stream of the same as they change.
public final class LiveRig: Sendable {
    // MARK: State

    public let spec: RigSpec
    public let template: TakeRequest
    public let preview: PreviewSettings
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
        var view: NodeView
        var previewSubscribed = false
        var cameraProgress: [String: (drops: Int64, phase: Int64?)] = [:]
        /// Each camera's controls as its node last reported them applied.
        var controls: [String: CameraControls] = [:]
        /// What `/metrics` says of this node, from its last status (nil: never reached).
        var metrics: NodeMetricsSample?
    }
    struct State {
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
    let state = Mutex(State())
    let receiver: PreviewReceiver
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

    func broadcast(_ message: Message) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for s in subscribers { s.yield(message) }
    }

    func event(_ kind: String, node: String? = nil, camera: String? = nil, _ text: String) {
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
    static func withElapsed(_ take: TakeView, session: TakeSession?) -> TakeView {
        var t = take
        if let session, t.state.isRunning {
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
            if let take = take, take.state == .recording { broadcast(.take(take)) }
            let spent = MonotonicClock.now() - tick
            try? await Task.sleep(nanoseconds: UInt64(max(100_000, 1_000_000 - spent)) * 1000)
        }
        stopTracker()
        receiver.stop()
        let links = state.withLock { $0.nodes.compactMap(\.link) }
        links.forEach { $0.close() }
    }

}
