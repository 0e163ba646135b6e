import CoordCore

/// One request a node serves, in the core's values: what `Wire.request` makes of an envelope once every field
/// of it is checked. The node agent handles these only; no generated type reaches it past the edge.
public enum NodeRequest: Equatable, Sendable {
    case hello(coordinator: String)
    /// `sentLocal`: the coordinator's t1, echoed back.
    case clockProbe(sentLocal: Int64)
    case configure(takeID: String, cameras: [CameraSettings])
    case arm(Arm)
    case clockUpdate(takeID: String, clock: ClockMapping)
    /// `stopGroup` 0: until a StopAt.
    case startAt(takeID: String, startGroup: Int64, stopGroup: Int64)
    case stopAt(takeID: String, stopGroup: Int64)
    case adjustCamera(takeID: String, camera: String, adjustment: NodeTake.Adjustment, reason: String)
    case abort(takeID: String, reason: String)
    case status
    case listFiles(takeID: String)
    case fetchChunk(Fetch)
    case confirmCollected(takeID: String, files: [TakeManifest.File], keep: Bool)
    case startPreview(Preview)
    case setControls(camera: String, controls: CameraControls)
    /// The console's Snap: keep these groups' frames of every previewing camera as lossless stills.
    case keepStills(shotID: String, groups: [Int64], format: SnapPlan.Format, modes: [StillModeSwitch.Mode] = [])
    /// The operator's free-running trigger train on the preview's grid, on or off.
    case previewTrain(on: Bool)

    /// An Arm: the take's grid (group 0 at `grid.t0`, rig timebase) and this node's clock mapping.
    public struct Arm: Equatable, Sendable {
        public var takeID: String
        public var grid: FrameGrid
        public var clock: ClockMapping
        /// Group 0's timecode, HH:MM:SS:FF at the grid's rate; empty: none.
        public var timecode: String
        /// nil: the Arm carried no preview; a width of 0: preview off for this take.
        public var preview: PreviewSettings?
        public init(takeID: String, grid: FrameGrid, clock: ClockMapping, timecode: String = "", preview: PreviewSettings? = nil) {
            self.takeID = takeID; self.grid = grid; self.clock = clock; self.timecode = timecode; self.preview = preview
        }
    }

    /// `length` bytes (1…`Wire.maxChunkBytes`) of `path` (`<node>/<file>`) from `offset`; `rawFrame`: sent as
    /// their own frame after the reply.
    public struct Fetch: Equatable, Sendable {
        public var takeID: String
        public var path: String
        public var offset: UInt64
        public var length: Int
        public var rawFrame: Bool
        public init(takeID: String, path: String, offset: UInt64, length: Int, rawFrame: Bool) {
            self.takeID = takeID; self.path = path; self.offset = offset; self.length = length; self.rawFrame = rawFrame
        }
    }

    /// Preview tiles, while no take holds the cameras, for `lease` unless renewed.
    public struct Preview: Equatable, Sendable {
        public var cameras: [CameraSettings]
        public var grid: FrameGrid
        public var clock: ClockMapping
        public var settings: PreviewSettings
        public var lease: Duration
        public init(cameras: [CameraSettings], grid: FrameGrid, clock: ClockMapping, settings: PreviewSettings, lease: Duration) {
            self.cameras = cameras; self.grid = grid; self.clock = clock; self.settings = settings; self.lease = lease
        }
    }

    /// The request's kind as the protocol names it (logs group refusals by it).
    public var kind: String {
        switch self {
        case .hello: "hello"
        case .clockProbe: "clockProbe"
        case .configure: "configure"
        case .arm: "arm"
        case .clockUpdate: "clockUpdate"
        case .startAt: "startAt"
        case .stopAt: "stopAt"
        case .adjustCamera: "adjustCamera"
        case .abort: "abort"
        case .status: "statusRequest"
        case .listFiles: "listFiles"
        case .fetchChunk: "fetchChunk"
        case .confirmCollected: "confirmCollected"
        case .startPreview: "startPreview"
        case .setControls: "setControls"
        case .keepStills: "keepStills"
        case .previewTrain: "previewTrain"
        }
    }
}

