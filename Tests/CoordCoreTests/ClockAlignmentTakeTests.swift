import Testing
@testable import CoordCore

/// The alignment through a take (issue 35): a followed clock topped up through the lead while the take's own
/// exchanges race it, mappings pushed every half second, an update held back when far less certain, a node
/// forgotten, and the manifest's figures.
@Suite struct ClockAlignmentTakeTests {
    let t0: Int64 = 100_000_000

    /// A clock a console followed from the same process (so nothing to confirm), known to `jitter`'s measure.
    func handedOver(jitter: Int64, count: Int = 40, over span: Int64 = 2_000_000, seed: UInt64) -> ClockAlignment {
        var console = SimulatedPath(offset: 250_000, jitter: jitter, rng: SeededRandom(seed: seed))
        let clock = console.followed(count: count, over: span, until: t0, instance: "a1")
        return ClockAlignment(nodes: [("n1", "tcp://n1")], followed: ["tcp://n1": clock], instances: ["tcp://n1": "a1"], now: t0)
    }

    func uncertainty(_ a: ClockAlignment, at now: Int64) -> Double {
        a.estimate("n1", atRig: now + ClockAlignment.settleAhead)?.uncertaintyMicroseconds ?? .infinity
    }

    @Test func aFollowedClockKnownToTheArmableBoundIsArmedOnAndToppedUpThroughTheLead() throws {
        var a = handedOver(jitter: 70, seed: 3510)
        let u = uncertainty(a, at: t0)
        try #require(u > ClockAlignment.alignedUncertainty && u <= ClockAlignment.armableUncertainty)
        // Armed on at once, its race with the take's own exchanges going on through the lead.
        let armedOn = try #require(a.aligned(now: t0).mappings?["n1"])
        #expect(a.followedOutcome.used == ["n1"] && a.followedOutcome.toppedUp == ["n1"])
        a.armed("n1", at: t0, with: armedOn)
        a.startPushing(takeID: "T1")
        var take = SimulatedPath(offset: 250_000, rng: SeededRandom(seed: 3511))
        let first = drive(&a, "n1", &take, from: t0 + 1_000, until: t0 + 200_000)
        #expect(first.directives.pauses.allSatisfy { $0 == ClockProbePolicy.burstInterval }, "the race is probed at the burst rate")
        let racing = a.followed().isEmpty
        #expect(racing, "a clock still racing is not handed on")
        let lead = drive(&a, "n1", &take, from: first.next, until: t0 + 1_000_000)
        #expect((first.directives + lead.directives).pushes.count == 2, "a push every half second from arming")
        // Topped up with the take's exchanges, the followed estimate reached the target first: the race is over.
        #expect(a.followed()["tcp://n1"]?.since == t0 - 2_000_000)
        let last = try #require(lead.directives.pushes.last)
        #expect(last.uncertaintyMicroseconds <= ClockAlignment.alignedUncertainty)
        #expect(abs(last.offsetMicroseconds + 250_000) < 10)
        #expect(a.clockTrack.count == 1 + (first.directives + lead.directives).pushes.count)
    }

    @Test func theTakesOwnExchangesReplaceATopUpInTheLeadOnceTheyKnowTheClockBetter() throws {
        // Twenty seconds of a jittery path: topping up cannot undo them, the take's own exchanges start clean.
        var a = handedOver(jitter: 600, count: 400, over: 20_000_000, seed: 3522)
        let u = uncertainty(a, at: t0)
        try #require(u > ClockAlignment.alignedUncertainty && u <= ClockAlignment.armableUncertainty)
        _ = try #require(a.aligned(now: t0).mappings)
        a.startPushing(takeID: "T1")
        var take = SimulatedPath(offset: 250_000, rng: SeededRandom(seed: 3523))
        let lead = drive(&a, "n1", &take, from: t0 + 1_000, until: t0 + 2_000_000)
        let pushes = lead.directives.pushes
        #expect(pushes.first.map { $0.uncertaintyMicroseconds > ClockAlignment.alignedUncertainty } == true)
        #expect(pushes.last.map { $0.uncertaintyMicroseconds <= ClockAlignment.alignedUncertainty } == true)
        #expect(a.followed()["tcp://n1"]?.since == t0, "the take's own estimate is the one in use")
        #expect(a.followedOutcome.toppedUp == ["n1"], "the followed clock was armed on")
    }

