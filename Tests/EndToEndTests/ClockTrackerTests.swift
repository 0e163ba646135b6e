import CoordCore
import Platform
import Testing
import ZeroMQ
@testable import Coordinator

@Suite struct ClockTrackerHoldTests {
    func mapping(_ uncertainty: Double) -> ClockMapping {
        ClockMapping(offsetMicroseconds: 0, uncertaintyMicroseconds: uncertainty)
    }

    @Test func aFarLessCertainEstimateIsHeldBackForAWhile() {
        #expect(ClockTracker.shouldHold(mapping(4), insteadOf: mapping(900), heldFor: 1_000_000))
        #expect(ClockTracker.shouldHold(mapping(10), insteadOf: mapping(31), heldFor: 4_999_999))
    }

    @Test func aComparableEstimateIsSent() {
        #expect(!ClockTracker.shouldHold(mapping(4), insteadOf: mapping(11), heldFor: 1_000_000))
        #expect(!ClockTracker.shouldHold(mapping(4), insteadOf: mapping(19), heldFor: 1_000_000), "under 20 µs is always fine")
        #expect(!ClockTracker.shouldHold(mapping(10), insteadOf: mapping(29), heldFor: 1_000_000))
    }

    @Test func nothingIsHeldForMoreThanFiveSeconds() {
        #expect(!ClockTracker.shouldHold(mapping(4), insteadOf: mapping(900), heldFor: 5_000_000))
    }
}

/// What a take decides on a clock a console followed (issue 27): used as is, topped up with the take's own
/// exchanges, or aligned afresh; and the line that says so.
@Suite struct FollowedVerdictTests {
    /// Exchanges with a clock `offset` µs ahead of the rig's (no drift) over a path of 40 µs each way plus up to
    /// `jitter` µs.
    func exchanges(offset: Int64, from start: Int64, count: Int, every: Int64, jitter: Int64, rng: inout SeededRandom) -> [ClockProbeSample] {
        (0..<count).map { i in
            let t1 = start + Int64(i) * every
            let forward = 40 + Int64.random(in: 0...jitter, using: &rng), back = 40 + Int64.random(in: 0...jitter, using: &rng)
            return ClockProbeSample(t1: t1, t2: t1 + forward + offset, t3: t1 + forward + offset + 20, t4: t1 + forward + 20 + back)
        }
    }

    func followed(count: Int, over span: Int64, jitter: Int64, until end: Int64, rng: inout SeededRandom) -> FollowedClock {
        var e = ClockEstimator()
        for s in exchanges(offset: 250_000, from: end - span, count: count, every: span / Int64(count), jitter: jitter, rng: &rng) { e.add(s) }
        return FollowedClock(estimator: e, since: end - span)
    }

    @Test func aClockKnownWellIsUsedOneKnownPoorlyIsToppedUpAnotherIsAlignedAfresh() {
        var rng = SeededRandom(seed: 2727)
        let well = followed(count: 600, over: 20_000_000, jitter: 10, until: 40_000_000, rng: &rng)
        let poorly = followed(count: 40, over: 2_000_000, jitter: 400, until: 40_000_000, rng: &rng)
        let fresh = exchanges(offset: 250_000, from: 40_010_000, count: 3, every: 10_000, jitter: 10, rng: &rng)
        #expect(ClockTracker.verdict(well, fresh: Array(fresh.prefix(2))) == .waiting)
        #expect(ClockTracker.verdict(well, fresh: fresh) == .used)
        #expect(ClockTracker.verdict(poorly, fresh: fresh) == .uncertain)
        let restarted = exchanges(offset: 251_500, from: 40_010_000, count: 3, every: 10_000, jitter: 10, rng: &rng)
        #expect(ClockTracker.verdict(well, fresh: restarted) == .disagreed)
    }

