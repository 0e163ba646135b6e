/// System pressure on a node, in AVCaptureDevice.SystemPressureState's levels.
public enum PressureLevel: Int, Comparable, Sendable, CaseIterable {
    case nominal = 1, fair, serious, critical, shutdown

    public var name: String {
        switch self {
        case .nominal: return "nominal"
        case .fair: return "fair"
        case .serious: return "serious"
        case .critical: return "critical"
        case .shutdown: return "shutdown"
        }
    }

    public static func < (a: PressureLevel, b: PressureLevel) -> Bool { a.rawValue < b.rawValue }
}

/// One factor's pressure and why, in a sentence with its figures.
public struct PressureReading: Equatable, Sendable {
    public var level: PressureLevel
    /// "thermal", "disk", "cpu", "drops"
    public var factor: String
    public var cause: String

    public init(level: PressureLevel, factor: String, cause: String) {
        self.level = level; self.factor = factor; self.cause = cause
    }

    public static let nominal = PressureReading(level: .nominal, factor: "", cause: "nominal")
}

/// Turns a node's measurements into pressure levels. Pure: the node's monitor samples, this judges.
public enum PressureGauge {
    /// The worst zone. Without trip points a zone says nothing (its safe range is unknown); with only one,
    /// the other is taken 15 °C away. serious at the passive trip (the kernel starts throttling), critical
    /// halfway to the critical trip, shutdown at it.
    public static func thermal(_ zones: [ThermalZone]) -> PressureReading {
        var worst = PressureReading.nominal
        for zone in zones {
            guard zone.passiveCelsius != nil || zone.criticalCelsius != nil else { continue }
            let passive = zone.passiveCelsius ?? (zone.criticalCelsius! - 15)
            let critical = zone.criticalCelsius ?? (passive + 15)
            let t = zone.celsius
            let level: PressureLevel
            if t >= critical { level = .shutdown }
            else if t >= (passive + critical) / 2 { level = .critical }
            else if t >= passive { level = .serious }
            else if t >= passive - 10 { level = .fair }
            else { level = .nominal }
            if worst.factor.isEmpty || level > worst.level {
                worst = PressureReading(level: level, factor: "thermal",
                                        cause: "thermal zone \(zone.name) is at \(format(t)) °C (throttles at \(format(passive)) °C, critical at \(format(critical)) °C)")
            }
        }
        return worst
    }

    /// Time left before the disk reaches the reserve the files need to be finalized: shutdown at the reserve,
    /// critical under 30 s, serious under 2 min, fair under 10 min.
    public static func disk(freeBytes: Double, writeBytesPerSecond: Double) -> PressureReading {
        let reserve = diskReserveBytes(writeBytesPerSecond: writeBytesPerSecond)
        let free = "\(bytes(freeBytes)) free"
        if freeBytes <= reserve {
            return PressureReading(level: .shutdown, factor: "disk",
                                   cause: "the staging disk has \(free), at the \(bytes(reserve)) kept to finalize the files")
        }
        guard writeBytesPerSecond > 0 else { return PressureReading(level: .nominal, factor: "disk", cause: "the staging disk has \(free)") }
        let seconds = (freeBytes - reserve) / writeBytesPerSecond
        let level: PressureLevel = seconds < 30 ? .critical : seconds < 120 ? .serious : seconds < 600 ? .fair : .nominal
        return PressureReading(level: level, factor: "disk",
                               cause: "the staging disk has \(free), full in \(Saturating.int64(seconds)) s at \(bytes(writeBytesPerSecond))/s")
    }

    /// Load alone is at most fair (a busy CPU still records); frames the cameras could not deliver in time
    /// show it is not keeping up: serious above 5 % of the last few seconds' groups, fair above 1 %.
    public static func cpu(load: Double, droppedFraction: Double) -> PressureReading {
        if droppedFraction > 0.05 {
            return PressureReading(level: .serious, factor: "drops",
                                   cause: "\(format(droppedFraction * 100)) % of the last groups were filled with a repeat (CPU load \(format(load * 100)) %)")
        }
        if droppedFraction > 0.01 {
            return PressureReading(level: .fair, factor: "drops",
                                   cause: "\(format(droppedFraction * 100)) % of the last groups were filled with a repeat (CPU load \(format(load * 100)) %)")
        }
        if load >= 1.5 {
            return PressureReading(level: .fair, factor: "cpu", cause: "CPU load is \(format(load * 100)) % of the node's CPUs")
        }
        return PressureReading(level: .nominal, factor: "cpu", cause: "CPU load is \(format(load * 100)) %")
    }

