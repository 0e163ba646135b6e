import CoordCore
import CoordWire
import Foundation
import Platform
import Synchronization

/// Keeps every node's clock estimate current from the handshake to the end of the take: probes each node
/// steadily over its link (t1 and t4 are stamped at the socket) and, once the take is armed, sends each node its
/// newest mapping every half second, so frames are placed with a fresh clock estimate. What to probe, push and
/// use is `ClockAlignment`'s to decide; this is the loop that owns the links, sleeps, sends and feeds the results
/// back. Every mapping sent is kept for the manifest's `clock_track`.
// Sendable: the nodes are `let`s, the alignment is behind its Mutex and `stopped` is atomic.
final class ClockTracker: Sendable {
    struct Node: Sendable {
        var name: String
        var link: NodeLink
    }

    // The policy's figures and decisions, under the names the take and its tests know them by.
    typealias Verdict = ClockAlignment.Verdict
    static let pushInterval = ClockAlignment.pushInterval
    static let alignedUncertainty = ClockAlignment.alignedUncertainty
    static let settleAhead = ClockAlignment.settleAhead
    static let armableUncertainty = ClockAlignment.armableUncertainty
    static let weighInterval = ClockAlignment.weighInterval

    static func verdict(_ followed: FollowedClock, fresh: [ClockProbeSample]) -> Verdict {
        ClockAlignment.verdict(followed, fresh: fresh)
    }

    static func readiness(confirming: Bool, main: Double?, racing: Double??) -> (ready: Bool, useAfresh: Bool) {
        ClockAlignment.readiness(confirming: confirming, main: main, racing: racing)
    }

    static func shouldHold(_ current: ClockMapping, insteadOf new: ClockMapping, heldFor: Int64) -> Bool {
        ClockAlignment.shouldHold(current, insteadOf: new, heldFor: heldFor)
    }

    private let nodes: [Node]
    private let alignment: Mutex<ClockAlignment>
    private let stopped = Atomic<Bool>(false)

    /// `followed`: clocks a long-running follower (the console) already estimates, by endpoint; a fresh one seeds
    /// its node's estimate, used once the first exchanges agree with it (`FollowedClock`) — at once if the take's
    /// handshake met the same node process (`instances`, by endpoint).
    init(nodes: [Node], followed: [String: FollowedClock] = [:], instances: [String: String] = [:]) {
        self.nodes = nodes
        alignment = Mutex(ClockAlignment(nodes: nodes.map { ($0.name, $0.link.endpoint) }, followed: followed,
                                         instances: instances, now: MonotonicClock.now()))
    }

    /// Every node's clock as followed now, by endpoint, for a take that starts next (see `FollowedClock`).
    func followed() -> [String: FollowedClock] {
        alignment.withLock { $0.followed() }
    }

    /// Drops what is known of `node`'s clock (its process was replaced): it is learnt again from the next exchange.
    func forget(_ node: String) {
        alignment.withLock { $0.forget(node) }
    }

    /// Which handed-over clocks were used (`toppedUp`: those of them that needed this take's exchanges too), and
    /// which nodes were aligned afresh instead (with why: stale, disagreed, uncertain).
    var followedOutcome: (used: Set<String>, refused: [String: String], toppedUp: Set<String>) {
        alignment.withLock { $0.followedOutcome }
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
        stopped.store(true, ordering: .relaxed)
    }

    /// From now on every node gets its mapping pushed for `takeID`.
    func startPushing(takeID: String) {
        alignment.withLock { $0.startPushing(takeID: takeID) }
    }

    /// Waits until every node's clock is known well enough to arm on (`ClockAlignment.aligned`), or until
    /// `timeout`; then returns each node's mapping. On a jittery network that takes longer: starting sooner would
    /// record the first seconds with a poorly known rate. A node that answered no probe at all is named in the error.
    func aligned(timeout: Duration = .seconds(10)) async throws -> [String: ClockMapping] {
        let deadline = MonotonicClock.now() + timeout.microseconds
        while true {
            let now = MonotonicClock.now()
            switch alignment.withLock({ $0.aligned(now: now, timedOut: now > deadline ? timeout : nil) }) {
            case .waiting: try await Task.sleep(nanoseconds: 5_000_000)
            case .aligned(let mappings): return mappings
            case .failed(let node, let sentence): throw CoordError(.failure, sentence, node: node)
            }
        }
    }

    /// Records that `mapping` is what `node` was armed with (in force from `t`).
    func armed(_ node: String, at t: Int64, with mapping: ClockMapping) {
        alignment.withLock { $0.armed(node, at: t, with: mapping) }
    }

    /// The newest estimate for `node`, its uncertainty evaluated `ahead` µs from now.
    func estimate(_ node: String, ahead: Int64 = 0) -> ClockMapping? {
        let at = MonotonicClock.now() + ahead
        return alignment.withLock { $0.estimate(node, atRig: at) }
    }

    /// Every mapping sent, in time order.
    var clockTrack: [TakeManifest.ClockTrackPoint] {
        alignment.withLock { $0.clockTrack }
    }

    /// The manifest's clock figures for `node` over [from, to): the offset the node used at `from` (group 0),
    /// the newest drift, and the root mean square of the uncertainties in force over the take.
    func figures(_ node: String, from: Int64, to: Int64, timeService: String) -> TakeManifest.ClockFigures {
        let now = MonotonicClock.now()
        return alignment.withLock { $0.figures(node, from: from, to: to, timeService: timeService, now: now) }
    }

    /// Clock probes sent so far, over the whole rig.
    var probes: Int { alignment.withLock { $0.probes } }

    /// Clock updates a node refused or missed, by node (one sentence each).
    var failures: [String: String] { alignment.withLock { $0.failures } }

    /// Updates not sent because the new estimate was much less certain than the one in force, by node.
    var held: [String: Int] { alignment.withLock { $0.held } }

    /// One node's loop: probe, hand the outcome and the time to the alignment, carry out what it says.
    private func follow(_ node: Node) async {
        while !stopped.load(ordering: .relaxed) && !Task.isCancelled {
            let began = MonotonicClock.now()
            let exchange: ClockAlignment.Exchange
            do {
                exchange = .answered(try await node.link.probe(timeout: 0.5), began: began)
            } catch let error as CoordError where error.subject.field != nil {
                exchange = .unusable(error.message)
            } catch {
                exchange = .unanswered
            }
            let directives = alignment.withLock { a in
                a.exchanged(node.name, exchange)
                return a.tick(node.name, now: MonotonicClock.now())
            }
            var pause = ClockProbePolicy.burstInterval
            for directive in directives {
                switch directive {
                case .push(_, let takeID, let mapping, let at): await push(mapping, to: node, take: takeID, at: at)
                case .probe(_, let after): pause = after
                }
            }
            do {
                try await Task.sleep(nanoseconds: UInt64(pause) * 1000)
            } catch {
                return
            }
        }
    }

    private func push(_ mapping: ClockMapping, to node: Node, take: String, at t: Int64) async {
        do {
            _ = try await node.link.request(CoordRequest.clockUpdate(takeID: take, clock: mapping), timeout: 1, what: "a clock update")
            alignment.withLock { $0.pushed(node.name, mapping, at: t) }
        } catch {
            alignment.withLock { $0.pushed(node.name, mapping, at: t, failure: "\(error)") }
        }
    }
}