    /// A followed clock that agrees is armed on once known to `armableUncertainty` (its top-up goes on through the
    /// lead); a cold clock, or one the take's own exchanges know better, still waits for `alignedUncertainty`.
    @Test func aFollowedClockIsArmedOnWhileItsTopUpGoesOn() {
        let target = ClockTracker.alignedUncertainty, armable = ClockTracker.armableUncertainty
        #expect(armable > target)
        // Still confirming: never ready.
        #expect(ClockTracker.readiness(confirming: true, main: 1, racing: nil) == (false, false))
        // Known well: ready, whoever it came from.
        #expect(ClockTracker.readiness(confirming: false, main: target, racing: nil) == (true, false))
        // Cold (no race): a clock known only to the armable bound waits.
        #expect(ClockTracker.readiness(confirming: false, main: armable, racing: nil) == (false, false))
        #expect(ClockTracker.readiness(confirming: false, main: nil, racing: nil) == (false, false))
        // Followed and being topped up: armed on within the armable bound, not beyond it.
        #expect(ClockTracker.readiness(confirming: false, main: target + 0.5, racing: .some(nil)) == (true, false))
        #expect(ClockTracker.readiness(confirming: false, main: armable, racing: .some(nil)) == (true, false))
        #expect(ClockTracker.readiness(confirming: false, main: armable + 1, racing: .some(nil)) == (false, false))
        // The take's own exchanges know it better: used instead, and only once they reach the target.
        #expect(ClockTracker.readiness(confirming: false, main: 25, racing: .some(12)) == (false, true))
        #expect(ClockTracker.readiness(confirming: false, main: 25, racing: .some(target)) == (true, true))
        #expect(ClockTracker.readiness(confirming: false, main: 12, racing: .some(14)) == (true, false))
    }

    /// One process keeps one clock: a take whose handshake met the process the console followed uses its clock at
    /// once — no probe answered here — while another process's (a restart) must first agree with the take's own.
    @Test func aClockFollowedFromTheSameProcessIsUsedWithoutConfirmingExchanges() async throws {
        var rng = SeededRandom(seed: 2728)
        var clock = followed(count: 600, over: 20_000_000, jitter: 10, until: MonotonicClock.now(), rng: &rng)
        clock.instance = "a1"
        let context = ZMQContext()
        // Nothing listens there: every probe goes unanswered.
        let link = try NodeLink(endpoint: "tcp://127.0.0.1:9", context: context)
        defer { link.close() }
        let node = ClockTracker.Node(name: "n1", link: link)
        let same = ClockTracker(nodes: [node], followed: [link.endpoint: clock], instances: [link.endpoint: "a1"])
        let mapping = try #require(try await same.aligned(timeout: .seconds(1))["n1"])
        #expect(abs(mapping.offsetMicroseconds + 250_000) < 50)
        #expect(same.followedOutcome.used == ["n1"])
        let restarted = ClockTracker(nodes: [node], followed: [link.endpoint: clock], instances: [link.endpoint: "b2"])
        await #expect(throws: CoordError.self) { _ = try await restarted.aligned(timeout: .milliseconds(300)) }
        var unknown = clock
        unknown.instance = nil
        let unnamed = ClockTracker(nodes: [node], followed: [link.endpoint: unknown], instances: [link.endpoint: "a1"])
        await #expect(throws: CoordError.self) { _ = try await unnamed.aligned(timeout: .milliseconds(300)) }
    }

    @Test func theLineSaysHowManyClocksWereFollowedToppedUpAndAlignedAfresh() {
        #expect(TakeSession.followedNote((["n1", "n2", "n3"], [:], []), handed: true, nodes: 3) == " (3 of 3 already followed)")
        #expect(TakeSession.followedNote((["n1", "n2"], ["n3": "disagreed"], ["n2"]), handed: true, nodes: 3)
                == " (2 of 3 already followed, 1 of them topped up; aligned afresh: n3 disagreed)")
        #expect(TakeSession.followedNote(([], [:], []), handed: false, nodes: 3) == "")
    }
}
