/// The coordinator's alignment of a rig's clocks, in the manner of `TakeConductor` (issue 35): what happened goes
/// in — an exchange's outcome, the time now (a tick), "armed for take T", the mapping a node was armed with, a
/// clock update's result, a node forgotten (its process replaced) — and what to do comes out: probe this node
/// again after a pause, push it this mapping, the rig's clocks are aligned (each node's mapping), or alignment
/// failed (a sentence naming the node). It touches no socket and reads no clock, so the policy (a followed clock
/// confirmed, topped up through the lead while this take's own exchanges race it, an update held back when far
/// less certain, the probe budget) is unit-tested; `ClockTracker` is the loop that owns the links and carries the
/// directives out.
///
/// Times are the rig timebase (the coordinator's monotonic clock), µs; uncertainties one sigma, µs.
public struct ClockAlignment: Sendable {
    /// How well every clock must be known, `settleAhead` µs from now, before the take is armed.
    public static let alignedUncertainty = 10.0
    /// About where group 0 will be, from the moment the clocks are aligned.
    public static let settleAhead: Int64 = 2_500_000
    /// How well a followed clock that agrees with the take's first exchanges must be known to arm on it while its
    /// top-up goes on: the mapping armed only places the camera's start, and the mappings pushed every half
    /// second from arming carry the top-up, so what is in force at group 0 is known as well as if the take had
    /// waited (issue 27: a followed rig rolls in the lead, not the lead plus a top-up).
    public static let armableUncertainty = 3 * alignedUncertainty
    /// How often an armed take's nodes get their newest mapping.
    public static let pushInterval: Int64 = 500_000
    /// How often a node's claim on the probe budget, and a race through the lead, are weighed again (a fit each).
    public static let weighInterval: Int64 = 250_000
    /// The pause between back-to-back exchanges confirming a followed clock: the take waits on them alone.
    public static let confirmingInterval: Int64 = 1_000

    /// What the alignment asks of the shell.
    public enum Directive: Sendable, Equatable {
        /// Send `node` this mapping for take `takeID`, then say how it went (`pushed`); `at`: when it was decided.
        case push(node: String, takeID: String, mapping: ClockMapping, at: Int64)
        /// Probe `node` again this many µs after the rest is carried out.
        case probe(node: String, after: Int64)
    }

    /// One exchange's outcome.
    public enum Exchange: Sendable, Equatable {
        /// A reply with usable times; `began`: when the probe was sent.
        case answered(ClockProbeSample, began: Int64)
        /// A reply with times no clock reads (checked at the edge): never fitted, named if the clock stays unknown.
        case unusable(String)
        /// No reply in time (or the link failed).
        case unanswered
    }

    /// Where the wait for aligned clocks stands.
    public enum Alignment: Sendable, Equatable {
        case waiting
        /// Every node's mapping, its uncertainty evaluated `pushInterval` ahead.
        case aligned([String: ClockMapping])
        /// The take cannot be armed: `sentence` says why, naming `node`.
        case failed(node: String, sentence: String)
    }

    /// What the take decided on a clock a follower handed over (`followedOutcome`).
    public enum Handed: Sendable, Equatable {
        case used
        /// Used, and topped up with this take's exchanges.
        case toppedUp
        /// Aligned afresh instead: "stale", "disagreed" or "uncertain".
        case refused(String)
    }

    /// A followed clock on its way to being used.
    enum Handover: Sendable {
        case none
        /// Waiting for the take's own first exchanges (`fresh`) to agree with it.
        case confirming(FollowedClock, fresh: [ClockProbeSample])
        /// Agrees but is known less well than a take needs: topped up with this take's exchanges while an estimate
        /// of those alone (`own`, from `since`) is made; whichever is known first is used, so a poor follow is
        /// never slower than a cold start. `until`: armed on it, the race goes on through the lead to about group 0.
        case racing(own: ClockEstimator, since: Int64, until: Int64?)
    }

    /// A mapping a node had in force from `t`.
    public struct InForce: Sendable, Equatable {
        public var t: Int64
        public var mapping: ClockMapping
    }

