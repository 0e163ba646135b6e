import Testing
@testable import CoordCore

/// The truth behind a simulated node: its local clock is `sim`; the coordinator's (rig) clock is the host clock.
private struct SimulatedNode {
    var sim: SimulatedClock

    /// Exact (unrounded) host time at a local reading: the inverse of `local = host + offset + drift·(host − ref)`.
    func trueHost(atLocal local: Double) -> Double {
        let r = sim.driftPPM * 1e-6
        return (local - Double(sim.offsetMicroseconds) + r * Double(sim.hostReference)) / (1 + r)
    }

    /// The rig's rate relative to this local clock, in ppm: d(host)/d(local) − 1.
    var trueRatePPM: Double { (1 / (1 + sim.driftPPM * 1e-6) - 1) * 1e6 }
}

/// One-way delays: a fixed base per direction plus exponential queueing, drawn independently each way.
private struct Path {
    var forwardBase: Double = 25
    var backBase: Double = 25
    var queueMean: Double = 60
}

/// `count` NTP-style exchanges spread over `span` µs of host time.
private func exchanges(_ node: SimulatedNode, path: Path, count: Int, span: Int64, startHost: Int64,
                       rng: inout SeededRandom) -> [ClockProbeSample] {
    (0..<count).map { i in
        let t1 = startHost + span * Int64(i) / Int64(max(count - 1, 1)) + rng.int(Int64(0)...50)
        let arrival = Double(t1) + path.forwardBase + rng.exponential(mean: path.queueMean)
        let t2 = node.sim.local(fromHost: Int64(arrival.rounded()))
        let t3 = t2 + rng.int(Int64(5)...80)
        let departure = node.trueHost(atLocal: Double(t3))
        let t4 = Int64((departure + path.backBase + rng.exponential(mean: path.queueMean)).rounded())
        return ClockProbeSample(t1: t1, t2: t2, t3: t3, t4: t4)
    }
}

private func estimate(_ samples: [ClockProbeSample]) -> ClockMapping? {
    var e = ClockEstimator()
    for s in samples { e.add(s) }
    return e.estimate()
}

