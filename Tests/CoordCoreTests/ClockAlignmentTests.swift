import Testing
@testable import CoordCore

/// A node's clock and the path to it, for driving a `ClockAlignment` without sockets: `offset` µs ahead of the
/// rig's clock, over a path of `oneWay` µs each way plus up to `jitter`.
struct SimulatedPath {
    var offset: Int64
    var oneWay: Int64 = 40
    var jitter: Int64 = 10
    var rng: SeededRandom

    /// The exchange whose probe leaves at `t1`.
    mutating func exchange(at t1: Int64) -> ClockProbeSample {
        let forward = oneWay + rng.int(0...jitter), back = oneWay + rng.int(0...jitter)
        let t2 = t1 + forward + offset
        return ClockProbeSample(t1: t1, t2: t2, t3: t2 + 20, t4: t1 + forward + 20 + back)
    }

    /// A clock a console followed for `span` µs up to `end`, `count` exchanges.
    mutating func followed(count: Int, over span: Int64, until end: Int64, instance: String? = nil) -> FollowedClock {
        var e = ClockEstimator()
        for i in 0..<count { e.add(exchange(at: end - span + Int64(i) * span / Int64(count))) }
        return FollowedClock(estimator: e, since: end - span, instance: instance)
    }
}

/// The shell's loop, with the node answering every probe: exchange, tick, carry out (every push taken) — from
/// `start` until `end`. Returns every directive, and the time the next probe would leave.
@discardableResult
func drive(_ a: inout ClockAlignment, _ node: String, _ path: inout SimulatedPath, from start: Int64, until end: Int64,
           pushFails: Bool = false) -> (directives: [ClockAlignment.Directive], next: Int64) {
    var t = start, all: [ClockAlignment.Directive] = []
    while t < end {
        let sample = path.exchange(at: t)
        a.exchanged(node, .answered(sample, began: t))
        let directives = a.tick(node, now: sample.t4)
        var pause: Int64 = 0
        for d in directives {
            switch d {
            case .push(_, _, let mapping, let at): a.pushed(node, mapping, at: at, failure: pushFails ? "node \(node) refused the clock update." : nil)
            case .probe(_, let after): pause = after
            }
        }
        all += directives
        t = sample.t4 + pause
    }
    return (all, t)
}

extension [ClockAlignment.Directive] {
    var pushes: [ClockMapping] { compactMap { if case .push(_, _, let m, _) = $0 { m } else { nil } } }
    var pauses: [Int64] { compactMap { if case .probe(_, let after) = $0 { after } else { nil } } }
}

extension ClockAlignment.Alignment {
    var mappings: [String: ClockMapping]? { if case .aligned(let m) = self { m } else { nil } }
}

/// The coordinator's clock alignment as a pure instance (issue 35): the paths `ClockTracker` took over sockets.
@Suite struct ClockAlignmentTests {
    let t0: Int64 = 100_000_000