    /// One node's clock as the alignment knows it.
    struct NodeClock: Sendable {
        let endpoint: String
        var estimator = ClockEstimator()
        /// When the first exchange the estimator holds began.
        var firstProbe: Int64?
        var handover = Handover.none
        var handed: Handed?
        /// Its claim on the rig's probe budget (`ClockProbePolicy.weight`).
        var weight: Double
        var record = Record()
        var timers = Timers()
    }

    /// What was sent, held, refused and counted for one node.
    struct Record: Sendable {
        var inForce: [InForce] = []
        var pushFailure: String?
        var held = 0
        var probes = 0
        /// The newest reply the coordinator could not use (one sentence naming the field).
        var probeFault: String?
    }

    /// When a node's periodic decisions were last made (nil: never, so due at once).
    struct Timers: Sendable {
        var push: Int64?
        var weighed: Int64?
        var race: Int64?
    }

    /// The rig's nodes in order, and their clocks.
    public let nodes: [String]
    var clocks: [String: NodeClock] = [:]
    /// The take whose nodes get their mapping pushed, once armed.
    public private(set) var armedTake: String?
    /// Every mapping in force, in the order recorded (`clockTrack` sorts it).
    var track: [TakeManifest.ClockTrackPoint] = []

    /// `nodes`: name and endpoint of each. `followed`: clocks a long-running follower (the console) already
    /// estimates, by endpoint; a fresh one seeds its node's estimate, used once the first exchanges agree with it
    /// (`FollowedClock`), or at once if the take's handshake met the same node process (`instances`, by endpoint).
    public init(nodes: [(name: String, endpoint: String)], followed: [String: FollowedClock] = [:],
                instances: [String: String] = [:], now: Int64) {
        self.nodes = nodes.map(\.name)
        for n in nodes {
            var clock = NodeClock(endpoint: n.endpoint, weight: ClockProbePolicy.weight(uncertainty: nil, target: Self.alignedUncertainty))
            if let handed = followed[n.endpoint] {
                if handed.isFresh(now: now) {
                    clock.estimator = handed.estimator
                    clock.firstProbe = handed.since
                    if handed.isSameProcess(as: instances[n.endpoint]) {
                        // Nothing to confirm: used as is, or topped up racing this take's own exchanges.
                        let u = handed.estimator.estimate(atRig: now + Self.settleAhead)?.uncertaintyMicroseconds ?? .infinity
                        if u <= Self.alignedUncertainty {
                            clock.handed = .used
                        } else {
                            clock.handover = .racing(own: ClockEstimator(), since: now, until: nil)
                        }
                    } else {
                        clock.handover = .confirming(handed, fresh: [])
                    }
                } else {
                    clock.handed = .refused("stale")
                }
            }
            clocks[n.name] = clock
        }
    }

    // MARK: Inputs

    /// One exchange with `node` ended (every probe sent counts, answered or not). A followed clock is confirmed,
    /// topped up or dropped for the take's own exchanges once enough are in (`verdict`).
    public mutating func exchanged(_ node: String, _ exchange: Exchange) {
        guard var clock = clocks.removeValue(forKey: node) else { return }
        clock.record.probes += 1
        switch exchange {
        case .answered(let sample, let began): clock.add(sample, began: began)
        case .unusable(let sentence): clock.record.probeFault = sentence
        case .unanswered: break
        }
        clocks[node] = clock
    }

