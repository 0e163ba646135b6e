/// How often the coordinator probes one node's clock (issue 15): a burst of 100 a second until the node's clock is
/// known (a second of probes and an uncertainty within the aligned target), then a steady rate from a rig-wide
/// budget, so a large rig does not spend its coordinator on probes: every node keeps 100 a second up to 20 nodes,
/// and no node falls below 10 a second (20 samples between two half-second clock updates).
public enum ClockProbePolicy {
    public static let burstInterval: Int64 = 10_000
    /// Probes a second the whole rig may spend once its clocks are known.
    public static let rigBudgetPerSecond = 2_000.0
    public static let slowestInterval: Int64 = 100_000

    /// µs to wait before the next probe of one node of an `nodes`-node rig.
    public static func interval(nodes: Int, known: Bool) -> Int64 {
        guard known else { return burstInterval }
        let perNode = rigBudgetPerSecond / Double(max(1, nodes))
        return min(slowestInterval, max(burstInterval, Int64((1e6 / perNode).rounded())))
    }

    /// Whether a clock is known well enough for the steady rate: probed for a second, and its uncertainty
    /// (one sigma, µs) within `target`.
    public static func isKnown(probedFor: Int64, uncertainty: Double?, target: Double) -> Bool {
        guard let uncertainty, probedFor >= 1_000_000 else { return false }
        return uncertainty <= target
    }
}
