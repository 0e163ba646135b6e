/// `manifest.json` of a take directory (CONTRACT §4). Keys are the contract's; decoding tolerates added keys.
public struct TakeManifest: Codable, Equatable, Sendable {
    public static let formatV1 = "coord.take/1"

    public enum Status: String, Codable, Sendable { case complete, partial }

    public struct ClockFigures: Codable, Equatable, Sendable {
        public var offsetMicroseconds: Double
        public var driftPPM: Double
        /// One-sigma error of the alignment through the take.
        public var uncertaintyMicroseconds: Double
        /// The most it can be off (path asymmetry included). Not a contract key.
        public var boundMicroseconds: Double?
        /// What disciplines the node's clocks (chrony, PTP, …), as the node reported it. Not a contract key.
        public var timeService: String?
        enum CodingKeys: String, CodingKey {
            case offsetMicroseconds = "offset_us", driftPPM = "drift_ppm", uncertaintyMicroseconds = "uncertainty_us"
            case boundMicroseconds = "bound_us", timeService = "time_service"
        }
        public init(offsetMicroseconds: Double, driftPPM: Double, uncertaintyMicroseconds: Double,
                    boundMicroseconds: Double? = nil, timeService: String? = nil) {
            self.offsetMicroseconds = offsetMicroseconds
            self.driftPPM = driftPPM
            self.uncertaintyMicroseconds = uncertaintyMicroseconds
            self.boundMicroseconds = boundMicroseconds
            self.timeService = timeService
        }
    }

    /// One clock estimate the coordinator sent a node during the take (the mapping its frames used from then).
    public struct ClockTrackPoint: Codable, Equatable, Sendable {
        public var node: String
        public var tMicroseconds: Int64
        /// Node clock minus rig clock at `t_us`, and the node clock's rate against the rig's.
        public var offsetMicroseconds: Double
        public var driftPPM: Double
        public var uncertaintyMicroseconds: Double
        public var boundMicroseconds: Double
        enum CodingKeys: String, CodingKey {
            case node, tMicroseconds = "t_us", offsetMicroseconds = "offset_us", driftPPM = "drift_ppm"
            case uncertaintyMicroseconds = "uncertainty_us", boundMicroseconds = "bound_us"
        }
        public init(node: String, tMicroseconds: Int64, offsetMicroseconds: Double, driftPPM: Double,
                    uncertaintyMicroseconds: Double, boundMicroseconds: Double) {
            self.node = node; self.tMicroseconds = tMicroseconds; self.offsetMicroseconds = offsetMicroseconds
            self.driftPPM = driftPPM; self.uncertaintyMicroseconds = uncertaintyMicroseconds; self.boundMicroseconds = boundMicroseconds
        }

        /// The manifest's figures for `mapping` at rig instant `t`.
        public init(node: String, at t: Int64, mapping: ClockMapping) {
            let local = mapping.local(fromRig: Double(t))
            let r = mapping.ratePPM * 1e-6
            self.init(node: node, tMicroseconds: t, offsetMicroseconds: ((local - Double(t)) * 10).rounded() / 10,
                      driftPPM: ((1 / (1 + r) - 1) * 1e6 * 1000).rounded() / 1000,
                      uncertaintyMicroseconds: (mapping.uncertaintyMicroseconds * 10).rounded() / 10,
                      boundMicroseconds: (mapping.boundMicroseconds * 10).rounded() / 10)
        }
    }

    public struct File: Codable, Equatable, Sendable {
        public var path: String
        public var bytes: UInt64
        public var sha256: String
        /// xxh128 as the node computed it (32 lower-case hex digits): what collection checks the bytes by and the
        /// ASC MHL lists; empty from a node or manifest that predates it (then sha256 is checked).
        public var xxh128: String
        public init(path: String, bytes: UInt64, sha256: String, xxh128: String = "") {
            self.path = path
            self.bytes = bytes
            self.sha256 = sha256
            self.xxh128 = xxh128
        }

