/// Percentiles of a set of integer figures (nearest-rank).
public struct Percentiles: Codable, Equatable, Sendable {
    public var p50: Int64
    public var p99: Int64
    public var max: Int64

    public init(p50: Int64, p99: Int64, max: Int64) {
        self.p50 = p50; self.p99 = p99; self.max = max
    }

    public init(of values: [Int64]) {
        guard !values.isEmpty else { self.init(p50: 0, p99: 0, max: 0); return }
        let sorted = values.sorted()
        func rank(_ p: Double) -> Int64 {
            let index = Int((p * Double(sorted.count)).rounded(.up)) - 1
            return sorted[Swift.max(0, Swift.min(sorted.count - 1, index))]
        }
        self.init(p50: rank(0.50), p99: rank(0.99), max: sorted[sorted.count - 1])
    }
}

/// `sync-report.json` (CONTRACT §4), computed only from the take's frames.csv rows and clock figures.
public struct SyncReport: Codable, Equatable, Sendable {
    public struct Camera: Codable, Equatable, Sendable {
        public var node: String
        public var camera: String
        public var frames: Int64
        public var dropped: Int64
        public var phaseErrorMicroseconds: Percentiles
        public var clockUncertaintyMicroseconds: Double
        /// One-sigma error of this camera's `center_us` estimates from its phase loop. Not a contract key.
        public var centerUncertaintyMicroseconds: Double?
        /// Groups filled on purpose by a frame-rate cap or a pressure slow-down (dup rows not in `dropped`).
        /// Not a contract key.
        public var held: Int64?
        enum CodingKeys: String, CodingKey {
            case node, camera, frames, dropped, phaseErrorMicroseconds = "phase_error_us"
            case clockUncertaintyMicroseconds = "clock_uncertainty_us", centerUncertaintyMicroseconds = "center_uncertainty_us"
            case held
        }
    }

    public var groups: Int64
    public var spreadMicroseconds: Percentiles
    public var cameras: [Camera]
    /// Groups in which at least two cameras delivered a real (non-dup) frame: the groups the spread covers.
    public var groupsMeasured: Int64
    /// The spread the frames could really have: per group, the widest span of the cameras' centres each
    /// widened by two sigma of its own estimate error (clock alignment and phase estimate together). The
    /// centres alone cannot show an error common to a node's frames, so this is the figure to trust.
    /// Not a contract key.
    public var spreadBoundMicroseconds: Percentiles?
    /// What happened to the rig's budget and pressure during the take (fit changes, pressure levels, slowed
    /// and disabled cameras, a node's shutdown), as in the manifest. Not a contract key.
    public var events: [TakeManifest.Event]?
    /// The cost budget the take was planned with. Not a contract key.
    public var budget: TakeManifest.BudgetSummary?
    /// Files that did not arrive verified (missing, or not matching the node's checksum), by path. Not a
    /// contract key.
    public var missingFiles: [CollectionRecord.Missing]?
    /// The share of all frames that are repeats (held on purpose or filled), and, above `repeatsWorthSaying`,
    /// one sentence naming the cameras with most: a take can be complete yet not what the operator expects.
    public var repeatedFraction: Double?
    public var repeatsNote: String?
    /// More repeats than this share is said in the take's status line and report.
    public static let repeatsWorthSaying = 0.02
    /// One sigma of a node clock's rate error the mapping did not see, per µs since its last update (ppm): a rate
    /// fitted over a few seconds is off by about a ppm (a coordinator gone 0.5 s into a take left a 1.5 ppm error,
    /// 94 µs over 60 s), and a crystal wanders with temperature. Without updates the bound grows by this.
    public static let staleDriftPPM = 2.0
    /// Nodes whose clock updates stopped well before the end, in one sentence: the bound was widened for them.
    public var clockNote: String?