    @Test func aRaceShortOfTheTargetEndsALeadAfterGroupZero() throws {
        var a = handedOver(jitter: 70, seed: 3512)
        _ = try #require(a.aligned(now: t0).mappings)
        // The take's own exchanges are poor too: the followed estimate stays in use, topped up.
        var take = SimulatedPath(offset: 250_000, jitter: 3_000, rng: SeededRandom(seed: 3513))
        let lead = drive(&a, "n1", &take, from: t0 + 1_000, until: t0 + 4_900_000)
        let racing = a.followed().isEmpty
        #expect(racing)
        #expect(lead.directives.pauses.allSatisfy { $0 == ClockProbePolicy.burstInterval })
        drive(&a, "n1", &take, from: lead.next, until: t0 + 5_300_000)
        #expect(a.followed()["tcp://n1"] != nil, "group 0 (t0 + 2.5 s) and a lead after it passed: the race is over")
    }

    @Test func theTakesOwnExchangesWinTheRaceWhenTheyKnowTheClockBetter() throws {
        var a = handedOver(jitter: 3_000, count: 400, over: 20_000_000, seed: 3514)
        #expect(uncertainty(a, at: t0) > ClockAlignment.armableUncertainty)
        #expect(a.aligned(now: t0) == .waiting, "too poorly known to arm on")
        var take = SimulatedPath(offset: 250_000, rng: SeededRandom(seed: 3515))
        let run = drive(&a, "n1", &take, from: t0 + 1_000, until: t0 + 1_200_000)
        let m = try #require(a.aligned(now: run.next).mappings?["n1"])
        #expect(a.followedOutcome.refused == ["n1": "uncertain"] && a.followedOutcome.used.isEmpty)
        #expect(m.uncertaintyMicroseconds <= ClockAlignment.alignedUncertainty)
        #expect(abs(m.offsetMicroseconds + 250_000) < 10)
        #expect(a.followed()["tcp://n1"]?.since == t0, "the take's own estimate (racing since the take began) replaced the followed one")
    }