@Suite struct ClockEstimatorTests {
    /// (offset of the node's clock from the host in ms, its drift in ppm)
    @Test(arguments: [(250, 50.0), (250, -50.0), (-250, 50.0), (-250, -50.0), (0, 0.0), (-180, -37.0), (3_600_000, 20.0)])
    func recoversOffsetAndRateFromNoisyExchanges(offsetMs: Int64, driftPPM: Double) throws {
        for seed in UInt64(1)...6 {
            var rng = SeededRandom(seed: seed &* 7919 &+ UInt64(bitPattern: offsetMs))
            let hostReference = rng.int(Int64(1_000_000_000)...9_000_000_000)
            let node = SimulatedNode(sim: SimulatedClock(offsetMicroseconds: offsetMs * 1_000, driftPPM: driftPPM,
                                                         hostReference: hostReference))
            // 1000 exchanges over 2 s, starting 30 s after the node's clock reference (so drift has built up).
            let samples = exchanges(node, path: Path(), count: 1_000, span: 2_000_000, startHost: hostReference + 30_000_000, rng: &rng)
            let m = try #require(estimate(samples))
            let ref = Double(m.referenceLocal)
            let trueOffsetAtRef = node.trueHost(atLocal: ref) - ref
            let offsetError = m.offsetMicroseconds - trueOffsetAtRef
            #expect(abs(offsetError) <= 5, "seed \(seed): offset error \(offsetError) µs")
            #expect(abs(m.ratePPM - node.trueRatePPM) <= 5, "seed \(seed): rate \(m.ratePPM) ppm, truth \(node.trueRatePPM)")
            // The stated uncertainty covers the real error at the reference and across the sampled span.
            for dx in [-1_000_000.0, 0, 1_000_000] {
                let error = m.rig(fromLocal: ref + dx) - node.trueHost(atLocal: ref + dx)
                #expect(abs(error) <= m.boundMicroseconds,
                        "seed \(seed): error \(error) µs at ref\(dx >= 0 ? "+" : "")\(dx) exceeds the bound \(m.boundMicroseconds)")
            }
        }
    }

    /// With an asymmetric path the offset is biased by half the asymmetry (undetectable in principle);
    /// the bound (which adds half the best round trip) must still cover it.
    @Test func uncertaintyCoversPathAsymmetry() throws {
        for seed in UInt64(100)...120 {
            var rng = SeededRandom(seed: seed)
            let node = SimulatedNode(sim: SimulatedClock(offsetMicroseconds: rng.int(Int64(-300_000)...300_000),
                                                         driftPPM: rng.double(-60...60), hostReference: 0))
            let path = Path(forwardBase: rng.double(10...400), backBase: rng.double(10...400), queueMean: rng.double(5...300))
            let samples = exchanges(node, path: path, count: rng.int(20...600), span: rng.int(Int64(1_000)...3_000_000),
                                    startHost: rng.int(Int64(0)...100_000_000), rng: &rng)
            let m = try #require(estimate(samples))
            let ref = Double(m.referenceLocal)
            let error = m.rig(fromLocal: ref) - node.trueHost(atLocal: ref)
            #expect(abs(error) <= m.boundMicroseconds,
                    "seed \(seed): error \(error) µs, bound \(m.boundMicroseconds) µs, path \(path)")
            #expect(m.boundMicroseconds >= abs(path.forwardBase - path.backBase) / 2 - 1, "seed \(seed)")
        }
    }

    @Test func shortSpanStillGetsTheOffsetWithinItsBound() throws {
        var rng = SeededRandom(seed: 42)
        let node = SimulatedNode(sim: SimulatedClock(offsetMicroseconds: 250_000, driftPPM: 50, hostReference: 0))
        let samples = exchanges(node, path: Path(), count: 40, span: 100_000, startHost: 5_000_000, rng: &rng)
        let m = try #require(estimate(samples))
        let ref = Double(m.referenceLocal)
        let error = m.rig(fromLocal: ref) - node.trueHost(atLocal: ref)
        #expect(abs(error) <= m.boundMicroseconds)
        #expect(abs(error) <= 20)
    }

    /// Fast exchanges win: slow exchanges with a large one-way queue must not drag the offset.
    @Test func slowAsymmetricExchangesAreOutvotedByFastOnes() throws {
        var rng = SeededRandom(seed: 9)
        let node = SimulatedNode(sim: SimulatedClock(offsetMicroseconds: -250_000, driftPPM: 0, hostReference: 0))
        var samples = exchanges(node, path: Path(forwardBase: 20, backBase: 20, queueMean: 2), count: 10, span: 50_000,
                                startHost: 1_000_000, rng: &rng)
        samples += exchanges(node, path: Path(forwardBase: 5_000, backBase: 20, queueMean: 2_000), count: 30, span: 50_000,
                             startHost: 1_000_000, rng: &rng)
        let m = try #require(estimate(samples.shuffled(using: &rng)))
        let ref = Double(m.referenceLocal)
        let error = m.rig(fromLocal: ref) - node.trueHost(atLocal: ref)
        #expect(abs(error) <= 5, "error \(error) µs")
        #expect(m.boundMicroseconds < 100)
    }

    @Test func causalityViolatingSamplesAreDropped() throws {
        var e = ClockEstimator()
        // The node claims it spent 200 µs between receiving and replying, but the whole exchange took 50.
        let impossible = ClockProbeSample(t1: 1_000, t2: 500, t3: 700, t4: 1_050)
        #expect(impossible.roundTrip < 0)
        e.add(impossible)
        #expect(e.samples.isEmpty)
        #expect(e.estimate() == nil)

        let good = ClockProbeSample(t1: 1_000, t2: 500, t3: 520, t4: 1_060)
        e.add(good)
        let before = try #require(e.estimate())
        e.add(ClockProbeSample(t1: 2_000, t2: 9_000, t3: 9_500, t4: 2_010))
        #expect(e.samples == [good])
        #expect(e.estimate() == before)

        // A zero round trip is possible (a very fast path) and is kept.
        e.add(ClockProbeSample(t1: 3_000, t2: 2_480, t3: 2_490, t4: 3_010))
        #expect(e.samples.count == 2)
    }

    @Test func sampleFiguresMatchAHandWorkedExchange() {
        // Node clock = rig − 520; 20 µs each way; 20 µs turnaround.
        let s = ClockProbeSample(t1: 1_000, t2: 500, t3: 520, t4: 1_060)
        #expect(s.roundTrip == 40)
        #expect(s.offset == 520)
        #expect(s.localMidpoint == 510)
    }

    @Test func singleSampleGivesItsOwnOffsetAndHalfItsRoundTrip() throws {
        var e = ClockEstimator()
        e.add(ClockProbeSample(t1: 1_000, t2: 500, t3: 520, t4: 1_060))
        let m = try #require(e.estimate())
        #expect(m.ratePPM == 0)
        #expect(abs(m.rig(fromLocal: 510) - 1_030) < 1)
        #expect(m.boundMicroseconds >= 20)
    }

    /// Tracking through a minute at 20 probes a second: only the window's exchanges count, and the mapping's
    /// error where it is used (up to a second past the newest exchange) stays within a few µs, with a stated
    /// one-sigma uncertainty that is honest (the error is within 3σ almost always).
    @Test func trackingKeepsTheWindowAndStaysAccurateAtTheNewestInstant() throws {
        var within3Sigma = 0, total = 0
        var worst = 0.0
        for seed in UInt64(1)...20 {
            var rng = SeededRandom(seed: seed &+ 500)
            let node = SimulatedNode(sim: SimulatedClock(offsetMicroseconds: rng.int(Int64(-500_000)...500_000),
                                                         driftPPM: rng.double(-100...100), hostReference: 0))
            var e = ClockEstimator(windowMicroseconds: 20_000_000)
            let all = exchanges(node, path: Path(forwardBase: 40, backBase: 40, queueMean: 80), count: 1_200, span: 60_000_000,
                                startHost: 1_000_000_000, rng: &rng)
            for (i, sample) in all.enumerated() {
                e.add(sample)
                guard i % 20 == 19, i > 100 else { continue }
                let later = sample.t4 + 1_000_000
                let m = try #require(e.estimate(atRig: later))
                let local = m.local(fromRig: Double(later))
                let error = m.rig(fromLocal: local) - node.trueHost(atLocal: local)
                worst = max(worst, abs(error))
                total += 1
                if abs(error) <= 3 * m.uncertaintyMicroseconds { within3Sigma += 1 }
                #expect(abs(error) <= m.boundMicroseconds)
            }
            #expect(e.samples.allSatisfy { $0.t1 >= all.last!.t1 - 20_000_000 })
            #expect(e.samples.count < 450)
        }
        #expect(worst < 20, "worst error a second past the newest exchange: \(worst) µs")
        #expect(Double(within3Sigma) / Double(total) > 0.95, "\(within3Sigma) of \(total) within 3σ")
    }

    /// A stretch in which every exchange is slow and lopsided (the node busy, one direction queued) must not
    /// drag the fit, even though each of those seconds contributes its fastest exchange.
    @Test func slowSecondsDoNotDragTheFit() throws {
        var rng = SeededRandom(seed: 77)
        let node = SimulatedNode(sim: SimulatedClock(offsetMicroseconds: 120_000, driftPPM: 40, hostReference: 0))
        var e = ClockEstimator()
        var samples = exchanges(node, path: Path(forwardBase: 40, backBase: 40, queueMean: 30), count: 200, span: 10_000_000,
                                startHost: 1_000_000_000, rng: &rng)
        // Then 5 s at one exchange a second, each 4 ms slower one way.
        samples += exchanges(node, path: Path(forwardBase: 4_000, backBase: 40, queueMean: 30), count: 5, span: 4_000_000,
                             startHost: 1_010_500_000, rng: &rng)
        for s in samples { e.add(s) }
        let m = try #require(e.estimate())
        let local = m.local(fromRig: 1_015_000_000)
        let error = m.rig(fromLocal: local) - node.trueHost(atLocal: local)
        #expect(abs(error) < 15, "error \(error) µs after five slow seconds")
    }

    /// The fit as it was made before it was kept per exchange: every estimate sorted the whole window again. The
    /// estimator kept bin by bin must give the same mapping, uncertainty and bound to rounding, whether exchanges
    /// arrive in order or not and while the window slides.
    private static func fitFromScratch(_ window: [ClockProbeSample], at: Int64) -> ClockMapping? {
        guard let best = window.map(\.roundTrip).min() else { return nil }
        var bins: [Int64: [ClockProbeSample]] = [:]
        for s in window { bins[s.t1 >= 0 ? s.t1 / 1_000_000 : (s.t1 + 1) / 1_000_000 - 1, default: []].append(s) }
        var kept: [ClockProbeSample] = []
        for (_, bin) in bins.sorted(by: { $0.key < $1.key }) {
            let sorted = bin.sorted { $0.roundTrip < $1.roundTrip }
            kept += sorted.prefix(max(1, sorted.count / 4))
        }
        let trips = kept.map(\.roundTrip).sorted()
        let limit = 2 * trips[trips.count / 2] + 20
        kept = kept.filter { $0.roundTrip <= limit }
        let reference = Int64((kept.map(\.localMidpoint).reduce(0, +) / Double(kept.count)).rounded(.towardZero))
        let xs = kept.map { $0.localMidpoint - Double(reference) }, ys = kept.map(\.offset)
        let n = Double(kept.count), meanX = xs.reduce(0, +) / n, meanY = ys.reduce(0, +) / n
        let sxx = xs.reduce(0) { $0 + ($1 - meanX) * ($1 - meanX) }
        let fitsRate = sxx > 0 && xs.max()! - xs.min()! >= 200_000
        let slope = fitsRate ? zip(xs, ys).reduce(0) { $0 + ($1.0 - meanX) * ($1.1 - meanY) } / sxx : 0
        let intercept = meanY - slope * meanX
        let squares = zip(xs, ys).reduce(0) { $0 + ($1.1 - intercept - slope * $1.0) * ($1.1 - intercept - slope * $1.0) }
        let sigma = n > (fitsRate ? 3 : 2) ? (squares / (n - (fitsRate ? 2 : 1))).squareRoot() : Double(best) / 2
        var m = ClockMapping(offsetMicroseconds: intercept, ratePPM: slope * 1e6, referenceLocal: reference)
        let dx = m.local(fromRig: Double(at)) - Double(reference) - meanX
        let rateTerm = fitsRate ? dx * dx / sxx : (100e-6 * dx / max(sigma, 1)) * (100e-6 * dx / max(sigma, 1))
        m.uncertaintyMicroseconds = sigma * (1 / n + rateTerm).squareRoot()
        m.boundMicroseconds = m.uncertaintyMicroseconds * 3 + Double(best) / 2
        return m
    }

    @Test(arguments: [false, true])
    func theFitKeptPerExchangeIsTheWholeWindowsFit(shuffled: Bool) throws {
        var rng = SeededRandom(seed: shuffled ? 11 : 5)
        let node = SimulatedNode(sim: SimulatedClock(offsetMicroseconds: -73_000, driftPPM: 31, hostReference: 4_000_000_000))
        // 30 s of exchanges at 40 a second through a 20 s window: it slides for the last 10 s.
        var samples = exchanges(node, path: Path(), count: 1_200, span: 30_000_000, startHost: 4_010_000_000, rng: &rng)
        if shuffled {
            // Out of order within a few exchanges, as replies overtaking each other would be.
            for i in stride(from: 0, to: samples.count - 3, by: 3) { samples.swapAt(i, i + 2) }
        }
        var e = ClockEstimator()
        for (i, s) in samples.enumerated() {
            e.add(s)
            guard i % 97 == 0 || i == samples.count - 1 else { continue }
            let at = s.t4 + 2_500_000
            let kept = try #require(e.estimate(atRig: at)), fresh = try #require(Self.fitFromScratch(e.samples, at: at))
            #expect(kept.referenceLocal == fresh.referenceLocal, "after \(i + 1) exchanges")
            #expect(abs(kept.offsetMicroseconds - fresh.offsetMicroseconds) < 1e-6, "after \(i + 1) exchanges")
            #expect(abs(kept.ratePPM - fresh.ratePPM) < 1e-6, "after \(i + 1) exchanges")
            #expect(abs(kept.uncertaintyMicroseconds - fresh.uncertaintyMicroseconds) < 1e-6, "after \(i + 1) exchanges")
            #expect(abs(kept.boundMicroseconds - fresh.boundMicroseconds) < 1e-6, "after \(i + 1) exchanges")
            #expect(e.bestRoundTrip == e.samples.map(\.roundTrip).min())
            #expect(e.newestT4 == e.samples.map(\.t4).max())
        }
        #expect(e.samples.count < samples.count)  // the window did slide
    }

    @Test func theMedianIsFoundWithoutSortingTheWindow() {
        var rng = SeededRandom(seed: 3)
        for count in [1, 2, 3, 10, 101, 400] {
            let values = (0..<count).map { _ in rng.int(Int64(0)...40) }  // many equal round trips, as in µs
            for rank in Set([0, count / 2, count - 1]) {
                var scratch = values
                #expect(ClockEstimator.select(&scratch, rank: rank) == values.sorted()[rank], "\(count) values, rank \(rank)")
            }
        }
    }

    @Test func noSamplesNoEstimate() {
        #expect(ClockEstimator().estimate() == nil)
    }
}