    /// How well each microphone's sound agrees with the pictures (CONTRACT §9): the node's A/V offset figures and
    /// the device's rate error against the rig clock, which the node measured and corrected.
    public struct Audio: Codable, Equatable, Sendable {
        public var node: String
        public var mic: String
        public var avOffsetMicroseconds: TakeManifest.Audio.Offsets
        public var rateErrorPPM: Double
        enum CodingKeys: String, CodingKey {
            case node, mic, avOffsetMicroseconds = "av_offset_us", rateErrorPPM = "rate_error_ppm"
        }
        public init(_ a: TakeManifest.Audio) {
            node = a.node; mic = a.mic; avOffsetMicroseconds = a.avOffsetMicroseconds; rateErrorPPM = a.rateErrorPPM
        }
    }
    public var audio: [Audio]?

    /// The event kinds the report repeats from the manifest: budget, pressure and collection problems.
    public static let reportedEventKinds: Set<TakeEvent.Kind> = [
        .fit, .pressure, .pressureShutdown, .cameraSlowed, .cameraRestored, .cameraDisabled, .cameraSlowedFailed,
        .cameraDisabledFailed, .held, .fileDamaged, .fileMissing, .collectFailed,
    ]

    enum CodingKeys: String, CodingKey {
        case groups, spreadMicroseconds = "spread_us", cameras, groupsMeasured = "groups_measured"
        case spreadBoundMicroseconds = "spread_bound_us", events, budget, missingFiles = "missing_files"
        case repeatedFraction = "repeated_fraction", repeatsNote = "repeats_note", clockNote = "clock_note", audio
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        groups = try c.decode(Int64.self, forKey: .groups)
        spreadMicroseconds = try c.decode(Percentiles.self, forKey: .spreadMicroseconds)
        cameras = try c.decode([Camera].self, forKey: .cameras)
        // Not a contract key: a report written by another tool may lack it.
        groupsMeasured = try c.decodeIfPresent(Int64.self, forKey: .groupsMeasured) ?? 0
        spreadBoundMicroseconds = try c.decodeIfPresent(Percentiles.self, forKey: .spreadBoundMicroseconds)
        events = try c.decodeIfPresent([TakeManifest.Event].self, forKey: .events)
        budget = try c.decodeIfPresent(TakeManifest.BudgetSummary.self, forKey: .budget)
        missingFiles = try c.decodeIfPresent([CollectionRecord.Missing].self, forKey: .missingFiles)
        repeatedFraction = try c.decodeIfPresent(Double.self, forKey: .repeatedFraction)
        repeatsNote = try c.decodeIfPresent(String.self, forKey: .repeatsNote)
        clockNote = try c.decodeIfPresent(String.self, forKey: .clockNote)
        audio = try c.decodeIfPresent([Audio].self, forKey: .audio)
    }

    /// One camera's rows with the identity and clock figures the report needs.
    public struct Input: Sendable {
        public var node: String
        public var camera: String
        public var rows: [FrameRow]
        public var clockUncertaintyMicroseconds: Double
        public var centerUncertaintyMicroseconds: Double?
        /// How many of the dup rows the camera filled on purpose (the node's count).
        public var held: Int64
        /// When the node's last clock update was made (rig µs); nil: the clock was tracked to the end.
        public var clockUpdatedUntil: Int64?
        public init(node: String, camera: String, rows: [FrameRow], clockUncertaintyMicroseconds: Double,
                    centerUncertaintyMicroseconds: Double? = nil, held: Int64 = 0, clockUpdatedUntil: Int64? = nil) {
            self.node = node; self.camera = camera; self.rows = rows; self.clockUncertaintyMicroseconds = clockUncertaintyMicroseconds
            self.centerUncertaintyMicroseconds = centerUncertaintyMicroseconds; self.held = held
            self.clockUpdatedUntil = clockUpdatedUntil
        }

        /// One sigma of this camera's centre estimate at rig time `at`: the centre's own error, the clock
        /// mapping's, and the drift the mapping has not seen since its last update (which grows with time).
        func sigma(at: Int64) -> Double {
            let c = centerUncertaintyMicroseconds ?? 0
            let aged = clockUpdatedUntil.map { SyncReport.staleDriftPPM * 1e-6 * Double(max(0, at - $0)) } ?? 0
            return (clockUncertaintyMicroseconds * clockUncertaintyMicroseconds + c * c + aged * aged).squareRoot()
        }
    }