    /// Time passed for `node` (after each exchange): its newest mapping pushed every `pushInterval` once a take is
    /// armed (unless held back, `shouldHold`), a race through the lead weighed, and the pause before its next probe.
    public mutating func tick(_ node: String, now: Int64) -> [Directive] {
        guard var clock = clocks.removeValue(forKey: node) else { return [] }
        defer { clocks[node] = clock }
        var directives: [Directive] = []
        if let take = armedTake, Self.isDue(clock.timers.push, now: now, every: Self.pushInterval),
           let mapping = clock.estimator.estimate(atRig: now + Self.pushInterval / 2) {
            clock.timers.push = now
            if let held = clock.record.inForce.last, Self.shouldHold(held.mapping, insteadOf: mapping, heldFor: now - held.t) {
                clock.record.held += 1
            } else {
                directives.append(.push(node: node, takeID: take, mapping: mapping, at: now))
            }
        }
        // A race that goes on through the lead is weighed (two fits) at most every `weighInterval`.
        if Self.isDue(clock.timers.race, now: now, every: Self.weighInterval) {
            clock.timers.race = now
            clock.raceOn(now: now)
        }
        // A followed clock being confirmed or topped up is probed at the burst rate: the take waits on it.
        var interval = ClockProbePolicy.burstInterval
        switch clock.handover {
        case .confirming: interval = Self.confirmingInterval
        case .racing: break
        case .none:
            let known = ClockProbePolicy.isKnown(
                probedFor: .microseconds(clock.firstProbe.map { now - $0 } ?? 0),
                uncertainty: clock.estimator.estimate(atRig: now + Self.pushInterval)?.uncertaintyMicroseconds,
                target: Self.alignedUncertainty)
            guard known else { break }
            // The share a take would need: how well the clock is known where group 0 would be.
            if Self.isDue(clock.timers.weighed, now: now, every: Self.weighInterval) {
                clock.timers.weighed = now
                clock.weight = ClockProbePolicy.weight(
                    uncertainty: clock.estimator.estimate(atRig: now + Self.settleAhead)?.uncertaintyMicroseconds,
                    target: Self.alignedUncertainty)
            }
            let rigWeights = clocks.values.reduce(clock.weight) { $0 + $1.weight }
            interval = ClockProbePolicy.interval(weight: clock.weight, rigWeights: rigWeights, nodes: nodes.count)
        }
        directives.append(.probe(node: node, after: interval))
        return directives
    }

    private static func isDue(_ last: Int64?, now: Int64, every: Int64) -> Bool {
        guard let last else { return true }
        return now - last >= every
    }

    /// From now on every node gets its mapping pushed for `takeID`.
    public mutating func startPushing(takeID: String) {
        armedTake = takeID
    }

    /// `node` was armed with `mapping`, in force from `t`.
    public mutating func armed(_ node: String, at t: Int64, with mapping: ClockMapping) {
        record(node, at: t, mapping)
    }

    /// A `push` was carried out: the node took `mapping` (in force from `t`), or refused or missed it (`failure`).
    public mutating func pushed(_ node: String, _ mapping: ClockMapping, at t: Int64, failure: String? = nil) {
        if let failure {
            clocks[node]?.record.pushFailure = failure
        } else {
            record(node, at: t, mapping)
        }
    }

    private mutating func record(_ node: String, at t: Int64, _ mapping: ClockMapping) {
        clocks[node]?.record.inForce.append(InForce(t: t, mapping: mapping))
        track.append(TakeManifest.ClockTrackPoint(node: node, at: t, mapping: mapping))
    }

    /// Drops what is known of `node`'s clock (its process was replaced): it is learnt again from the next exchange.
    public mutating func forget(_ node: String) {
        guard clocks[node] != nil else { return }
        clocks[node]?.estimator = ClockEstimator()
        clocks[node]?.firstProbe = nil
        clocks[node]?.handover = .none
    }

    /// Whether every node has a second of exchanges and its clock is known to `alignedUncertainty` `settleAhead`
    /// from `now`, about where group 0 will be (a followed clock being topped up: to `armableUncertainty`, see
    /// `readiness`). `timedOut`: how long it waited, once the wait is over; the clocks are then used as known,
    /// unless a node answered no probe at all. Aligned, each race between a topped-up followed clock and this
    /// take's own exchanges is settled, or goes on through the lead (`tick`).
    public mutating func aligned(now: Int64, timedOut: Duration? = nil) -> Alignment {
        var ready = true
        // Topped-up clocks for which this take's exchanges alone are known better.
        var useAfresh: Set<String> = []
        for name in nodes {
            guard ready || timedOut != nil, let clock = clocks[name] else { break }
            var racing: Double??
            var confirming = false
            switch clock.handover {
            case .none: break
            case .confirming: confirming = true
            case .racing(let own, let since, _): racing = Self.uncertainty(own, since: since, now: now)
            }
            let decision = Self.readiness(confirming: confirming, main: Self.uncertainty(clock.estimator, since: clock.firstProbe, now: now),
                                          racing: racing)
            if decision.useAfresh { useAfresh.insert(name) }
            if !decision.ready { ready = false }
        }
        guard ready || timedOut != nil else { return .waiting }
        if !ready, let timeout = timedOut, let node = nodes.first(where: { clocks[$0]?.isSilent ?? false }) {
            if let fault = clocks[node]?.record.probeFault {
                return .failed(node: node, sentence: "node \(node)'s clock cannot be aligned: it answered no usable clock probe within \(timeout.components.seconds) s (\(fault.hasSuffix(".") ? String(fault.dropLast()) : fault)).")
            }
            return .failed(node: node, sentence: "node \(node) answered no clock probe within \(timeout.components.seconds) s; its clock cannot be aligned.")
        }
        settleTopUps(useAfresh: useAfresh, until: now + Self.settleAhead)
        var result: [String: ClockMapping] = [:]
        for name in nodes {
            guard let m = clocks[name]?.estimator.estimate(atRig: now + Self.pushInterval) else {
                return .failed(node: name, sentence: "node \(name) gave no usable clock probe.")
            }
            result[name] = m
        }
        return .aligned(result)
    }