        enum CodingKeys: String, CodingKey { case path, bytes, sha256, xxh128 }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            path = try c.decode(String.self, forKey: .path)
            bytes = try c.decode(UInt64.self, forKey: .bytes)
            sha256 = try c.decode(String.self, forKey: .sha256)
            xxh128 = try c.decodeIfPresent(String.self, forKey: .xxh128) ?? ""
        }

        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(path, forKey: .path)
            try c.encode(bytes, forKey: .bytes)
            try c.encode(sha256, forKey: .sha256)
            if !xxh128.isEmpty { try c.encode(xxh128, forKey: .xxh128) }
        }
    }

    public struct Camera: Codable, Equatable, Sendable {
        public var node: String
        public var camera: String
        public var ordinal: Int
        public var width: Int
        public var height: Int
        /// The camera's rate: JSON `fps`, a number for an integer rate, else `"30000/1001"` (CONTRACT §13).
        public var rate: FrameRate
        /// Its whole rate (30 at 29.97).
        public var fps: Int {
            get { rate.nominal }
            set { rate = FrameRate(numerator: newValue, denominator: 1) ?? FrameRate(1) }
        }
        public var codec: String
        public var frames: Int64
        public var dropped: Int64
        public var clock: ClockFigures
        public var files: [File]
        /// The phase loop's figures at the end of the take: measured buffer-timestamp noise and the one-sigma
        /// error of the `center_us` estimates. Not contract keys.
        public var timestampNoiseMicroseconds: Double?
        public var centerUncertaintyMicroseconds: Double?
        /// The rig file's priority, the frame-rate cap in force at the start (one group in `record_every` from the
        /// sensor), the groups filled on purpose (`held`, not in `dropped`), and whether the pressure policy
        /// disabled the camera mid-take. Not contract keys.
        public var priority: Int?
        public var recordEvery: Int?
        public var held: Int64?
        public var disabled: Bool?
        /// Who disabled it, when not this coordinator's pressure policy ("another coordinator or peer").
        public var disabledBy: String?
        /// The picture controls in force as the take started, as the node reported them.
        public var controls: CameraControls?
        /// What the camera is, as its driver names it (CONTRACT §11); nil from a node that did not say.
        public var device: DeviceIdentity?
        /// The output that triggered the camera and its pulses' timing (CONTRACT §17); nil for a free-running camera.
        public var trigger: TriggerFigures?
        /// "the pressure policy" unless someone else disabled the camera.
        public var disabler: String { disabledBy ?? "the pressure policy" }
        enum CodingKeys: String, CodingKey {
            case node, camera, ordinal, width, height, rate = "fps", codec, frames, dropped, clock, files
            case timestampNoiseMicroseconds = "timestamp_noise_us", centerUncertaintyMicroseconds = "center_uncertainty_us"
            case priority, recordEvery = "record_every", held, disabled, disabledBy = "disabled_by", controls, device
            case trigger
        }
        public init(node: String, camera: String, ordinal: Int, width: Int, height: Int, fps: Int, codec: String,
                    frames: Int64, dropped: Int64, clock: ClockFigures, files: [File]) {
            self.node = node; self.camera = camera; self.ordinal = ordinal; self.width = width; self.height = height
            self.rate = FrameRate(numerator: fps, denominator: 1) ?? FrameRate(1); self.codec = codec; self.frames = frames; self.dropped = dropped; self.clock = clock; self.files = files
        }
    }

    public struct Event: Codable, Equatable, Sendable {
        public var tMicroseconds: Int64
        public var node: String
        public var camera: String
        public var kind: TakeEvent.Kind
        public var detail: String
        enum CodingKeys: String, CodingKey { case tMicroseconds = "t_us", node, camera, kind, detail }
        public init(tMicroseconds: Int64, node: String, camera: String, kind: TakeEvent.Kind, detail: String) {
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
    /// The groups the take was planned for, when it stopped before them (`groups` is then what it recorded).
    public var plannedGroups: Int64?
    public var startWallclock: String
    /// How far the coordinator's wall clock (and so `start_wallclock` and the timecode) was from its time service
    /// as the take started, where chrony could say. Not a contract key.
    public var wallclockService: WallclockService?
    public var cameras: [Camera]
    public var events: [Event]
    /// Every clock estimate sent to a node during the take, in time order. Not a contract key.
    public var clockTrack: [ClockTrackPoint]?
    /// The cost budget the take was planned with. Not a contract key.
    public var budget: BudgetSummary?
    /// SMPTE timecode `HH:MM:SS:FF` (drop-frame `HH:MM:SS;FF` at 29.97 and 59.94) of group 0: the coordinator's local
    /// time of day at `t0_us` at the take's rate, on which group 0 is placed; every `.mkv` carries it as its `timecode` tag. Not a contract key.
    public var timecode: String?
    /// Whether every file arrived verified, what is missing, and what each collection run fetched. Not a
    /// contract key.
    public var collection: CollectionRecord?
    /// Every microphone of the take (CONTRACT §9); nil: a take recorded without sound.
    public var audio: [Audio]?
    /// The rig file said `take.audio: required`: the take is complete only with all its sound. Not a contract key.
    public var audioRequired: Bool?
    /// Microphones that ended before they recorded a sample (lost after configure, before group 0): the take holds
    /// no file for them, so they are not in `audio`. Not a contract key.
    public var audioLost: [LostMicrophone]?

    /// A microphone of the take that recorded no sound, and why.
    public struct LostMicrophone: Codable, Equatable, Sendable {
        public var node: String
        public var mic: String
        /// Why it ended (the node's sentence).
        public var ended: String
        public var device: String?
        public init(node: String, mic: String, ended: String, device: String? = nil) {
            self.node = node; self.mic = mic; self.ended = ended; self.device = device
        }
    }

    /// The hardware cost per node and resource, and the longest take the nodes could sustain, as planned.
    public struct BudgetSummary: Codable, Equatable, Sendable {
        public struct Load: Codable, Equatable, Sendable {
            public var resource: String
            public var demand: Double
            public var capacity: Double
            public var unit: String
            public var cost: Double
            public init(resource: String, demand: Double, capacity: Double, unit: String, cost: Double) {
                self.resource = resource; self.demand = demand; self.capacity = capacity; self.unit = unit; self.cost = cost
            }
        }
        public struct Node: Codable, Equatable, Sendable {
            public var node: String
            public var cost: Double
            public var loads: [Load]
            public var longestSeconds: Double?
            public var notes: [String]
            enum CodingKeys: String, CodingKey { case node, cost, loads, longestSeconds = "longest_take_s", notes }
            public init(node: String, cost: Double, loads: [Load], longestSeconds: Double?, notes: [String]) {
                self.node = node; self.cost = cost; self.loads = loads; self.longestSeconds = longestSeconds; self.notes = notes
            }
        }
        /// The rig's hardware cost: its most loaded node's.
        public var cost: Double
        public var longestSeconds: Double?
        public var nodes: [Node]
        /// What `--fit` changed before the take, one sentence each.
        public var changes: [String]
        enum CodingKeys: String, CodingKey { case cost, longestSeconds = "longest_take_s", nodes, changes }
        public init(cost: Double, longestSeconds: Double?, nodes: [Node], changes: [String]) {
            self.cost = cost; self.longestSeconds = longestSeconds; self.nodes = nodes; self.changes = changes
        }
    }

    /// One microphone's sound (CONTRACT §9): `<node>/<mic>.mka`, one PCM stream starting at `start_us` (group 0's
    /// instant) on the rig's sample grid; `av_offset_us` and `rate_error_ppm` are the node's own figures.
    public struct Audio: Codable, Equatable, Sendable {
        public struct Offsets: Codable, Equatable, Sendable {
            public var p50: Double
            public var p99: Double
            public init(p50: Double, p99: Double) { self.p50 = p50; self.p99 = p99 }
        }
        public var node: String
        public var mic: String
        public var path: String
        public var streamIndex: Int
        public var sampleRate: Int
        public var channels: Int
        public var startMicroseconds: Int64
        public var frames: Int64
        public var avOffsetMicroseconds: Offsets
        public var rateErrorPPM: Double
        /// Empty until collection verified the file.
        public var sha256: String
        /// Not a contract key (CONTRACT §10's checksum, beside `sha256`): the file's xxh128 as its node computed it and
        /// collection checked it as the bytes arrived, 32 lower-case hex digits; nil until then, or from a node that
        /// predates xxh128.
        public var xxh128: String?
        /// Not a contract key: the file's size once collected.
        public var bytes: UInt64?
        /// Not a contract key: why the sound ended before the take did (the microphone went away).
        public var ended: String?
        /// The ALSA card's name, or "synthetic" (CONTRACT §11); nil from a node that did not say.
        public var device: String?
        enum CodingKeys: String, CodingKey {
            case node, mic, path, streamIndex = "stream_index", sampleRate = "sample_rate", channels
            case startMicroseconds = "start_us", frames, avOffsetMicroseconds = "av_offset_us", rateErrorPPM = "rate_error_ppm"
            case sha256, xxh128, bytes, ended, device
        }
        public init(node: String, mic: String, sampleRate: Int, channels: Int, startMicroseconds: Int64, frames: Int64,
                    avOffsetMicroseconds: Offsets, rateErrorPPM: Double) {
            self.node = node; self.mic = mic; self.path = "\(node)/\(mic).mka"; self.streamIndex = 0
            self.sampleRate = sampleRate; self.channels = channels; self.startMicroseconds = startMicroseconds
            self.frames = frames; self.avOffsetMicroseconds = avOffsetMicroseconds; self.rateErrorPPM = rateErrorPPM
            self.sha256 = ""
        }
    }

    enum CodingKeys: String, CodingKey {
        case format, takeID = "take_id", name, status, t0Microseconds = "t0_us", framePeriodMicroseconds = "frame_period_us"
        case groups, plannedGroups = "planned_groups", startWallclock = "start_wallclock", cameras, events, clockTrack = "clock_track", budget
        case timecode, collection, audio, audioRequired = "audio_required", audioLost = "audio_lost"
        case wallclockService = "wallclock_service"
    }

    public init(takeID: String, name: String, status: Status, t0Microseconds: Int64, framePeriodMicroseconds: Int64,
                groups: Int64, startWallclock: String, cameras: [Camera], events: [Event]) {
        self.takeID = takeID; self.name = name; self.status = status; self.t0Microseconds = t0Microseconds
        self.framePeriodMicroseconds = framePeriodMicroseconds; self.groups = groups; self.startWallclock = startWallclock
        self.cameras = cameras; self.events = events
    }
}

extension TakeManifest {
    /// The coordinator's wall clock against its time service (`chronyc tracking`), or `source` "unknown".
    public struct WallclockService: Codable, Equatable, Sendable {
        /// "chrony", or "unknown" when nothing could say.
        public var source: String
        /// The wall clock minus the service's time (µs; positive: the wall clock is ahead).
        public var offsetMicroseconds: Double?
        /// The most it can be off from the service's reference (root delay / 2 + root dispersion, µs).
        public var boundMicroseconds: Double?
        /// Why it is unknown.
        public var detail: String?
        enum CodingKeys: String, CodingKey {
            case source, offsetMicroseconds = "offset_us", boundMicroseconds = "bound_us", detail
        }
        public init(source: String, offsetMicroseconds: Double? = nil, boundMicroseconds: Double? = nil, detail: String? = nil) {
            self.source = source; self.offsetMicroseconds = offsetMicroseconds; self.boundMicroseconds = boundMicroseconds
            self.detail = detail
        }
    }

    /// The take's grid: exact in its rational at a non-integer rate (CONTRACT §13), else `t0_us + g × frame_period_us`.
    public var grid: FrameGrid {
        var grid = FrameGrid(t0: t0Microseconds, periodMicroseconds: max(framePeriodMicroseconds, 1))
        let rate = self.rate
        if !rate.isInteger, rate.periodMicroseconds == framePeriodMicroseconds { grid.rationalRate = rate }
        return grid
    }

    /// The take's frame rate: its cameras' rational rate where they have one, else the whole rate of the grid period.
    public var rate: FrameRate {
        cameras.first(where: { !$0.rate.isInteger })?.rate ?? FrameRate(Timecode.fps(framePeriodMicroseconds: framePeriodMicroseconds))
    }
}