    @Test func aColdClockIsProbedInABurstAndAlignedOnceKnownForASecond() throws {
        var path = SimulatedPath(offset: 250_000, rng: SeededRandom(seed: 3501))
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], now: t0)
        #expect(a.aligned(now: t0) == .waiting)
        let early = drive(&a, "n1", &path, from: t0, until: t0 + 500_000)
        #expect(early.directives.pauses.allSatisfy { $0 == ClockProbePolicy.burstInterval })
        #expect(a.aligned(now: early.next) == .waiting, "half a second of exchanges is not enough")
        let later = drive(&a, "n1", &path, from: early.next, until: t0 + 1_100_000)
        let m = try #require(a.aligned(now: later.next).mappings?["n1"])
        #expect(abs(m.offsetMicroseconds + 250_000) < 10)
        #expect(m.uncertaintyMicroseconds <= ClockAlignment.alignedUncertainty)
        #expect(a.probes == (early.directives.pauses + later.directives.pauses).count)
        #expect(a.followedOutcome.used.isEmpty && a.followedOutcome.refused.isEmpty)
        #expect(a.followed()["tcp://n1"]?.since == t0, "a known clock is handed to the next take")
    }

    @Test func aKnownClockOfALargeRigTakesItsShareOfTheBudgetAndASmallRigKeepsTheBurst() {
        let names = (1...40).map { "n\($0)" }
        var big = ClockAlignment(nodes: names.map { ($0, "tcp://\($0)") }, now: t0)
        var path = SimulatedPath(offset: -3_000, rng: SeededRandom(seed: 3502))
        let run = drive(&big, "n1", &path, from: t0, until: t0 + 2_000_000)
        // Known well while 39 clocks are not: the least share, ten a second.
        #expect(run.directives.pauses.last == ClockProbePolicy.slowestInterval)
        var small = ClockAlignment(nodes: [("n1", "tcp://n1"), ("n2", "tcp://n2")], now: t0)
        let alone = drive(&small, "n1", &path, from: run.next, until: run.next + 2_000_000)
        #expect(alone.directives.pauses.allSatisfy { $0 == ClockProbePolicy.burstInterval })
    }

    @Test func aNodeThatAnsweredNoProbeIsNamedOnceTheWaitIsOver() {
        var path = SimulatedPath(offset: 10, rng: SeededRandom(seed: 3503))
        var a = ClockAlignment(nodes: [("n1", "tcp://n1"), ("n2", "tcp://n2"), ("n3", "tcp://n3")], now: t0)
        drive(&a, "n1", &path, from: t0, until: t0 + 1_200_000)
        a.exchanged("n2", .unanswered)
        a.exchanged("n3", .unusable("node n3's clock probe reply has t2 out of range."))
        #expect(a.aligned(now: t0 + 1_300_000) == .waiting)
        #expect(a.aligned(now: t0 + 10_100_000, timedOut: .seconds(10))
                == .failed(node: "n2", sentence: "node n2 answered no clock probe within 10 s; its clock cannot be aligned."))
        a.exchanged("n2", .answered(path.exchange(at: t0 + 10_200_000), began: t0 + 10_200_000))
        #expect(a.aligned(now: t0 + 10_300_000, timedOut: .seconds(10))
                == .failed(node: "n3", sentence: "node n3's clock cannot be aligned: it answered no usable clock probe within 10 s (node n3's clock probe reply has t2 out of range)."))
    }

    @Test func aClockKnownOnlyPoorlyWhenTheWaitIsOverIsUsedAsKnown() throws {
        var path = SimulatedPath(offset: 10, rng: SeededRandom(seed: 3504))
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], now: t0)
        drive(&a, "n1", &path, from: t0, until: t0 + 300_000)
        #expect(a.aligned(now: t0 + 400_000) == .waiting)
        let m = try #require(a.aligned(now: t0 + 400_000, timedOut: .seconds(10)).mappings?["n1"])
        #expect(abs(m.offsetMicroseconds + 10) < 20)
    }

    @Test func aFollowedClockOfAnotherProcessIsConfirmedByThreeBackToBackExchanges() throws {
        var path = SimulatedPath(offset: 250_000, rng: SeededRandom(seed: 3505))
        let clock = path.followed(count: 600, over: 20_000_000, until: t0)
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], followed: ["tcp://n1": clock], instances: ["tcp://n1": "b2"], now: t0)
        #expect(a.followed().isEmpty, "a clock being confirmed is not handed on")
        var t = t0 + 1_000
        for i in 0..<3 {
            #expect(a.aligned(now: t) == .waiting)
            let sample = path.exchange(at: t)
            a.exchanged("n1", .answered(sample, began: t))
            let directives = a.tick("n1", now: sample.t4)
            if i < 2 { #expect(directives.pauses == [ClockAlignment.confirmingInterval]) }
            t = sample.t4 + ClockAlignment.confirmingInterval
        }
        let m = try #require(a.aligned(now: t).mappings?["n1"])
        #expect(abs(m.offsetMicroseconds + 250_000) < 10)
        #expect(a.followedOutcome.used == ["n1"])
        #expect(a.followed()["tcp://n1"]?.since == t0 - 20_000_000)
    }

    @Test func aFollowedClockOfTheSameProcessIsUsedAtOnce() throws {
        var path = SimulatedPath(offset: -40_000, rng: SeededRandom(seed: 3506))
        let clock = path.followed(count: 600, over: 20_000_000, until: t0, instance: "a1")
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], followed: ["tcp://n1": clock], instances: ["tcp://n1": "a1"], now: t0)
        let m = try #require(a.aligned(now: t0).mappings?["n1"])
        #expect(abs(m.offsetMicroseconds - 40_000) < 10)
        #expect(a.followedOutcome.used == ["n1"] && a.followedOutcome.toppedUp.isEmpty)
    }

    @Test func aRestartedNodeDisagreesAndIsAlignedAfreshFromTheTakesExchanges() throws {
        var before = SimulatedPath(offset: 250_000, rng: SeededRandom(seed: 3507))
        let clock = before.followed(count: 600, over: 20_000_000, until: t0)
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], followed: ["tcp://n1": clock], now: t0)
        var after = SimulatedPath(offset: 251_500, rng: SeededRandom(seed: 3508))
        let run = drive(&a, "n1", &after, from: t0 + 1_000, until: t0 + 200_000)
        #expect(a.followedOutcome.refused == ["n1": "disagreed"] && a.followedOutcome.used.isEmpty)
        #expect(a.aligned(now: run.next) == .waiting, "the take's own exchanges start from nothing")
        #expect(a.followed()["tcp://n1"]?.since == t0 + 1_000)
        let rest = drive(&a, "n1", &after, from: run.next, until: t0 + 1_200_000)
        let m = try #require(a.aligned(now: rest.next).mappings?["n1"])
        #expect(abs(m.offsetMicroseconds + 251_500) < 10)
    }

    @Test func aStaleFollowedClockIsRefused() {
        var path = SimulatedPath(offset: 7, rng: SeededRandom(seed: 3509))
        let clock = path.followed(count: 600, over: 20_000_000, until: t0 - FollowedClock.freshFor - 10_000, instance: "a1")
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], followed: ["tcp://n1": clock], instances: ["tcp://n1": "a1"], now: t0)
        #expect(a.followedOutcome.refused == ["n1": "stale"])
        #expect(a.aligned(now: t0) == .waiting)
    }
}
