/// Something that happened during a take, as the manifest's `events` record it (CONTRACT §4): when (rig µs),
/// where (node, camera; empty for the whole rig), what (a kind from one list) and one sentence.
public struct TakeEvent: Equatable, Sendable {
    public var tMicroseconds: Int64
    public var node: String
    public var camera: String
    public var kind: Kind
    public var detail: String

    public init(_ kind: Kind, at tMicroseconds: Int64, node: String = "", camera: String = "", _ detail: String) {
        self.tMicroseconds = tMicroseconds; self.node = node; self.camera = camera; self.kind = kind; self.detail = detail
    }

    /// The kinds of event, named once. A kind from a newer node or coordinator survives a round trip through a
    /// manifest: it is a string underneath, not a closed enum.
    /// An event's kind: its manifest name. Written and read as that string; a kind this version does not know
    /// (a newer node's) is kept as it is.
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible, Codable, ExpressibleByStringLiteral {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.init(rawValue: value) }
        public var description: String { rawValue }
        public init(from decoder: Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
        public func encode(to encoder: Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(rawValue)
        }

        // The take as the coordinator runs it.
        public static let fit = Kind(rawValue: "fit")
        public static let start = Kind(rawValue: "start")
        public static let stop = Kind(rawValue: "stop")
        public static let operatorStop = Kind(rawValue: "operator-stop")
        public static let stopDelivered = Kind(rawValue: "stop-delivered")
        public static let stopUndelivered = Kind(rawValue: "stop-undelivered")
        public static let phaseFixed = Kind(rawValue: "phase-fixed")
        /// Arming ran past the start instant and every node was armed again with more lead.
        public static let armedAgain = Kind(rawValue: "armed-again")
        public static let clockUpdateFailed = Kind(rawValue: "clock-update-failed")
        public static let clockUpdateHeld = Kind(rawValue: "clock-update-held")
        // Nodes and cameras.
        public static let nodeFailed = Kind(rawValue: "node-failed")
        public static let nodeUnfinished = Kind(rawValue: "node-unfinished")
        /// Someone other than this coordinator aborted the take on a node.
        public static let takeAborted = Kind(rawValue: "take-aborted")
        /// A node itself was stopped mid-take (SIGTERM, its service shutting down): its cameras ended early there.
        public static let nodeStopped = Kind(rawValue: "node-stopped")
        public static let cameraError = Kind(rawValue: "camera-error")
        public static let cameraEnded = Kind(rawValue: "camera-ended")
        /// A microphone went away mid-take: its sound file ends there, the cameras go on (CONTRACT §9).
        public static let microphoneEnded = Kind(rawValue: "microphone-ended")
        /// Silence put in a microphone's file where its device delivered no sound (an overrun, or a late start).
        public static let microphoneGap = Kind(rawValue: "microphone-gap")
        /// A camera's files were deleted from the node's staging directory while it recorded.
        public static let stagingLost = Kind(rawValue: "staging-lost")
        /// A camera's file could not be written (a full or read-only disk, an I/O error): the camera ended there, its
        /// frames so far kept.
        public static let writeFailed = Kind(rawValue: "write-failed")
        /// A camera's files repaired by its node after a crash (frames.csv rows rebuilt).
        public static let recovered = Kind(rawValue: "recovered")
        public static let cameraSlowed = Kind(rawValue: "camera-slowed")
        public static let cameraSlowedFailed = Kind(rawValue: "camera-slowed-failed")
        /// A slowed camera back at its planned rate once its node's pressure was gone.
        public static let cameraRestored = Kind(rawValue: "camera-restored")
        public static let cameraRestoredFailed = Kind(rawValue: "camera-restored-failed")
        public static let held = Kind(rawValue: "held")
        public static let dup = Kind(rawValue: "dup")
        public static let cameraDisabled = Kind(rawValue: "camera-disabled")
        public static let cameraDisabledFailed = Kind(rawValue: "camera-disabled-failed")
        public static let pressure = Kind(rawValue: "pressure")
        public static let pressureShutdown = Kind(rawValue: "pressure-shutdown")
        // Collection.
        public static let fileMissing = Kind(rawValue: "file-missing")
        public static let fileDamaged = Kind(rawValue: "file-damaged")
        public static let collectFailed = Kind(rawValue: "collect-failed")
        /// A camera's files do not hold the take's groups (collection's verdict).
        public static let incomplete = Kind(rawValue: "incomplete")
    }
}

extension TakeManifest {
    /// What makes a take partial, in one phrase: a take someone else aborted on a node first (nothing else
    /// explains its files), then a file collection could not bring (the operator can act on it: `coord collect`),
    /// then the earliest other cause; "see manifest.json" when no event says.
    public var partialCause: String {
        let order: [Set<TakeEvent.Kind>] = [[.takeAborted, .stagingLost, .recovered], [.fileDamaged, .fileMissing, .collectFailed],
                                            [.incomplete, .nodeFailed, .cameraError, .nodeUnfinished]]
        guard let e = order.lazy.compactMap({ kinds in self.events.first { kinds.contains($0.kind) } }).first
        else { return "see manifest.json" }
        let detail = e.detail.hasSuffix(".") ? String(e.detail.dropLast()) : e.detail
        if e.kind.rawValue.hasPrefix("file-") || [TakeEvent.Kind.takeAborted, .stagingLost, .recovered].contains(e.kind) { return detail }
        // A detail that names its node already ("node n1 sent FileList…") needs no prefix.
        if !e.node.isEmpty, detail.hasPrefix("node \(e.node) ") { return detail }
        return "\([e.node, e.camera].filter { !$0.isEmpty }.joined(separator: "/")) \(detail)"
    }
}
