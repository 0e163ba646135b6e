import CoordCore
import CoordWire
import Foundation
import Platform
import Synchronization

/// Keeps every node's clock estimate current from the handshake to the end of the take: probes each node
/// steadily over its link (t1 and t4 are stamped at the socket), refits, and once the take is armed sends
/// each node its newest mapping every half second, so frames are placed with a fresh clock estimate. Every mapping sent is kept for the manifest's `clock_track`.
// Sendable: the nodes are `let`s and every mutable field (estimators, history, failures) is in `state`.
final class ClockTracker: Sendable {
    struct Node: Sendable {
        var name: String
        var link: NodeLink
    }

    /// Pause between probes: ClockProbePolicy (100 a second until a clock is known, then a share of a rig-wide
    /// budget, larger for a clock known less well where group 0 would be). Many exchanges matter more than which
    /// are kept: with jitter on the path the fastest of many are nearly symmetric (bench/results/README.md: lab offset error p99 went from 37 to 29 µs going from 50 to 100
    /// a second), so small rigs keep 100 a second throughout.
    static let pushInterval: Int64 = 500_000

    private let nodes: [Node]
    private struct State {
        var estimators: [String: ClockEstimator] = [:]
        var firstProbe: [String: Int64] = [:]
        var armedTake: String?
        var stopped = false
        var track: [TakeManifest.ClockTrackPoint] = []
        var inForce: [String: [(t: Int64, mapping: ClockMapping)]] = [:]
        var pushFailures: [String: String] = [:]
        var heldUpdates: [String: Int] = [:]
        var probesSent: [String: Int] = [:]
        /// The newest clock-probe reply each node sent that the coordinator could not use (one sentence naming the field).
        var probeFaults: [String: String] = [:]
        /// Followed clocks (by node) waiting for the take's own first exchanges to agree, and those exchanges.
        var confirming: [String: (followed: FollowedClock, fresh: [ClockProbeSample])] = [:]
        /// Nodes whose followed clock was used, and those aligned afresh although one was handed over.
        var followedUsed: Set<String> = []
        var followedRefused: [String: String] = [:]
        /// Followed clocks that agree but are known less well than a take needs: topped up with this take's
        /// exchanges while, in parallel, an estimate of this take's exchanges alone is made; whichever is known
        /// first is used, so a poor follow is never slower than a cold start.
        var afresh: [String: (estimator: ClockEstimator, since: Int64)] = [:]
        var toppedUp: Set<String> = []
        /// Followed clocks armed before their top-up reached `alignedUncertainty`, with about when group 0 is (µs):
        /// their top-up goes on at the burst rate (`raceOn`) until then, or up to a lead beyond it while the clock is
        /// still short of the target; the mappings pushed from arming carry it.
        var toppingUp: [String: Int64] = [:]
        /// Each known clock's claim on the rig's probe budget (`ClockProbePolicy.weight`), by node.
        var weights: [String: Double] = [:]
    }
    private let state: Mutex<State>

    /// `followed`: clocks a long-running follower (the console) already estimates, by endpoint; a fresh one seeds
    /// its node's estimate, used once the first exchanges agree with it (`FollowedClock`) — at once if the take's
    /// handshake met the same node process (`instances`, by endpoint).
    init(nodes: [Node], followed: [String: FollowedClock] = [:], instances: [String: String] = [:]) {
        self.nodes = nodes
        var initial = State()
        let now = MonotonicClock.now()
        for n in nodes {
            initial.estimators[n.name] = ClockEstimator()
            initial.weights[n.name] = ClockProbePolicy.weight(uncertainty: nil, target: Self.alignedUncertainty)
            guard let clock = followed[n.link.endpoint] else { continue }
            if clock.isFresh(now: now) {
                initial.estimators[n.name] = clock.estimator
                initial.firstProbe[n.name] = clock.since
                if clock.isSameProcess(as: instances[n.link.endpoint]) {
                    // Nothing to confirm: used as is, or topped up racing this take's own exchanges (`readiness`).
                    let u = clock.estimator.estimate(atRig: now + Self.settleAhead)?.uncertaintyMicroseconds ?? .infinity
                    if u <= Self.alignedUncertainty {
                        initial.followedUsed.insert(n.name)
                    } else {
                        initial.afresh[n.name] = (ClockEstimator(), now)
                    }
                } else {
                    initial.confirming[n.name] = (clock, [])
                }
            } else {
                initial.followedRefused[n.name] = "stale"
            }
        }
        state = Mutex(initial)
    }

