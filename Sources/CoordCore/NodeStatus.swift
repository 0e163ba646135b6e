/// What a node says it is doing, in the rig's words (converted from the wire's Status at the edge).
public struct NodeStatus: Sendable, Equatable {
    public struct Camera: Sendable, Equatable {
        public var camera: String
        /// Frames written so far (dup included), groups filled with a dup, the last group written.
        public var frames: Int64 = 0
        public var dropped: Int64 = 0
        public var lastGroup: Int64 = -1
        public var finished = false
        public var error = ""
        public var timestampNoiseMicroseconds: Double = 0
        public var centerUncertaintyMicroseconds: Double = 0
        public var phaseRestarts = 0
        /// Groups filled on purpose (a frame-rate cap or a slow-down), not counted in `dropped`.
        public var held: Int64 = 0
        public var recordEvery = 1
        public var disabled = false
        public var bytesWritten: UInt64 = 0
        /// A triggered camera's output and its pulses' timing (CONTRACT §17); nil for a free-running camera.
        public var trigger: TriggerFigures?
        /// A triggered camera's frames no pulse exposed (dropped, not written).
        public var extraFrames: Int64 = 0
        public init(camera: String) { self.camera = camera }
    }

    /// One microphone's sound so far (CONTRACT §9).
    public struct Mic: Sendable, Equatable {
        public var mic: String
        public var frames: Int64 = 0
        public var sampleRate = 48_000
        public var channels = 1
        public var startMicroseconds: Int64 = 0
        public var offsetP50Microseconds: Double = 0
        public var offsetP99Microseconds: Double = 0
        public var rateErrorPPM: Double = 0
        public var finished = false
        public var error = ""
        public var levelDBFS: Double = -100
        public var bytesWritten: UInt64 = 0
        public init(mic: String) { self.mic = mic }
        /// It ended before its first sample (lost before group 0): the node keeps no file for it.
        public var recordedNothing: Bool { finished && frames == 0 && !error.isEmpty }
    }

    public var node: String
    public var state: TakeConductor.NodeState
    public var mics: [Mic] = []
    public var takeID: String
    public var cameras: [Camera]
    /// Why the node failed, when it did.
    public var detail: String = ""
    /// nil when the node did not say.
    public var pressure: PressureLevel?
    public var pressureCause: String = ""
    /// What the node did on its own during the take, oldest first (each names the node).
    public var events: [TakeEvent] = []
    /// While a take is armed or recording: its grid, the node's estimate of the rig clock now, and the group the
    /// take stops before (0: none placed).
    public var grid: FrameGrid?
    public var rigNowMicroseconds: Int64 = 0
    public var stopGroup: Int64 = 0
    /// While a take is armed or recording: its clock mapping's one-sigma uncertainty (µs); nil otherwise.
    public var clockUncertaintyMicroseconds: Double?
    /// Each camera's controls as now in force (read back from the camera while it is open), by camera name.
    public var controls: [String: CameraControls] = [:]

    public init(node: String, state: TakeConductor.NodeState, takeID: String = "", cameras: [Camera] = []) {
        self.node = node; self.state = state; self.takeID = takeID; self.cameras = cameras
    }

    /// What the take's conductor needs of it.
    public var report: TakeConductor.NodeReport {
        TakeConductor.NodeReport(takeID: takeID, state: state, stopGroup: stopGroup, detail: detail,
                                 cameraErrors: cameras.map { ($0.camera, $0.error) },
                                 disabledCameras: cameras.filter(\.disabled).map(\.camera),
                                 lastGroup: cameras.map(\.lastGroup).max() ?? -1,
                                 camerasFinished: !cameras.isEmpty && cameras.allSatisfy(\.finished))
    }
}

extension NodeState {
    /// The state as `coord status` and the console show it.
    public var name: String { rawValue }
}
