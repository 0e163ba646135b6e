/// A node's clock as a long-running follower (the live console) has been estimating it, handed to a take so the
/// take need not align that clock again (issue 27). The take uses it only while it is fresh, and only once the
/// take's own first exchanges with the node agree with it; otherwise the node is aligned afresh, as without it.
public struct FollowedClock: Sendable {
    public var estimator: ClockEstimator
    /// When the follower's first exchange with the node began (rig timebase, µs).
    public var since: Int64
    /// The node process the follower was exchanging with (its handshake's `instance_id`), when known. A take whose
    /// own handshake meets the same process uses the clock without confirming exchanges: one process keeps one
    /// clock, and only a restart (another instance) can bring another.
    public var instance: String?

    public init(estimator: ClockEstimator, since: Int64, instance: String? = nil) {
        self.estimator = estimator
        self.since = since
        self.instance = instance
    }

    /// Whether a take that met `instance` in its handshake may use this clock without confirming it first.
    public func isSameProcess(as instance: String?) -> Bool {
        guard let mine = self.instance, let instance, !mine.isEmpty else { return false }
        return mine == instance
    }

    /// A followed clock whose newest exchange is older than this is stale: the node is probed afresh.
    public static let freshFor: Int64 = 1_000_000
    /// The take's own exchanges that must agree with a followed clock before it is used.
    public static let confirmingExchanges = 3

    /// Whether the newest exchange ended at most `freshFor` before `now`.
    public func isFresh(now: Int64) -> Bool {
        guard let newest = estimator.newestT4 else { return false }
        return now - newest <= Self.freshFor
    }

    /// Whether the take's own exchanges agree with the followed estimate: the fastest of them measures an offset
    /// within the estimate's bound there plus half its own round trip (the most path asymmetry can shift one
    /// exchange). A node that restarted with another clock, or a clock that jumped, does not agree.
    /// nil until `confirmingExchanges` exchanges are in.
    public func agrees(with fresh: [ClockProbeSample]) -> Bool? {
        guard fresh.count >= Self.confirmingExchanges, let fastest = fresh.min(by: { $0.roundTrip < $1.roundTrip }),
              let mapping = estimator.estimate(atRig: fastest.t4) else { return fresh.count >= Self.confirmingExchanges ? false : nil }
        let predicted = mapping.rig(fromLocal: fastest.localMidpoint) - fastest.localMidpoint
        return abs(fastest.offset - predicted) <= mapping.boundMicroseconds + Double(fastest.roundTrip) / 2
    }
}