    /// Every node's clock as followed now, by endpoint, for a take that starts next (see `FollowedClock`).
    func followed() -> [String: FollowedClock] {
        state.withLock { s in
            var result: [String: FollowedClock] = [:]
            for n in nodes {
                guard let estimator = s.estimators[n.name], !estimator.samples.isEmpty, s.confirming[n.name] == nil,
                      s.afresh[n.name] == nil, let since = s.firstProbe[n.name] else { continue }
                result[n.link.endpoint] = FollowedClock(estimator: estimator, since: since)
            }
            return result
        }
    }

    /// Drops what is known of `node`'s clock (its process was replaced): it is learnt again from the next exchange.
    func forget(_ node: String) {
        state.withLock { s in
            guard s.estimators[node] != nil else { return }
            s.estimators[node] = ClockEstimator()
            s.firstProbe[node] = nil
            s.confirming[node] = nil
            s.afresh[node] = nil
            s.toppingUp[node] = nil
        }
    }

    /// Which handed-over clocks were used (`toppedUp`: those of them that needed this take's exchanges too), and
    /// which nodes were aligned afresh instead (with why: stale, disagreed, uncertain).
    var followedOutcome: (used: Set<String>, refused: [String: String], toppedUp: Set<String>) {
        state.withLock { ($0.followedUsed, $0.followedRefused, $0.toppedUp) }
    }

    /// What the take's first exchanges say of a followed clock.
    enum Verdict: Sendable {
        case waiting, used, disagreed, uncertain
    }

    /// Decides on a followed clock from the take's own exchanges so far (fits: computed outside the lock).
    static func verdict(_ followed: FollowedClock, fresh: [ClockProbeSample]) -> Verdict {
        switch followed.agrees(with: fresh) {
        case nil: return .waiting
        case false?: return .disagreed
        case true?:
            let at = (fresh.map(\.t4).max() ?? 0) + settleAhead
            let u = followed.estimator.estimate(atRig: at)?.uncertaintyMicroseconds ?? .infinity
            return u <= alignedUncertainty ? .used : .uncertain
        }
    }

    /// Adds one exchange; a followed clock is confirmed, topped up or dropped for the take's own exchanges once
    /// enough are in (`verdict`, decided by the caller on the exchanges pending before this one plus this one).
    private static func add(_ sample: ClockProbeSample, began: Int64, node: String, verdict: Verdict, to s: inout State) {
        if var pending = s.confirming[node] {
            pending.fresh.append(sample)
            switch verdict {
            case .waiting:
                s.confirming[node] = pending
            case .used:
                s.confirming[node] = nil
                s.followedUsed.insert(node)
            case .disagreed, .uncertain:
                // Another clock than the one followed (a restarted node): aligned afresh from this take's exchanges.
                // One too uncertain: also topped up with them, and whichever is known first is used (`aligned`).
                s.confirming[node] = nil
                var fresh = ClockEstimator()
                for f in pending.fresh { fresh.add(f) }
                let since = pending.fresh.map(\.t1).min() ?? began
                if verdict == .disagreed {
                    s.followedRefused[node] = "disagreed"
                    s.estimators[node] = fresh
                    s.firstProbe[node] = since
                    return
                }
                s.afresh[node] = (fresh, since)
            }
        } else {
            s.afresh[node]?.estimator.add(sample)
        }
        s.estimators[node]?.add(sample)
        if s.firstProbe[node] == nil { s.firstProbe[node] = began }
    }

    /// Probes every node until cancelled or `stop()`; returns when all loops end.
    func run() async {
        await withTaskGroup(of: Void.self) { group in
            for node in nodes {
                group.addTask { await self.follow(node) }
            }
        }
    }

    func stop() {
        state.withLock { $0.stopped = true }
    }

    /// From now on every node gets its mapping pushed for `takeID`.
    func startPushing(takeID: String) {
        state.withLock { $0.armedTake = takeID }
    }

    /// How well every clock must be known, `settleAhead` µs from now (one sigma), before the take is armed.
    static let alignedUncertainty = 10.0
    static let settleAhead: Int64 = 2_500_000
    /// How well a followed clock that agrees with the take's first exchanges must be known to arm on it while its
    /// top-up goes on: the mapping armed only places the camera's start, and the mappings pushed every half
    /// second from arming carry the top-up, so what is in force at group 0 is known as well as if the take had
    /// waited (issue 27: a followed rig rolls in the lead, not the lead plus a top-up).
    static let armableUncertainty = 3 * alignedUncertainty

