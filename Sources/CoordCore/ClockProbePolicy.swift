/// How often the coordinator probes one node's clock (issue 15): a burst of 100 a second until the node's clock is
/// known (a second of probes and an uncertainty within the aligned target), then a steady rate from a rig-wide
/// budget, so a large rig does not spend its coordinator on probes: every node keeps 100 a second up to 20 nodes,
/// and no node falls below 10 a second (20 samples between two half-second clock updates). Beyond 20 nodes the
/// budget goes where it is needed: a clock known less well gets more of it (`weight`), one known well less.
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

    /// A known clock's claim on the rig budget: its uncertainty (one sigma, µs, where a take would need it) over
    /// half the `target`, squared — the exchanges needed to bring a clock to a given uncertainty grow with its
    /// square — within [¼, 4]. An unknown uncertainty claims the most.
    public static func weight(uncertainty: Double?, target: Double) -> Double {
        guard let uncertainty, uncertainty.isFinite, target > 0 else { return 4 }
        let ratio = uncertainty / (target / 2)
        return min(4, max(0.25, ratio * ratio))
    }

    /// µs to wait before the next probe of a known clock whose `weight` is one of weights summing to `rigWeights`
    /// over the rig's `nodes`: the budget shared in proportion, so clocks known less well get more exchanges
    /// and the rig's total stays within the budget; never faster than the burst or slower than 10 a second.
    /// Equal weights give `interval(nodes:known: true)`.
    public static func interval(weight: Double, rigWeights: Double, nodes: Int) -> Int64 {
        guard weight > 0, rigWeights >= weight, rigWeights.isFinite else { return interval(nodes: nodes, known: true) }
        let perNode = rigBudgetPerSecond * weight / rigWeights
        return min(slowestInterval, max(burstInterval, Int64((1e6 / perNode).rounded())))
    }

    /// Whether a clock is known well enough for the steady rate: probed for a second, and its uncertainty
    /// (one sigma, µs) within `target`.
    public static func isKnown(probedFor: Duration, uncertainty: Double?, target: Double) -> Bool {
        guard let uncertainty, probedFor >= .seconds(1) else { return false }
        return uncertainty <= target
    }
}
