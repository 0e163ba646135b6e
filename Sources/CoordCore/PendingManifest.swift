/// The manifest of a take before collection: every camera with its settings, clock figures and the node's
/// counts, no files yet, status partial until collection verifies every file. Pure: the take session gathers
/// what it knows and this decides what the manifest says.
public struct PendingManifest: Sendable {
    /// One recording node as planned.
    public struct Node: Sendable {
        public var name: String
        public var cameras: [CameraSettings]
        /// The node's clock figures over the take (from group 0 to the last group).
        public var clock: TakeManifest.ClockFigures
        public init(name: String, cameras: [CameraSettings], clock: TakeManifest.ClockFigures) {
            self.name = name; self.cameras = cameras; self.clock = clock
        }
    }

    public var takeID: String
    public var name: String
    public var grid: FrameGrid
    public var groups: Int64
    public var startWallclock: String
    public var timecode: String?
    public var nodes: [Node]
    /// Each node's last status, by node (empty before recording ends).
    public var finalStatus: [String: NodeStatus] = [:]
    /// Each camera's controls as its node armed it ("node/camera").
    public var controls: [String: CameraControls] = [:]
    /// Each camera's device as its node armed it ("node/camera"), and each microphone's ("node/mic": the card's name).
    public var devices: [String: DeviceIdentity] = [:]
    public var micDevices: [String: String] = [:]
    /// The pressure policy's view of every camera: its priority and whether the policy disabled it.
    public var responderCameras: [PressureResponder.Camera] = []
    /// Cameras ("node/camera") someone other than this coordinator disabled during the take.
    public var disabledElsewhere: Set<String> = []
    public var events: [TakeManifest.Event] = []
    public var clockTrack: [TakeManifest.ClockTrackPoint] = []
    public var budget: TakeManifest.BudgetSummary?
    public var audioRequired = false
    public var afterConfirm: CollectPolicy.AfterConfirm = .delete

    public init(takeID: String, name: String, grid: FrameGrid, groups: Int64, startWallclock: String, nodes: [Node]) {
        self.takeID = takeID; self.name = name; self.grid = grid; self.groups = groups
        self.startWallclock = startWallclock; self.nodes = nodes
    }

    public var manifest: TakeManifest {
        var cameras: [TakeManifest.Camera] = []
        for node in nodes {
            for s in node.cameras {
                let key = "\(node.name)/\(s.camera)"
                let status = finalStatus[node.name]?.cameras.first(where: { $0.camera == s.camera })
                let responderCamera = responderCameras.first { $0.node == node.name && $0.camera == s.camera }
                var camera = TakeManifest.Camera(
                    node: node.name, camera: s.camera, ordinal: s.ordinal, width: s.width, height: s.height, fps: s.fps,
                    codec: s.codec.rawValue, frames: 0, dropped: 0, clock: node.clock, files: [])
                camera.rate = s.rate
                camera.priority = responderCamera?.priority
                camera.recordEvery = s.recordEvery
                camera.controls = controls[key]
                camera.device = devices[key]
                camera.held = status?.held ?? 0
                camera.trigger = status?.trigger
                camera.disabled = responderCamera?.disabled == true ? true : nil
                if disabledElsewhere.contains(key) {
                    camera.disabled = true
                    camera.disabledBy = "another coordinator or peer"
                }
                if let status {
                    camera.timestampNoiseMicroseconds = (status.timestampNoiseMicroseconds * 10).rounded() / 10
                    camera.centerUncertaintyMicroseconds = (status.centerUncertaintyMicroseconds * 10).rounded() / 10
                }
                cameras.append(camera)
            }
        }
        var manifest = TakeManifest(
            takeID: takeID, name: name, status: .partial, t0Microseconds: grid.t0,
            framePeriodMicroseconds: grid.periodMicroseconds, groups: groups, startWallclock: startWallclock,
            cameras: cameras, events: events.sorted { $0.tMicroseconds < $1.tMicroseconds })
        manifest.clockTrack = clockTrack
        manifest.budget = budget
        // Every microphone the nodes recorded, with the node's own figures; checksums come with collection. One that
        // ended before its first sample has no file (the node removed it): listed apart, with why.
        let lost = nodes.flatMap { node in
            (finalStatus[node.name]?.mics ?? []).filter(\.recordedNothing).map { m in
                TakeManifest.LostMicrophone(node: node.name, mic: m.mic, ended: m.error, device: micDevices["\(node.name)/\(m.mic)"])
            }
        }
        manifest.audioLost = lost.isEmpty ? nil : lost
        let audio = nodes.flatMap { node in
            (finalStatus[node.name]?.mics ?? []).filter { !$0.recordedNothing }.map { m in
                var a = TakeManifest.Audio(node: node.name, mic: m.mic, sampleRate: m.sampleRate, channels: m.channels,
                                           startMicroseconds: m.startMicroseconds, frames: m.frames,
                                           avOffsetMicroseconds: .init(p50: (m.offsetP50Microseconds * 10).rounded() / 10,
                                                                       p99: (m.offsetP99Microseconds * 10).rounded() / 10),
                                           rateErrorPPM: (m.rateErrorPPM * 100).rounded() / 100)
                a.ended = m.error.isEmpty ? nil : m.error
                a.device = micDevices["\(node.name)/\(m.mic)"]
                return a
            }
        }
        manifest.audio = audio.isEmpty ? nil : audio
        manifest.audioRequired = audioRequired ? true : nil
        manifest.collection = CollectionRecord(state: .pending, afterConfirm: afterConfirm.rawValue)
        manifest.timecode = timecode
        return manifest
    }
}

/// What a node said in its handshake that tells nodes apart.
public struct HandshakeAnswer: Sendable, Equatable {
    public var endpoint: String
    public var node: String
    public var instanceID: String
    public var host: String
    public init(endpoint: String, node: String, instanceID: String, host: String) {
        self.endpoint = endpoint; self.node = node; self.instanceID = instanceID; self.host = host
    }

    /// Two endpoints whose nodes answer with one name: the same node process listed twice (e.g. 127.0.0.1 and
    /// localhost; it answers with one instance id), or two nodes that share a name. Nil when every node is named once.
    public static func duplicateProblem(_ answers: [HandshakeAnswer]) -> String? {
        var first: [String: HandshakeAnswer] = [:]
        for h in answers {
            guard let earlier = first[h.node] else { first[h.node] = h; continue }
            if !h.instanceID.isEmpty, earlier.instanceID == h.instanceID {
                return "the rig file lists node \(h.node) twice: \(earlier.endpoint) and \(h.endpoint) reach the same node (on host \(h.host)); list it once."
            }
            return "two nodes are both named \(h.node) (\(earlier.endpoint) on host \(earlier.host) and \(h.endpoint) on host \(h.host)); every node needs its own name."
        }
        return nil
    }
}