    /// The highest level wins; among equals the first given.
    public static func combine(_ readings: [PressureReading]) -> PressureReading {
        readings.reduce(PressureReading.nominal) { $1.level > $0.level ? $1 : $0 }
    }

    /// What a node keeps free to finalize its files: max(16 MiB, 3 s of writing).
    public static func diskReserveBytes(writeBytesPerSecond: Double) -> Double {
        max(16 * 1024 * 1024, 3 * writeBytesPerSecond)
    }

    static func format(_ x: Double) -> String {
        let r = (x * 10).rounded() / 10
        return r == r.rounded() ? String(Int(r)) : String(r)
    }

    static func bytes(_ b: Double) -> String {
        if b >= 1e9 { return "\(format(b / 1e9)) GB" }
        if b >= 1e6 { return "\(format(b / 1e6)) MB" }
        if b >= 1e3 { return "\(format(b / 1e3)) kB" }
        return "\(Int(b)) B"
    }
}

/// The rig file's `pressure:` section: what the coordinator does when a node's pressure rises mid-take.
/// At shutdown the node always stops its own cameras, files finalized.
public struct PressurePolicy: Decodable, Equatable, Sendable {
    public enum Action: String, Decodable, Sendable, CaseIterable {
        /// Record one group in `slow_record_every` on the node's lowest-priority camera not yet slowed.
        case slow
        /// End the node's lowest-priority camera still recording (never its last).
        case disable
        /// Only log the event.
        case none
    }

    public var serious: Action
    public var critical: Action
    public var slowRecordEvery: Int
    /// While a node stays at the level, the action is repeated on the next camera this often (seconds).
    public var repeatSeconds: Double
    /// A node calm (nominal or fair) this long gets its slowed cameras back at their full rate (seconds): a stall
    /// of a few seconds must not halve a camera for the rest of the take.
    public var restoreSeconds: Double

    /// The longest `repeat_seconds` or `restore_seconds` a rig file may give: a take's longest.
    public static let longestWait: Double = 86_400

    /// `repeatSeconds` and `restoreSeconds` as the intervals the responder waits (the rig file checked them).
    public var repeatInterval: Duration { .seconds(repeatSeconds) }
    public var restoreInterval: Duration { .seconds(restoreSeconds) }

    public init(serious: Action = .slow, critical: Action = .disable, slowRecordEvery: Int = 2, repeatSeconds: Double = 10,
                restoreSeconds: Double = 5) {
        self.serious = serious; self.critical = critical; self.slowRecordEvery = slowRecordEvery; self.repeatSeconds = repeatSeconds
        self.restoreSeconds = restoreSeconds
    }

    public enum CodingKeys: String, CodingKey, CaseIterable {
        case serious, critical
        case slowRecordEvery = "slow_record_every"
        case repeatSeconds = "repeat_seconds"
        case restoreSeconds = "restore_seconds"
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = PressurePolicy()
        serious = try c.decodeIfPresent(Action.self, forKey: .serious) ?? defaults.serious
        critical = try c.decodeIfPresent(Action.self, forKey: .critical) ?? defaults.critical
        slowRecordEvery = try c.decodeIfPresent(Int.self, forKey: .slowRecordEvery) ?? defaults.slowRecordEvery
        repeatSeconds = try c.decodeIfPresent(Double.self, forKey: .repeatSeconds) ?? defaults.repeatSeconds
        restoreSeconds = try c.decodeIfPresent(Double.self, forKey: .restoreSeconds) ?? defaults.restoreSeconds
    }
}

/// The coordinator's side of the policy for one take: fed each node's pressure as status arrives, it decides
/// which camera to slow or disable. Pure; the take session sends the decisions and records them as events.
public struct PressureResponder: Sendable {
    public struct Camera: Equatable, Sendable {
        public var node: String
        public var camera: String
        public var priority: Int
        public var recordEvery: Int
        /// The stride the camera started with (its frame-rate cap): what a restore returns it to.
        public let plannedRecordEvery: Int
        public var disabled = false
        public init(node: String, camera: String, priority: Int, recordEvery: Int = 1) {
            self.node = node; self.camera = camera; self.priority = priority; self.recordEvery = recordEvery
            plannedRecordEvery = recordEvery
        }
    }

    public struct Decision: Equatable, Sendable {
        public enum Action: Equatable, Sendable {
            case slow(recordEvery: Int), disable
            /// Back to the camera's planned stride: the pressure that slowed it is gone.
            case restore(recordEvery: Int)
        }
        public var node: String
        public var camera: String
        public var action: Action
        /// One sentence for the event and the log.
        public var sentence: String
    }