    /// Whether the take may arm on one node's clock now, and whether this take's exchanges alone (`racing`, beside
    /// a followed clock being topped up; nil: no race, `.some(nil)`: not yet a second of them) are known better
    /// than the followed estimate. Uncertainties are one sigma, µs, `settleAhead` from now.
    static func readiness(confirming: Bool, main: Double?, racing: Double??) -> (ready: Bool, useAfresh: Bool) {
        if confirming { return (false, false) }
        if let main, main <= alignedUncertainty { return (true, false) }
        guard let racing else { return (false, false) }
        let useAfresh = (racing ?? .infinity) < (main ?? .infinity)
        if let racing, racing <= alignedUncertainty { return (true, useAfresh) }
        if !useAfresh, let main, main <= armableUncertainty { return (true, false) }
        return (false, useAfresh)
    }

    /// Waits until every node has a second of probes and its clock is known to `alignedUncertainty` µs (one
    /// sigma) `settleAhead` from now, about where group 0 will be (a followed clock being topped up: to
    /// `armableUncertainty`, see `readiness`), or until `timeout`; then returns each node's mapping. On a jittery
    /// network that takes longer: starting sooner would record the first seconds with a poorly known rate. A node
    /// that answered no probe at all is named in the error.
    func aligned(timeout: Double = 10) async throws -> [String: ClockMapping] {
        let deadline = MonotonicClock.now() + Int64(timeout * 1e6)
        while true {
            let now = MonotonicClock.now()
            let nodes = self.nodes
            // The fits are computed on a copy, outside the lock the probing loops take for every exchange.
            let (estimators, firstProbe, confirming, afresh, silent) = state.withLock { s in
                (s.estimators, s.firstProbe, Set(s.confirming.keys), s.afresh,
                 nodes.filter { (s.estimators[$0.name]?.samples.isEmpty ?? true) || s.confirming[$0.name]?.fresh.isEmpty == true }.map(\.name))
            }
            let timedOut = now > deadline
            var ready = true
            // Topped-up clocks for which this take's exchanges alone are known better.
            var useAfresh: Set<String> = []
            for n in nodes {
                if !ready && !timedOut { break }
                let racing = afresh[n.name].map { Self.uncertainty($0.estimator, since: $0.since, now: now) }
                let decision = Self.readiness(confirming: confirming.contains(n.name),
                                              main: Self.uncertainty(estimators[n.name], since: firstProbe[n.name], now: now),
                                              racing: racing)
                if decision.useAfresh { useAfresh.insert(n.name) }
                if !decision.ready { ready = false }
            }
            if ready || timedOut {
                if !ready, let node = silent.first {
                    if let fault = state.withLock({ $0.probeFaults[node] }) {
                        throw CoordError(.failure, "node \(node)'s clock cannot be aligned: it answered no usable clock probe within \(Int(timeout)) s (\(fault.hasSuffix(".") ? String(fault.dropLast()) : fault)).", node: node)
                    }
                    throw CoordError(.failure, "node \(node) answered no clock probe within \(Int(timeout)) s; its clock cannot be aligned.", node: node)
                }
                settleTopUps(useAfresh: useAfresh, until: now + Self.settleAhead)
                break
            }
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        var result: [String: ClockMapping] = [:]
        for n in nodes {
            guard let m = estimate(n.name, ahead: Self.pushInterval) else {
                throw CoordError(.failure, "node \(n.name) gave no usable clock probe.")
            }
            result[n.name] = m
        }
        return result
    }

    /// The uncertainty (one sigma, µs) `settleAhead` from `now` of an estimate with a second of exchanges, at
    /// least 20; nil before.
    private static func uncertainty(_ estimator: ClockEstimator?, since: Int64?, now: Int64) -> Double? {
        guard let estimator, let since, estimator.samples.count >= 20, now - since >= 1_000_000 else { return nil }
        return estimator.estimate(atRig: now + settleAhead)?.uncertaintyMicroseconds
    }

    /// Ends every race between a topped-up followed clock and this take's exchanges alone that `useAfresh` decides
    /// for the latter; the followed clock is used for the others, and their race goes on through the lead `until`
    /// (about group 0): probed at the burst rate, and whichever estimate is known better is pushed (`raceOn`).
    private func settleTopUps(useAfresh: Set<String>, until: Int64) {
        state.withLock { s in
            for (node, racing) in s.afresh {
                if useAfresh.contains(node) {
                    s.estimators[node] = racing.estimator
                    s.firstProbe[node] = racing.since
                    s.followedRefused[node] = "uncertain"
                    s.afresh[node] = nil
                } else {
                    s.followedUsed.insert(node)
                    s.toppedUp.insert(node)
                    s.toppingUp[node] = until
                }
            }
        }
    }

    /// One step of a race that goes on after arming (`settleTopUps`), for `node` at `now`: this take's exchanges
    /// alone replace the followed estimate once they know the clock better where group 0 is (or half a second
    /// ahead, after it); the race ends once the estimate in use is known to `alignedUncertainty` there, or a lead
    /// after group 0.
    private func raceOn(_ node: String, now: Int64) {
        let (until, main, racing) = state.withLock { s in (s.toppingUp[node], s.estimators[node], s.afresh[node]) }
        guard let until else { return }
        let at = max(until, now + Self.pushInterval)
        var used = main?.estimate(atRig: at)?.uncertaintyMicroseconds ?? .infinity
        var swap = false
        if let racing, racing.estimator.samples.count >= 20, now - racing.since >= 1_000_000,
           let other = racing.estimator.estimate(atRig: at)?.uncertaintyMicroseconds, other < used {
            used = other
            swap = true
        }
        // Into the take as long again as the lead, while the estimate is short of the target: a clock still being
        // learnt moves the cameras' grid with every update, as one aligned cold does not.
        let goesOn = now < until + Self.settleAhead && used > Self.alignedUncertainty
        state.withLock { s in
            if swap, let racing = s.afresh[node] {
                s.estimators[node] = racing.estimator
                s.firstProbe[node] = racing.since
            }
            if !goesOn {
                s.toppingUp[node] = nil
                s.afresh[node] = nil
            }
        }
    }

    /// Records that `mapping` is what `node` was armed with (in force from `t`).
    func armed(_ node: String, at t: Int64, with mapping: ClockMapping) {
        state.withLock { s in
            s.inForce[node, default: []].append((t, mapping))
            s.track.append(TakeManifest.ClockTrackPoint(node: node, at: t, mapping: mapping))
        }
    }

    /// The newest estimate for `node`, its uncertainty evaluated `ahead` µs from now.
    func estimate(_ node: String, ahead: Int64 = 0) -> ClockMapping? {
        state.withLock { $0.estimators[node] }?.estimate(atRig: MonotonicClock.now() + ahead)
    }

    /// Every mapping sent, in time order.
    var clockTrack: [TakeManifest.ClockTrackPoint] {
        state.withLock { $0.track }.sorted { $0.tMicroseconds < $1.tMicroseconds }
    }

    /// The manifest's clock figures for `node` over [from, to): the offset the node used at `from` (group 0),
    /// the newest drift, and the root mean square of the uncertainties in force over the take.
    func figures(_ node: String, from: Int64, to: Int64, timeService: String) -> TakeManifest.ClockFigures {
        let history = state.withLock { $0.inForce[node] ?? [] }
        let atStart = history.last { $0.t <= from }?.mapping ?? history.first?.mapping ?? .identity
        let during = history.enumerated().filter { i, h in
            let until = i + 1 < history.count ? history[i + 1].t : Int64.max
            return until > from && h.t < to
        }.map(\.element.mapping)
        let used = during.isEmpty ? [atStart] : during
        let rms = (used.map { $0.uncertaintyMicroseconds * $0.uncertaintyMicroseconds }.reduce(0, +) / Double(used.count)).squareRoot()
        let newest = estimate(node) ?? history.last?.mapping ?? atStart
        let start = TakeManifest.ClockTrackPoint(node: node, at: from, mapping: atStart)
        let drift = TakeManifest.ClockTrackPoint(node: node, at: to, mapping: newest).driftPPM
        return TakeManifest.ClockFigures(offsetMicroseconds: start.offsetMicroseconds.rounded(), driftPPM: drift,
                                         uncertaintyMicroseconds: (rms * 10).rounded() / 10,
                                         boundMicroseconds: ((used.map(\.boundMicroseconds).max() ?? 0) * 10).rounded() / 10,
                                         timeService: timeService)
    }

    /// Clock probes sent so far, over the whole rig.
    var probes: Int { state.withLock { $0.probesSent.values.reduce(0, +) } }

    /// Clock updates a node refused or missed, by node (one sentence each).
    var failures: [String: String] {
        state.withLock { $0.pushFailures }
    }

    private var isStopped: Bool {
        state.withLock { $0.stopped }
    }

    /// How often a node's claim on the probe budget is weighed again (a fit over the window each time).
    static let weighInterval: Int64 = 250_000

    private func follow(_ node: Node) async {
        var lastPush: Int64 = 0
        var lastWeighed: Int64 = 0
        var lastTopUpCheck: Int64 = 0
        while !isStopped && !Task.isCancelled {
            let began = MonotonicClock.now()
            do {
                let sample = try await node.link.probe(timeout: 0.5)
                // Only this loop changes its node's pending confirmation: decided on a copy, outside the lock.
                let verdict = state.withLock { $0.confirming[node.name] }.map { Self.verdict($0.followed, fresh: $0.fresh + [sample]) } ?? .waiting
                state.withLock { Self.add(sample, began: began, node: node.name, verdict: verdict, to: &$0) }
            } catch let error as CoordError where error.subject.field != nil {
                // A reply with times no clock reads (checked at the edge): never fitted, named if the clock stays unknown.
                state.withLock { $0.probeFaults[node.name] = error.message }
            } catch {}
            state.withLock { $0.probesSent[node.name, default: 0] += 1 }
            let take = state.withLock { $0.armedTake }
            let now = MonotonicClock.now()
            if let take, now - lastPush >= Self.pushInterval, let mapping = estimate(node.name, ahead: Self.pushInterval / 2) {
                let held = state.withLock { $0.inForce[node.name]?.last }
                lastPush = now
                if let held, Self.shouldHold(held.mapping, insteadOf: mapping, heldFor: now - held.t) {
                    state.withLock { $0.heldUpdates[node.name, default: 0] += 1 }
                } else {
                    await push(mapping, to: node, take: take, at: now)
                }
            }
            // A race that goes on through the lead is weighed (two fits) at most every `weighInterval`.
            if now - lastTopUpCheck >= Self.weighInterval {
                lastTopUpCheck = now
                raceOn(node.name, now: now)
            }
            let (first, estimator, confirming, pending) = state.withLock { s in
                (s.firstProbe[node.name], s.estimators[node.name], s.confirming[node.name] != nil,
                 s.confirming[node.name] != nil || s.afresh[node.name] != nil)
            }
            // A followed clock being confirmed or topped up is probed at the burst rate: the take waits on it.
            let known = !pending && ClockProbePolicy.isKnown(
                probedFor: first.map { now - $0 } ?? 0,
                uncertainty: estimator?.estimate(atRig: now + Self.pushInterval)?.uncertaintyMicroseconds, target: Self.alignedUncertainty)
            // The few exchanges that confirm a followed clock go back to back: the take waits on them alone.
            var interval = confirming ? 1_000 : ClockProbePolicy.burstInterval
            if known {
                // The share a take would need: how well the clock is known where group 0 would be.
                if now - lastWeighed >= Self.weighInterval {
                    lastWeighed = now
                    let weight = ClockProbePolicy.weight(uncertainty: estimator?.estimate(atRig: now + Self.settleAhead)?.uncertaintyMicroseconds,
                                                         target: Self.alignedUncertainty)
                    state.withLock { $0.weights[node.name] = weight }
                }
                let (weight, rigWeights) = state.withLock { s in (s.weights[node.name] ?? 1, s.weights.values.reduce(0, +)) }
                interval = ClockProbePolicy.interval(weight: weight, rigWeights: rigWeights, nodes: nodes.count)
            }
            do {
                try await Task.sleep(nanoseconds: UInt64(interval) * 1000)
            } catch {
                return
            }
        }
    }

    /// Whether to keep the mapping in force rather than send a new one that is much less certain (a burst of
    /// slow exchanges while the host was loaded): a good mapping extrapolates better than a poor fit. Never for
    /// longer than 5 s, so a genuinely changing clock is still followed.
    static func shouldHold(_ current: ClockMapping, insteadOf new: ClockMapping, heldFor: Int64) -> Bool {
        heldFor < 5_000_000 && new.uncertaintyMicroseconds > max(3 * current.uncertaintyMicroseconds, 20)
    }

    /// Updates not sent because the new estimate was much less certain than the one in force, by node.
    var held: [String: Int] {
        state.withLock { $0.heldUpdates }
    }

    private func push(_ mapping: ClockMapping, to node: Node, take: String, at t: Int64) async {
        do {
            _ = try await node.link.request(CoordRequest.clockUpdate(takeID: take, clock: mapping), timeout: 1, what: "a clock update")
            state.withLock { s in
                s.inForce[node.name, default: []].append((t, mapping))
                s.track.append(TakeManifest.ClockTrackPoint(node: node.name, at: t, mapping: mapping))
            }
        } catch {
            state.withLock { $0.pushFailures[node.name] = "\(error)" }
        }
    }
}