    /// Ends every race between a topped-up followed clock and this take's exchanges alone that `useAfresh` decides
    /// for the latter; the followed clock is used for the others, and their race goes on through the lead `until`
    /// (about group 0): probed at the burst rate, and whichever estimate is known better is pushed (`raceOn`).
    private mutating func settleTopUps(useAfresh: Set<String>, until: Int64) {
        for name in nodes {
            guard var clock = clocks[name], case .racing(let own, let since, _) = clock.handover else { continue }
            if useAfresh.contains(name) {
                clock.estimator = own
                clock.firstProbe = since
                clock.handed = .refused("uncertain")
                clock.handover = .none
            } else {
                clock.handed = .toppedUp
                clock.handover = .racing(own: own, since: since, until: until)
            }
            clocks[name] = clock
        }
    }
}

extension ClockAlignment.NodeClock {
    /// No exchange answered yet (a followed clock being confirmed: none of the take's own).
    var isSilent: Bool {
        if case .confirming(_, let fresh) = handover { return fresh.isEmpty }
        return estimator.samples.isEmpty
    }

    /// Adds one answered exchange to the estimate, and to a followed clock's confirmation or race.
    mutating func add(_ sample: ClockProbeSample, began: Int64) {
        switch handover {
        case .none:
            break
        case .confirming(let followed, var fresh):
            fresh.append(sample)
            switch ClockAlignment.verdict(followed, fresh: fresh) {
            case .waiting:
                handover = .confirming(followed, fresh: fresh)
            case .used:
                handover = .none
                handed = .used
            case let verdict:
                // Another clock than the one followed (a restarted node): aligned afresh from this take's
                // exchanges. One too uncertain: also topped up with them, and whichever is known first is used.
                handover = .none
                var own = ClockEstimator()
                for f in fresh { own.add(f) }
                let since = fresh.map(\.t1).min() ?? began
                if verdict == .disagreed {
                    handed = .refused("disagreed")
                    estimator = own
                    firstProbe = since
                    return
                }
                handover = .racing(own: own, since: since, until: nil)
            }
        case .racing(var own, let since, let until):
            // Released first, so the estimator is added to in place rather than copied.
            handover = .none
            own.add(sample)
            handover = .racing(own: own, since: since, until: until)
        }
        estimator.add(sample)
        if firstProbe == nil { firstProbe = began }
    }

    /// One step of a race that goes on after arming (`settleTopUps`) at `now`: this take's exchanges alone replace
    /// the followed estimate once they know the clock better where group 0 is (or half a second ahead, after it);
    /// the race ends once the estimate in use is known to `alignedUncertainty` there, or a lead after group 0.
    mutating func raceOn(now: Int64) {
        guard case .racing(let own, let since, let until?) = handover else { return }
        let at = max(until, now + ClockAlignment.pushInterval)
        var used = estimator.estimate(atRig: at)?.uncertaintyMicroseconds ?? .infinity
        var swap = false
        if own.samples.count >= 20, now - since >= 1_000_000, let other = own.estimate(atRig: at)?.uncertaintyMicroseconds, other < used {
            used = other
            swap = true
        }
        if swap {
            estimator = own
            firstProbe = since
        }
        // Into the take as long again as the lead, while the estimate is short of the target: a clock still being
        // learnt moves the cameras' grid with every update, as one aligned cold does not.
        if !(now < until + ClockAlignment.settleAhead && used > ClockAlignment.alignedUncertainty) {
            handover = .none
        }
    }
}