    @Test func aFollowedClockOfAnotherProcessThatAgreesButIsUncertainIsToppedUp() throws {
        var console = SimulatedPath(offset: 250_000, jitter: 70, rng: SeededRandom(seed: 3516))
        let clock = console.followed(count: 40, over: 2_000_000, until: t0)
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], followed: ["tcp://n1": clock], now: t0)
        var take = SimulatedPath(offset: 250_000, rng: SeededRandom(seed: 3517))
        let confirm = drive(&a, "n1", &take, from: t0 + 1_000, until: t0 + 4_000)
        #expect(confirm.directives.pauses.first == ClockAlignment.confirmingInterval)
        #expect(confirm.directives.pauses.last == ClockProbePolicy.burstInterval, "agreed: racing at the burst rate")
        _ = try #require(a.aligned(now: confirm.next).mappings)
        #expect(a.followedOutcome.toppedUp == ["n1"] && a.followedOutcome.refused.isEmpty)
    }

    @Test func anArmedTakeGetsAMappingEveryHalfSecondAndARefusalIsKept() {
        var path = SimulatedPath(offset: -9_000, rng: SeededRandom(seed: 3518))
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], now: t0)
        let before = drive(&a, "n1", &path, from: t0, until: t0 + 1_500_000)
        #expect(before.directives.pushes.isEmpty, "nothing is pushed before a take is armed")
        a.startPushing(takeID: "T2")
        let during = drive(&a, "n1", &path, from: before.next, until: before.next + 2_000_000)
        let pushes = during.directives.compactMap { d -> (String, Int64)? in
            if case .push(_, let take, _, let at) = d { (take, at) } else { nil }
        }
        #expect(pushes.count == 4 && pushes.allSatisfy { $0.0 == "T2" })
        #expect(zip(pushes, pushes.dropFirst()).allSatisfy { $1.1 - $0.1 >= ClockAlignment.pushInterval })
        #expect(a.clockTrack.map(\.tMicroseconds) == pushes.map(\.1))
        #expect(a.failures.isEmpty)
        drive(&a, "n1", &path, from: during.next, until: during.next + 600_000, pushFails: true)
        #expect(a.failures == ["n1": "node n1 refused the clock update."])
        #expect(a.clockTrack.count == 4, "a refused update is not in force")
    }

    @Test func anUpdateFarLessCertainThanTheMappingInForceIsHeldForUpToFiveSeconds() {
        var path = SimulatedPath(offset: 500, jitter: 400, rng: SeededRandom(seed: 3519))
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], now: t0)
        a.armed("n1", at: t0, with: ClockMapping(offsetMicroseconds: -500, uncertaintyMicroseconds: 1))
        a.startPushing(takeID: "T3")
        // A handful of exchanges over a jittery path: every estimate is far less certain than the mapping in force.
        var t = t0
        var pushes = 0
        for _ in 0..<4 {
            let sample = path.exchange(at: t)
            a.exchanged("n1", .answered(sample, began: t))
            pushes += a.tick("n1", now: sample.t4).pushes.count
            t += 1_500_000
        }
        #expect(pushes == 0)
        #expect(a.held == ["n1": 4])
        let sample = path.exchange(at: t0 + 5_000_000)
        a.exchanged("n1", .answered(sample, began: t0 + 5_000_000))
        #expect(a.tick("n1", now: sample.t4).pushes.count == 1, "never held for more than 5 s")
    }

    @Test func aForgottenNodeIsLearntAgainFromItsNextExchange() throws {
        var path = SimulatedPath(offset: 1_000, rng: SeededRandom(seed: 3520))
        var a = ClockAlignment(nodes: [("n1", "tcp://n1"), ("n2", "tcp://n2")], now: t0)
        let run = drive(&a, "n1", &path, from: t0, until: t0 + 1_200_000)
        drive(&a, "n2", &path, from: t0, until: t0 + 1_200_000)
        _ = try #require(a.aligned(now: run.next).mappings)
        a.forget("n2")
        #expect(a.estimate("n2", atRig: run.next) == nil)
        #expect(a.followed().keys.sorted() == ["tcp://n1"])
        #expect(a.aligned(now: run.next) == .waiting)
        var restarted = SimulatedPath(offset: 77_000, rng: SeededRandom(seed: 3521))
        let again = drive(&a, "n2", &restarted, from: run.next, until: run.next + 1_100_000)
        let m = try #require(a.aligned(now: again.next).mappings?["n2"])
        #expect(abs(m.offsetMicroseconds + 77_000) < 10)
    }

    @Test func theFiguresAreTheMappingInForceAtGroupZeroAndTheRootMeanSquareOverTheTake() {
        var a = ClockAlignment(nodes: [("n1", "tcp://n1")], now: t0)
        a.armed("n1", at: t0, with: ClockMapping(offsetMicroseconds: -100, uncertaintyMicroseconds: 3))
        a.pushed("n1", ClockMapping(offsetMicroseconds: -104, uncertaintyMicroseconds: 4), at: t0 + 3_000_000)
        a.pushed("n1", ClockMapping(offsetMicroseconds: -108, uncertaintyMicroseconds: 50), at: t0 + 9_000_000)
        let f = a.figures("n1", from: t0 + 2_000_000, to: t0 + 8_000_000, timeService: "chrony", now: t0 + 8_000_000)
        #expect(f.offsetMicroseconds == 100, "node minus rig, at group 0: the armed mapping")
        #expect(f.uncertaintyMicroseconds == 3.5, "the two mappings in force over the take; the third came after it")
        #expect(f.timeService == "chrony")
        #expect(a.inForce("n1").count == 3 && a.clockTrack.map(\.tMicroseconds) == [t0, t0 + 3_000_000, t0 + 9_000_000])
    }
}