extension Wire {
    /// The request an envelope carries, every field checked once (version, names, ranges, the fields a request
    /// cannot do without); or one sentence naming the bad field, as the NodeFailure the node replies with.
    public static func request(_ envelope: Envelope) throws(NodeFailure) -> NodeRequest {
        try checkVersion(envelope)
        try checkNames(envelope)
        try checkFields(envelope)
        switch envelope.body {
        case .hello(let m):
            return .hello(coordinator: m.coordinator)
        case .clockProbe(let m):
            return .clockProbe(sentLocal: m.t1Us)
        case .configure(let m):
            return .configure(takeID: m.takeID, cameras: try m.cameras.map { c throws(NodeFailure) in try CameraSettings(wire: c) })
        case .arm(let m):
            // The period's range is checked above; a missing mapping is not.
            guard m.hasClock else {
                throw NodeFailure(.badConfig, "arm for take \(m.takeID) needs a frame period and a clock mapping.")
            }
            let grid = try Wire.grid(t0: m.t0Us, period: m.framePeriodUs, num: m.fpsNum, den: m.fpsDen, "Arm.fps_num/fps_den")
            // Group 0's timecode goes into every file's tags; refuse one the node would write wrongly rather than drop it.
            let rate = grid.rate
            if !m.timecode.isEmpty, Timecode(m.timecode, rate: rate) == nil {
                throw NodeFailure(.badConfig, "arm for take \(m.takeID) has the timecode \"\(m.timecode.prefix(64))\", which is not \(rate.isDropFrame ? "HH:MM:SS;FF" : "HH:MM:SS:FF") at \(rate) fps.")
            }
            let preview = m.hasPreview ? PreviewSettings(width: Int(m.preview.width), fps: Int(m.preview.fps)) : nil
            return .arm(.init(takeID: m.takeID, grid: grid, clock: ClockMapping(wire: m.clock), timecode: m.timecode, preview: preview))
        case .clockUpdate(let m):
            guard m.hasClock else { throw NodeFailure(.badConfig, "clock update for take \(m.takeID) carries no mapping.") }
            return .clockUpdate(takeID: m.takeID, clock: ClockMapping(wire: m.clock))
        case .startAt(let m):
            return .startAt(takeID: m.takeID, startGroup: m.startGroup, stopGroup: m.stopGroup)
        case .stopAt(let m):
            return .stopAt(takeID: m.takeID, stopGroup: m.stopGroup)
        case .adjustCamera(let m):
            let adjustment: NodeTake.Adjustment
            switch m.action {
            case .slow: adjustment = .slow(every: Int(m.recordEvery), from: m.fromGroup)
            case .disable: adjustment = .disable(from: m.fromGroup)
            // The take refuses it in its own words (it knows the camera and the take).
            case .unspecified, .UNRECOGNIZED: adjustment = .unknown
            }
            return .adjustCamera(takeID: m.takeID, camera: m.camera, adjustment: adjustment, reason: m.reason)
        case .abort(let m):
            return .abort(takeID: m.takeID, reason: m.reason)
        case .statusRequest:
            return .status
        case .listFiles(let m):
            return .listFiles(takeID: m.takeID)
        case .fetchChunk(let m):
            guard m.length > 0, m.length <= maxChunkBytes else {
                throw NodeFailure(.badConfig, "chunk length \(m.length) must be between 1 and \(maxChunkBytes) bytes.")
            }
            return .fetchChunk(.init(takeID: m.takeID, path: m.path, offset: m.offset, length: Int(m.length), rawFrame: m.rawFrame))
        case .confirmCollected(let m):
            return .confirmCollected(takeID: m.takeID, files: m.files.map(TakeManifest.File.init(wire:)), keep: m.keep)
        case .startPreview(let m):
            guard !m.cameras.isEmpty else { throw NodeFailure(.badConfig, "a preview needs at least one camera.") }
            guard m.hasClock else { throw NodeFailure(.badConfig, "a preview needs a frame period and a clock mapping.") }
            return .startPreview(.init(cameras: try m.cameras.map { c throws(NodeFailure) in try CameraSettings(wire: c) },
                                       grid: try Wire.grid(t0: m.t0Us, period: m.framePeriodUs, num: m.fpsNum, den: m.fpsDen, "StartPreview.fps_num/fps_den"),
                                       clock: ClockMapping(wire: m.clock),
                                       settings: PreviewSettings(width: Int(m.preview.width), fps: Int(m.preview.fps)),
                                       lease: .milliseconds(m.leaseMs)))
        case .setControls(let m):
            return .setControls(camera: m.camera, controls: CameraControls(wire: m.controls))
        case .previewTrain(let m):
            return .previewTrain(on: m.on)
        case .keepStills(let m):
            return .keepStills(shotID: m.shotID, groups: m.groups, format: try stillsFormat(m.format, shot: m.shotID),
                               modes: m.modes.map { .init(camera: $0.camera, width: Int($0.width), height: Int($0.height), recordEvery: Int($0.recordEvery)) })
        case .helloReply, .armed, .status, .clockProbeReply, .fileList, .chunk, .ack, .error, .previewFrame, .controlsApplied:
            throw NodeFailure(.unknownMessage, "a node does not accept replies as requests.")
        case .none:
            throw NodeFailure(.unknownMessage, "the message carries no request this node knows (protocol version \(protocolVersion)).")
        }
    }
}