@Suite struct ClockMappingTests {
    @Test func rigAndLocalRoundTrip() {
        var rng = SeededRandom(seed: 3)
        for _ in 0..<5_000 {
            let m = ClockMapping(offsetMicroseconds: rng.double(-4e9...4e9), ratePPM: rng.double(-500...500),
                                 referenceLocal: rng.int(Int64(-1_000_000_000_000)...1_000_000_000_000),
                                 uncertaintyMicroseconds: rng.double(0...100))
            let local = Double(m.referenceLocal) + rng.double(-1e10...1e10)
            let back = m.local(fromRig: m.rig(fromLocal: local))
            #expect(abs(back - local) < 1e-2, "\(m): \(local) → \(back)")
            let rig = rng.double(-1e12...1e12)
            #expect(abs(m.rig(fromLocal: m.local(fromRig: rig)) - rig) < 1e-2)
        }
    }

    @Test func offsetHoldsAtTheReferenceAndRateAwayFromIt() {
        let m = ClockMapping(offsetMicroseconds: 250_000, ratePPM: 50, referenceLocal: 7_000_000)
        #expect(m.rig(fromLocal: 7_000_000) == 7_250_000)
        // One second of local time later the rig has advanced 1 s + 50 µs.
        #expect(abs(m.rig(fromLocal: 8_000_000) - 8_250_050) < 1e-6)
        #expect(abs(m.rig(fromLocal: 6_000_000) - 6_249_950) < 1e-6)
        #expect(ClockMapping.identity.rig(fromLocal: 123_456) == 123_456)
        #expect(ClockMapping.identity.local(fromRig: -5) == -5)
    }
}