    public let policy: PressurePolicy
    public private(set) var cameras: [Camera]
    private var levels: [String: PressureLevel] = [:]
    /// When each node's level last made the responder act (rig µs).
    private var lastAction: [String: Int64] = [:]
    /// Since when each node has been below serious (rig µs).
    private var calmSince: [String: Int64] = [:]

    public init(policy: PressurePolicy, cameras: [Camera]) {
        self.policy = policy
        self.cameras = cameras
    }

    public func level(of node: String) -> PressureLevel { levels[node] ?? .nominal }

    /// A node's level as of `now` (rig µs). Acts when the level rises to serious or critical, and again every
    /// `repeatSeconds` while it stays there; once the node has been calm for `restoreSeconds`, its slowed cameras
    /// return to their planned rate (a disabled camera's files have ended and stay ended).
    public mutating func observe(node: String, reading: PressureReading, now: Int64) -> [Decision] {
        let previous = levels[node] ?? .nominal
        levels[node] = reading.level
        let action: PressurePolicy.Action
        switch reading.level {
        case .serious: action = policy.serious
        case .critical: action = policy.critical
        default: return restore(node: node, now: now)
        }
        calmSince[node] = nil
        let rose = reading.level > previous
        let due = lastAction[node].map { now - $0 >= policy.repeatInterval.microseconds } ?? true
        guard rose || due else { return [] }
        guard let decision = decide(action, node: node, reading: reading) else { return [] }
        lastAction[node] = now
        return [decision]
    }

    private mutating func restore(node: String, now: Int64) -> [Decision] {
        let calm = calmSince[node] ?? now
        calmSince[node] = calm
        let wait = policy.restoreInterval.microseconds
        guard now - calm >= wait, lastAction[node].map({ now - $0 >= wait }) ?? true else { return [] }
        var decisions: [Decision] = []
        for i in cameras.indices where cameras[i].node == node && !cameras[i].disabled && cameras[i].recordEvery > cameras[i].plannedRecordEvery {
            cameras[i].recordEvery = cameras[i].plannedRecordEvery
            let c = cameras[i]
            let rate = c.plannedRecordEvery == 1 ? "every group again" : "one group in \(c.plannedRecordEvery) again, as planned"
            decisions.append(Decision(node: node, camera: c.camera, action: .restore(recordEvery: c.plannedRecordEvery),
                                      sentence: "camera \(node)/\(c.camera) records \(rate): node \(node) has been calm for \(Self.seconds(now - calm))."))
        }
        if !decisions.isEmpty { lastAction[node] = now }
        return decisions
    }

    private static func seconds(_ microseconds: Int64) -> String {
        let tenths = (microseconds + 50_000) / 100_000
        return "\(tenths / 10).\(tenths % 10) s"
    }

    private mutating func decide(_ action: PressurePolicy.Action, node: String, reading: PressureReading) -> Decision? {
        let active = cameras.indices.filter { cameras[$0].node == node && !cameras[$0].disabled }
            .sorted { (cameras[$0].priority, cameras[$0].camera) < (cameras[$1].priority, cameras[$1].camera) }
        let why = "\(reading.level.name) pressure on node \(node): \(reading.cause)"
        switch action {
        case .none:
            return nil
        case .slow:
            guard let i = active.first(where: { cameras[$0].recordEvery < policy.slowRecordEvery }) else { return nil }
            cameras[i].recordEvery = policy.slowRecordEvery
            let c = cameras[i]
            return Decision(node: node, camera: c.camera, action: .slow(recordEvery: policy.slowRecordEvery),
                            sentence: "camera \(node)/\(c.camera) (priority \(c.priority)) now records one group in \(policy.slowRecordEvery): \(why).")
        case .disable:
            // The last camera is left running: stopping a whole node is the node's own call, at shutdown.
            guard active.count > 1, let i = active.first else { return nil }
            cameras[i].disabled = true
            let c = cameras[i]
            return Decision(node: node, camera: c.camera, action: .disable,
                            sentence: "camera \(node)/\(c.camera) (priority \(c.priority)) was disabled while the others record on: \(why).")
        }
    }
}

extension Budget {
    /// A take length as the operator reads it: `45 s`, `12 min 30 s`, `2 h 5 min`.
    public static func duration(_ seconds: Double) -> String { BudgetFigures.duration(seconds) }
}
