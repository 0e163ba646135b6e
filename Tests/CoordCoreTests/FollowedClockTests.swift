import Testing
@testable import CoordCore

/// A followed clock (issue 27) is handed to a take only while fresh, and used only when the take's own first
/// exchanges agree with it.
@Suite struct FollowedClockTests {
    /// Exchanges with a node whose clock is `offset` µs ahead of the rig's, drifting `ppm`, over a symmetric path
    /// of `oneWay` µs plus a little jitter.
    func exchanges(offset: Double, ppm: Double, from start: Int64, count: Int, every: Int64, oneWay: Int64 = 40,
                   rng: inout SeededRandom) -> [ClockProbeSample] {
        (0..<count).map { i in
            let t1 = start + Int64(i) * every
            let forward = oneWay + rng.int(Int64(0)...15), back = oneWay + rng.int(Int64(0)...15)
            let local = { (rig: Int64) -> Int64 in rig + Int64((offset + ppm * 1e-6 * Double(rig - start)).rounded()) }
            let t2 = local(t1 + forward)
            let t3 = t2 + 20
            return ClockProbeSample(t1: t1, t2: t2, t3: t3, t4: t1 + forward + 20 + back)
        }
    }

    func followed(offset: Double, ppm: Double, until end: Int64, rng: inout SeededRandom) -> FollowedClock {
        var e = ClockEstimator()
        let start = end - 10_000_000
        for s in exchanges(offset: offset, ppm: ppm, from: start, count: 300, every: 33_333, rng: &rng) { e.add(s) }
        return FollowedClock(estimator: e, since: start)
    }

    @Test func theSameClockAgreesOnceEnoughExchangesAreIn() {
        var rng = SeededRandom(seed: 27)
        let clock = followed(offset: 250_000, ppm: 30, until: 50_000_000, rng: &rng)
        // The take's exchanges continue the same clock: its offset has drifted on by 30 ppm since the start.
        let fresh = exchanges(offset: 250_000 + 30e-6 * 10_300_000, ppm: 30, from: 50_300_000, count: 3, every: 10_000, rng: &rng)
        #expect(clock.agrees(with: Array(fresh.prefix(2))) == nil, "two exchanges are not enough to decide")
        #expect(clock.agrees(with: fresh) == true)
    }

    @Test func aRestartedNodesNewClockDisagrees() {
        var rng = SeededRandom(seed: 28)
        let clock = followed(offset: 250_000, ppm: 30, until: 50_000_000, rng: &rng)
        // The node came back with another clock (1 ms away): the followed estimate must not be used.
        let fresh = exchanges(offset: 251_300, ppm: 30, from: 50_300_000, count: 3, every: 10_000, rng: &rng)
        #expect(clock.agrees(with: fresh) == false)
        // 200 µs is past any bound a loopback path leaves, too.
        let near = exchanges(offset: 250_000 + 309 + 200, ppm: 30, from: 50_300_000, count: 3, every: 10_000, rng: &rng)
        #expect(clock.agrees(with: near) == false)
    }

    @Test func onlyAFreshClockIsHandedOver() {
        var rng = SeededRandom(seed: 29)
        let clock = followed(offset: -80_000, ppm: -12, until: 50_000_000, rng: &rng)
        let newest = clock.estimator.samples.map(\.t4).max()!
        #expect(clock.isFresh(now: newest + FollowedClock.freshFor))
        #expect(!clock.isFresh(now: newest + FollowedClock.freshFor + 1))
        #expect(!FollowedClock(estimator: ClockEstimator(), since: 0).isFresh(now: 0), "a clock never probed is not fresh")
    }
}
