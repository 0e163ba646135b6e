import CoordCore

// What the console shows: snapshots of the live rig, in the rig's words. The console turns them into the types
// generated from its OpenAPI document (Sources/ConsoleServer/openapi.yaml), which is where their JSON is described.
extension LiveRig {
    /// A node as the console shows it: what its status says it does, or unreachable.
    public enum NodeState: String, Sendable, Equatable, CaseIterable {
        case idle, configured, armed, recording, finished, failed, unreachable

        init(_ state: TakeConductor.NodeState) {
            switch state {
            case .idle: self = .idle
            case .configured: self = .configured
            case .armed: self = .armed
            case .recording: self = .recording
            case .finished: self = .finished
            case .failed: self = .failed
            }
        }

        /// A node the idle preview may be renewed on.
        var previews: Bool { [.idle, .finished, .failed].contains(self) }
    }

    public typealias TakeState = LiveView.TakeState
    public typealias TakeView = LiveView.TakeView
    public typealias Refusal = LiveView.Refusal

    public struct NodeView: Equatable, Sendable {
        public var name: String
        public var reachable: Bool
        public var state: NodeState
        public var pressure: PressureLevel
        public var clockUncertaintyUs: Double?
        public var takeId: String?
        public var message: String?
        /// The node's microphones while a take runs: the console's level meters (CONTRACT §9).
        public var mics: [MicView] = []
        /// Whole seconds since the node last answered (0 while it answers, nil before it ever did).
        public var lastHeardS: Double?
        /// Free bytes on its staging disk at its last handshake.
        public var diskFreeBytes: Int64?
        /// Seconds it can record on them at the rate its newest take wrote (nil: not measured yet).
        public var recordingLeftS: Double?
    }
    public struct MicView: Equatable, Sendable {
        public var mic: String
        public var levelDbfs: Double
        public var error: String?
    }
    public typealias Controls = CameraControls
    public struct CameraControlsView: Equatable, Sendable {
        public var node: String
        public var camera: String
        public var controls: CameraControls
        /// The first preview group whose pictures were exposed wholly after the node applied the change (a camera
        /// that takes controls at once; a V4L2 driver may show them a frame or two later).
        public var inForceFromGroup: Int64
    }
    public struct CameraView: Equatable, Sendable {
        public var node: String
        public var camera: String
        public var width: Int
        public var height: Int
        public var fps: Int
        /// In force now, as the node last reported them.
        public var controls: Controls
        /// What the next take from this console sets as it opens the camera (a control left out stays as it is):
        /// shown so a value the take will change is not a surprise (a console restarted since the operator set it).
        public var takeControls: Controls
        public var drops: Int64
        public var phaseErrorUs: Int64?
    }
    public struct RigView: Equatable, Sendable {
        public var nodes: [NodeView]
        public var cameras: [CameraView]
        /// The console was started with a rig file it can save the controls into.
        public var rigFile = false
        /// The operator's preview trigger train: asked for, and the nodes it runs on.
        public var previewTrain = PreviewTrainView(on: false, nodes: [])
    }
    public struct TileView: Equatable, Sendable {
        public var node: String
        public var camera: String
        public var group: Int64?
        public var centerUs: Int64?
        public var image: String?
        public var missing: Bool
        public var phaseErrorUs: Int64?
        public var drops: Int64
    }
    public struct MultiviewView: Equatable, Sendable {
        public var group: Int64
        public var centerUs: Int64
        public var complete: Bool
        public var takeId: String?
        public var tiles: [TileView]
    }
    public struct TakeEntry: Equatable, Sendable {
        public var takeId: String
        public var name: String
        /// The manifest's status, or the state of the take this console is recording.
        public var status: String
        public var started: String
        public var report: String?
    }
    public struct EventView: Equatable, Sendable {
        public var time: String
        public var kind: String
        public var node: String?
        public var camera: String?
        public var text: String
    }
    public enum Message: Sendable {
        case rig(RigView)
        case multiview(MultiviewView)
        case take(TakeView?)
        case takes([TakeEntry])
        case event(EventView)
    }

}

extension LiveRig {
    /// How long a node's staging disk lasts: its free bytes over the rate its newest take wrote (what the rig's
    /// video settings cost on that node, measured rather than forecast), less what the node keeps free to finalize
    /// its files. Unknown (nil) until the console has seen the node record for a second.
    struct DiskRunway: Sendable {
        private var take = ""
        private var first: (at: Int64, bytes: UInt64)?
        private(set) var bytesPerSecond: Double?

        /// A status: the bytes the node's recorders have written for `takeID` so far, at `now` (µs).
        mutating func seen(takeID: String, recording: Bool, bytes: UInt64, now: Int64) {
            guard recording, !takeID.isEmpty else { return }
            if takeID != take { take = takeID; first = (now, bytes); return }
            guard let first, now - first.at >= 1_000_000, bytes >= first.bytes else { return }
            bytesPerSecond = Double(bytes - first.bytes) / (Double(now - first.at) / 1e6)
        }

        /// Seconds of recording left on `freeBytes` at that rate (whole seconds).
        func secondsLeft(freeBytes: UInt64?) -> Double? {
            guard let freeBytes, let rate = bytesPerSecond, rate > 0 else { return nil }
            let usable = Double(freeBytes) - PressureGauge.diskReserveBytes(writeBytesPerSecond: rate)
            return max(0, (usable / rate).rounded(.down))
        }
    }
}
