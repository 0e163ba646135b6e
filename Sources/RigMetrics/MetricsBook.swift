import CoordCore
import Prometheus
import Synchronization

/// Prometheus metrics for one node (coord-node --metrics) or a whole rig (coord console): every name starts with
/// `coord_node_`, times are in seconds (Prometheus' base unit), per-camera series carry `node` and `camera` labels (CONTRACT §7). Each scrape hands it the
/// newest samples; counters are kept as running totals over this process's life, so a new take (whose own counts
/// start again at zero) never makes a counter go backwards.
public final class MetricsBook: Sendable {
    private let registry = PrometheusCollectorRegistry()
    /// The last value seen of every running total, and for per-take counts the take it belonged to.
    private let seen = Mutex<[String: (take: String, value: UInt64)]>([:])
    /// Cameras given a phase gauge, by node: one absent from a later sample has its phase set to NaN (unknown).
    private let phased = Mutex<[String: Set<String>]>([:])

    public init() {}

    /// The text exposition after taking in `samples`.
    public func exposition(_ samples: [NodeMetricsSample]) -> String {
        for sample in samples { take(sample) }
        return registry.emitToString()
    }

    private func take(_ s: NodeMetricsSample) {
        let node = [("node", s.node)]
        gauge("coord_node_up", "1 when the node answers (a node scraped directly always does)", node).set(to: s.reachable ? 1 : 0)
        gauge("coord_node_recording", "1 while the node records a take", node).set(to: s.recording ? 1 : 0)
        // Known only while a take is armed or recording; NaN otherwise, never the last take's figure.
        gauge("coord_node_clock_uncertainty_seconds", "One-sigma uncertainty of the node's rig-clock mapping (NaN: no take)", node)
            .set(to: s.clockUncertaintyMicroseconds.map { $0 / 1e6 } ?? .nan)
        if let p = s.pressure {
            gauge("coord_node_pressure_level", "System pressure: 1 nominal, 2 fair, 3 serious, 4 critical, 5 shutdown", node).set(to: Double(p.rawValue))
        }
        if let free = s.freeDiskBytes {
            gauge("coord_node_staging_free_bytes", "Free bytes on the staging filesystem", node).set(to: Double(free))
        }
        if let takes = s.takesRecorded {
            total("coord_node_takes_recorded_total", "Takes this node process recorded to the end", node, key: "\(s.node)|takes", to: takes)
        }
        if let served = s.bytesServed {
            total("coord_node_collection_served_bytes_total", "Bytes of take files served to collection", node, key: "\(s.node)|served", to: served)
        }
        for c in s.cameras {
            let labels = [("node", s.node), ("camera", c.camera)]
            let key = "\(s.node)|\(c.camera)"
            total("coord_node_camera_frames_total", "Frames written (repeats included)", labels, key: key + "|frames", to: c.frames, take: c.takeID)
            total("coord_node_camera_dups_total", "Groups filled with a repeated frame", labels, key: key + "|dups", to: c.dups, take: c.takeID)
            total("coord_node_camera_drops_total", "Frames the sensor lost", labels, key: key + "|drops", to: c.drops, take: c.takeID)
            total("coord_node_camera_written_bytes_total", "Bytes of the camera's .mkv written", labels, key: key + "|bytes", to: c.bytesWritten, take: c.takeID)
            phaseGauge(labels).set(to: c.phaseErrorMicroseconds.map { $0 / 1e6 } ?? .nan)
        }
        let current = Set(s.cameras.map(\.camera))
        let gone = phased.withLock { phased -> Set<String> in
            defer { phased[s.node, default: []].formUnion(current) }
            return phased[s.node, default: []].subtracting(current)
        }
        for camera in gone { phaseGauge([("node", s.node), ("camera", camera)]).set(to: .nan) }
    }

    /// A camera's phase: NaN while it records no take, never a stale figure.
    private func phaseGauge(_ labels: [(String, String)]) -> Gauge {
        gauge("coord_node_camera_phase_error_seconds", "The newest frame's centre minus its grid instant (NaN: not recording)", labels)
    }

    private func gauge(_ name: String, _ help: String, _ labels: [(String, String)]) -> Gauge {
        registry.makeGauge(name: name, labels: labels, help: help)
    }

    /// Grows a counter by what `value` added since it was last seen. `value` is cumulative within `take` (a process
    /// life, or one take's count, which starts again from zero with the next take).
    private func total(_ name: String, _ help: String, _ labels: [(String, String)], key: String, to value: UInt64, take: String = "") {
        let delta: UInt64 = seen.withLock { seen in
            let last = seen[key].flatMap { $0.take == take ? $0.value : nil } ?? 0
            seen[key] = (take, max(last, value))
            return value > last ? value - last : 0
        }
        let counter = registry.makeCounter(name: name, labels: labels, help: help)
        if delta > 0 { counter.increment(by: Int64(clamping: delta)) }
    }
}