@Suite struct SimulatedClockTests {
    /// With drift the µs-to-µs map is not one-to-one (a slow clock repeats a reading, a fast one skips one),
    /// so a round trip can only promise to come back within 1 µs.
    @Test func localAndHostRoundTripWithinAMicrosecond() {
        var rng = SeededRandom(seed: 11)
        var exact = 0
        for _ in 0..<20_000 {
            let clock = SimulatedClock(offsetMicroseconds: rng.int(Int64(-1_000_000)...1_000_000), driftPPM: rng.double(-200...200),
                                       hostReference: rng.int(Int64(0)...10_000_000_000_000))
            let host = clock.hostReference + rng.int(Int64(-100_000_000_000)...100_000_000_000)
            let back = clock.host(fromLocal: clock.local(fromHost: host))
            #expect(abs(back - host) <= 1, "\(clock) host \(host) → \(back)")
            if back == host { exact += 1 }
            let local = host + rng.int(Int64(-1_000_000)...1_000_000)
            #expect(abs(clock.local(fromHost: clock.host(fromLocal: local)) - local) <= 1, "\(clock) local \(local)")
        }
        #expect(exact > 19_000)
    }

    @Test func withoutDriftTheRoundTripIsExact() {
        var rng = SeededRandom(seed: 12)
        for _ in 0..<2_000 {
            let clock = SimulatedClock(offsetMicroseconds: rng.int(Int64(-1_000_000)...1_000_000), driftPPM: 0,
                                       hostReference: rng.int(Int64(0)...10_000_000_000_000))
            let host = rng.int(Int64(0)...10_000_000_000_000)
            #expect(clock.local(fromHost: host) == host + clock.offsetMicroseconds)
            #expect(clock.host(fromLocal: clock.local(fromHost: host)) == host)
        }
    }

    @Test func offsetAndDriftAreWhatTheyClaim() {
        let clock = SimulatedClock(offsetMicroseconds: 250_000, driftPPM: -50, hostReference: 1_000_000)
        #expect(clock.local(fromHost: 1_000_000) == 1_250_000)
        #expect(clock.local(fromHost: 2_000_000) - clock.local(fromHost: 1_000_000) == 1_000_000 - 50)
        #expect(clock.local(fromHost: 101_000_000) - clock.local(fromHost: 1_000_000) == 100_000_000 - 5_000)
    }
}
