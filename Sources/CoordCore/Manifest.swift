/// `manifest.json` of a take directory (CONTRACT §4). Keys are the contract's; decoding tolerates added keys.
public struct TakeManifest: Codable, Equatable, Sendable {
    public static let formatV1 = "coord.take/1"

    public enum Status: String, Codable, Sendable { case complete, partial }

    public struct ClockFigures: Codable, Equatable, Sendable {
        public var offsetMicroseconds: Double
        public var driftPPM: Double
        public var uncertaintyMicroseconds: Double
        enum CodingKeys: String, CodingKey {
            case offsetMicroseconds = "offset_us", driftPPM = "drift_ppm", uncertaintyMicroseconds = "uncertainty_us"
        }
        public init(offsetMicroseconds: Double, driftPPM: Double, uncertaintyMicroseconds: Double) {
            self.offsetMicroseconds = offsetMicroseconds
            self.driftPPM = driftPPM
            self.uncertaintyMicroseconds = uncertaintyMicroseconds
        }
    }

    public struct File: Codable, Equatable, Sendable {
        public var path: String
        public var bytes: UInt64
        public var sha256: String
        public init(path: String, bytes: UInt64, sha256: String) {
            self.path = path
            self.bytes = bytes
            self.sha256 = sha256
        }
    }

    public struct Camera: Codable, Equatable, Sendable {
        public var node: String
        public var camera: String
        public var ordinal: Int
        public var width: Int
        public var height: Int
        public var fps: Int
        public var codec: String
        public var frames: Int64
        public var dropped: Int64
        public var clock: ClockFigures
        public var files: [File]
        public init(node: String, camera: String, ordinal: Int, width: Int, height: Int, fps: Int, codec: String,
                    frames: Int64, dropped: Int64, clock: ClockFigures, files: [File]) {
            self.node = node; self.camera = camera; self.ordinal = ordinal; self.width = width; self.height = height
            self.fps = fps; self.codec = codec; self.frames = frames; self.dropped = dropped; self.clock = clock; self.files = files
        }
    }

    public struct Event: Codable, Equatable, Sendable {
        public var tMicroseconds: Int64
        public var node: String
        public var camera: String
        public var kind: String
        public var detail: String
        enum CodingKeys: String, CodingKey { case tMicroseconds = "t_us", node, camera, kind, detail }
        public init(tMicroseconds: Int64, node: String, camera: String, kind: String, detail: String) {
            self.tMicroseconds = tMicroseconds; self.node = node; self.camera = camera; self.kind = kind; self.detail = detail
        }
    }

    public var format: String = TakeManifest.formatV1
    public var takeID: String
    public var name: String
    public var status: Status
    public var t0Microseconds: Int64
    public var framePeriodMicroseconds: Int64
    public var groups: Int64
    public var startWallclock: String
    public var cameras: [Camera]
    public var events: [Event]

    enum CodingKeys: String, CodingKey {
        case format, takeID = "take_id", name, status, t0Microseconds = "t0_us", framePeriodMicroseconds = "frame_period_us"
        case groups, startWallclock = "start_wallclock", cameras, events
    }

    public init(takeID: String, name: String, status: Status, t0Microseconds: Int64, framePeriodMicroseconds: Int64,
                groups: Int64, startWallclock: String, cameras: [Camera], events: [Event]) {
        self.takeID = takeID; self.name = name; self.status = status; self.t0Microseconds = t0Microseconds
        self.framePeriodMicroseconds = framePeriodMicroseconds; self.groups = groups; self.startWallclock = startWallclock
        self.cameras = cameras; self.events = events
    }
}
