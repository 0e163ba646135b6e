/// The alignment's decisions that need no state: a followed clock's verdict, whether a take may arm on a clock,
/// whether to hold a mapping back.
extension ClockAlignment {
    /// What the take's first exchanges say of a followed clock.
    public enum Verdict: Sendable {
        case waiting, used, disagreed, uncertain
    }

    /// Decides on a followed clock from the take's own exchanges so far.
    public static func verdict(_ followed: FollowedClock, fresh: [ClockProbeSample]) -> Verdict {
        switch followed.agrees(with: fresh) {
        case nil: return .waiting
        case false?: return .disagreed
        case true?:
            let at = (fresh.map(\.t4).max() ?? 0) + settleAhead
            let u = followed.estimator.estimate(atRig: at)?.uncertaintyMicroseconds ?? .infinity
            return u <= alignedUncertainty ? .used : .uncertain
        }
    }

    /// Whether the take may arm on one node's clock now, and whether this take's exchanges alone (`racing`, beside
    /// a followed clock being topped up; nil: no race, `.some(nil)`: not yet a second of them) are known better
    /// than the followed estimate. Uncertainties are one sigma, µs, `settleAhead` from now.
    public static func readiness(confirming: Bool, main: Double?, racing: Double??) -> (ready: Bool, useAfresh: Bool) {
        if confirming { return (false, false) }
        if let main, main <= alignedUncertainty { return (true, false) }
        guard let racing else { return (false, false) }
        let useAfresh = (racing ?? .infinity) < (main ?? .infinity)
        if let racing, racing <= alignedUncertainty { return (true, useAfresh) }
        if !useAfresh, let main, main <= armableUncertainty { return (true, false) }
        return (false, useAfresh)
    }

    /// Whether to keep the mapping in force rather than send a new one that is much less certain (a burst of
    /// slow exchanges while the host was loaded): a good mapping extrapolates better than a poor fit. Never for
    /// longer than 5 s, so a genuinely changing clock is still followed.
    public static func shouldHold(_ current: ClockMapping, insteadOf new: ClockMapping, heldFor: Int64) -> Bool {
        heldFor < 5_000_000 && new.uncertaintyMicroseconds > max(3 * current.uncertaintyMicroseconds, 20)
    }

    /// The uncertainty `settleAhead` from `now` of an estimate with a second of exchanges, at least 20; nil before.
    static func uncertainty(_ estimator: ClockEstimator, since: Int64?, now: Int64) -> Double? {
        guard let since, estimator.samples.count >= 20, now - since >= 1_000_000 else { return nil }
        return estimator.estimate(atRig: now + settleAhead)?.uncertaintyMicroseconds
    }
}

/// What the alignment knows, for the take's manifest, its events and a take that starts next.
extension ClockAlignment {
    /// The newest estimate for `node`, its uncertainty evaluated at `atRig`.
    public func estimate(_ node: String, atRig: Int64) -> ClockMapping? {
        clocks[node]?.estimator.estimate(atRig: atRig)
    }

    /// Every node's clock as followed now, by endpoint, for a take that starts next (see `FollowedClock`): those
    /// with exchanges and no followed clock still being confirmed or raced.
    public func followed() -> [String: FollowedClock] {
        var result: [String: FollowedClock] = [:]
        for name in nodes {
            guard let clock = clocks[name], !clock.estimator.samples.isEmpty, case .none = clock.handover,
                  let since = clock.firstProbe else { continue }
            result[clock.endpoint] = FollowedClock(estimator: clock.estimator, since: since)
        }
        return result
    }

    /// Which handed-over clocks were used (`toppedUp`: those of them that needed this take's exchanges too), and
    /// which nodes were aligned afresh instead (with why: stale, disagreed, uncertain).
    public var followedOutcome: (used: Set<String>, refused: [String: String], toppedUp: Set<String>) {
        var used: Set<String> = [], refused: [String: String] = [:], toppedUp: Set<String> = []
        for (name, clock) in clocks {
            switch clock.handed {
            case nil: break
            case .used?: used.insert(name)
            case .toppedUp?: used.insert(name); toppedUp.insert(name)
            case .refused(let why)?: refused[name] = why
            }
        }
        return (used, refused, toppedUp)
    }

    /// Every mapping in force (armed with or pushed), in time order.
    public var clockTrack: [TakeManifest.ClockTrackPoint] {
        track.sorted { $0.tMicroseconds < $1.tMicroseconds }
    }

    /// The mappings `node` had in force, oldest first.
    public func inForce(_ node: String) -> [InForce] {
        clocks[node]?.record.inForce ?? []
    }

    /// The manifest's clock figures for `node` over [from, to): the offset the node used at `from` (group 0),
    /// the newest drift (estimated at `now`), and the root mean square of the uncertainties in force over the take.
    public func figures(_ node: String, from: Int64, to: Int64, timeService: String, now: Int64) -> TakeManifest.ClockFigures {
        let history = inForce(node)
        let atStart = history.last { $0.t <= from }?.mapping ?? history.first?.mapping ?? .identity
        let during = history.enumerated().filter { i, h in
            let until = i + 1 < history.count ? history[i + 1].t : Int64.max
            return until > from && h.t < to
        }.map(\.element.mapping)
        let used = during.isEmpty ? [atStart] : during
        let rms = (used.map { $0.uncertaintyMicroseconds * $0.uncertaintyMicroseconds }.reduce(0, +) / Double(used.count)).squareRoot()
        let newest = estimate(node, atRig: now) ?? history.last?.mapping ?? atStart
        let start = TakeManifest.ClockTrackPoint(node: node, at: from, mapping: atStart)
        let drift = TakeManifest.ClockTrackPoint(node: node, at: to, mapping: newest).driftPPM
        return TakeManifest.ClockFigures(offsetMicroseconds: start.offsetMicroseconds.rounded(), driftPPM: drift,
                                         uncertaintyMicroseconds: (rms * 10).rounded() / 10,
                                         boundMicroseconds: ((used.map(\.boundMicroseconds).max() ?? 0) * 10).rounded() / 10,
                                         timeService: timeService)
    }

    /// Clock probes sent so far, over the whole rig.
    public var probes: Int { clocks.values.reduce(0) { $0 + $1.record.probes } }

    /// Clock updates a node refused or missed, by node (one sentence each).
    public var failures: [String: String] { clocks.compactMapValues(\.record.pushFailure) }

    /// Updates not sent because the new estimate was much less certain than the one in force, by node.
    public var held: [String: Int] { clocks.compactMapValues { $0.record.held > 0 ? $0.record.held : nil } }
}