    public init(groups: Int64, grid: FrameGrid, inputs: [Input]) {
        self.groups = groups
        var centersByGroup: [Int64: [Int64]] = [:]
        var widenedByGroup: [Int64: (low: Double, high: Double, count: Int)] = [:]
        var cameras: [Camera] = []
        for input in inputs {
            var phase: [Int64] = []
            var dropped: Int64 = 0
            for row in input.rows {
                if row.isDup { dropped += 1; continue }
                // A recovered row's centre is extrapolated, not measured: it proves nothing about sync.
                if row.isRecovered { continue }
                centersByGroup[row.group, default: []].append(row.centerMicroseconds)
                let c = Double(row.centerMicroseconds)
                let w = widenedByGroup[row.group] ?? (.infinity, -.infinity, 0)
                let sigma = input.sigma(at: row.centerMicroseconds)
                widenedByGroup[row.group] = (min(w.low, c - 2 * sigma), max(w.high, c + 2 * sigma), w.count + 1)
                phase.append(abs(row.centerMicroseconds - grid.instant(ofGroup: row.group)))
            }
            let held = min(input.held, dropped)
            cameras.append(Camera(node: input.node, camera: input.camera, frames: Int64(input.rows.count), dropped: dropped - held,
                                  phaseErrorMicroseconds: Percentiles(of: phase),
                                  clockUncertaintyMicroseconds: input.clockUncertaintyMicroseconds,
                                  centerUncertaintyMicroseconds: input.centerUncertaintyMicroseconds,
                                  held: held > 0 ? held : nil))
        }
        let spreads = centersByGroup.values.filter { $0.count >= 2 }.map { $0.max()! - $0.min()! }
        self.spreadMicroseconds = Percentiles(of: spreads)
        self.spreadBoundMicroseconds = Percentiles(of: widenedByGroup.values.filter { $0.count >= 2 }
            .map { Int64(($0.high - $0.low).rounded(.up)) })
        self.groupsMeasured = Int64(spreads.count)
        self.cameras = cameras
        let end = grid.instant(ofGroup: groups)
        var stale: [String: Int64] = [:]
        for input in inputs {
            // Updates come every second or so while the coordinator tracks the clock; 5 s without one is a stop.
            if let until = input.clockUpdatedUntil, end - until > 5_000_000 { stale[input.node] = until }
        }
        if !stale.isEmpty {
            let nodes = stale.sorted { $0.key < $1.key }.map { node, until -> String in
                let tenths = (end - until + 50_000) / 100_000
                return "\(node) \(tenths / 10).\(tenths % 10) s"
            }
            clockNote = "clock updates stopped before the end of the take (\(nodes.joined(separator: ", ")) before it, the coordinator gone or the node unreachable): the bound allows \(Self.staleDriftPPM) ppm of unseen drift since each node's last update"
        }
        let frames = cameras.map(\.frames).reduce(0, +)
        let repeats = cameras.map { $0.dropped + ($0.held ?? 0) }.reduce(0, +)
        if frames > 0 {
            repeatedFraction = Double(repeats) / Double(frames)
            if Double(repeats) / Double(frames) > Self.repeatsWorthSaying {
                let worst = cameras.filter { $0.dropped + ($0.held ?? 0) > 0 }
                    .sorted { ($0.dropped + ($0.held ?? 0)) * $1.frames > ($1.dropped + ($1.held ?? 0)) * $0.frames }
                    .prefix(3).map { "\($0.node)/\($0.camera) \($0.dropped + ($0.held ?? 0)) of \($0.frames)" }
                let percent = (Double(repeats) / Double(frames) * 1000).rounded() / 10
                repeatsNote = "\(percent) % of the frames are repeats, held on purpose or filled (\(worst.joined(separator: ", ")))"
            }
        }
    }
}
