import Testing
@testable import CoordCore

/// Issue 23: a clock-probe reply holding the ends of Int64 trapped the estimator (a running console died ~10 s
/// after start). The core's clock arithmetic now saturates or drops such samples; none of these can trap.
@Suite struct ClockExtremesTests {
    /// Times no clock reads (beyond ±10¹⁶ µs, the ends of Int64).
    static let extremes: [Int64] = [.min, .min + 1, -10_000_000_000_000_001, 10_000_000_000_000_001, .max - 1, .max]

    @Test func roundTripOfExtremeTimesSaturatesInsteadOfTrapping() {
        let s = ClockProbeSample(t1: 0, t2: .min, t3: 0, t4: 100)
        #expect(s.roundTrip == 100 - .max)  // (100 − 0) − (0 − (−2⁶³)): the inner difference saturates at Int64.max
        #expect(!s.isPlausible)
        let equal = ClockProbeSample(t1: 0, t2: .max, t3: .max, t4: 100)
        #expect(equal.roundTrip == 100)
        #expect(!equal.isPlausible)
        #expect(ClockProbeSample(t1: .min, t2: 0, t3: 0, t4: .max).roundTrip == .max)
    }

    @Test func samplesWithTimesNoClockReadsAreDroppedAndTheFitStaysWithTheHonestOnes() {
        var estimator = ClockEstimator()
        for i in 0..<50 {
            let t1 = Int64(1_000_000 + i * 20_000)
            estimator.add(ClockProbeSample(t1: t1, t2: t1 + 500, t3: t1 + 510, t4: t1 + 40))
        }
        let honest = estimator.estimate()
        for a in Self.extremes {
            for b in Self.extremes {
                estimator.add(ClockProbeSample(t1: 2_000_000, t2: a, t3: b, t4: 2_000_050))
                estimator.add(ClockProbeSample(t1: a, t2: 0, t3: 0, t4: b))
            }
        }
        #expect(estimator.samples.count == 50)
        #expect(estimator.estimate() == honest)
        #expect(abs((honest?.offsetMicroseconds ?? 0) + 485) < 1)
    }

    @Test func anEstimatorFedOnlyExtremesHasNoEstimateAndDoesNotTrap() {
        var estimator = ClockEstimator()
        for a in Self.extremes {
            for b in Self.extremes {
                for c in Self.extremes { estimator.add(ClockProbeSample(t1: a, t2: b, t3: c, t4: .max)) }
            }
        }
        // Only samples within ±10¹⁶ with t3 ≥ t2 and t4 ≥ t1 may be kept; here t4 = Int64.max never is.
        #expect(estimator.samples.isEmpty)
        #expect(estimator.estimate() == nil)
    }

    @Test func samplesAtTheEdgeOfTheTimeRangeFitWithoutTrapping() {
        var estimator = ClockEstimator(windowMicroseconds: .max)
        let edge = ClockProbeSample.timeRange
        estimator.add(ClockProbeSample(t1: edge.lowerBound, t2: edge.upperBound, t3: edge.upperBound, t4: edge.lowerBound + 10))
        estimator.add(ClockProbeSample(t1: edge.upperBound - 10, t2: edge.lowerBound, t3: edge.lowerBound, t4: edge.upperBound))
        #expect(estimator.samples.count == 2)
        let m = estimator.estimate()
        #expect(m != nil && m!.offsetMicroseconds.isFinite)
    }

    @Test func saturatingArithmeticClampsAtTheEnds() {
        #expect(Saturating.add(Int64.max, 1) == .max)
        #expect(Saturating.add(Int64.min, -1) == .min)
        #expect(Saturating.subtract(Int64.min, 1) == .min)
        #expect(Saturating.subtract(Int64.max, -1) == .max)
        #expect(Saturating.subtract(5, 7) == -2)
        #expect(Saturating.multiply(Int64.max, 2) == .max)
        #expect(Saturating.multiply(Int64.min, 2) == .min)
        #expect(Saturating.multiply(-3, 4) == -12)
        #expect(Saturating.add(UInt64.max, 1) == .max)
        #expect(Saturating.int64(.nan) == 0)
        #expect(Saturating.int64(.infinity) == .max)
        #expect(Saturating.int64(-.infinity) == .min)
        #expect(Saturating.int64(9.3e18) == .max)
        #expect(Saturating.int64(-2.5) == -3)
        #expect(Saturating.int64(-2.5, .towardZero) == -2)
    }

    @Test func simulatedClockOfExtremeTimesDoesNotTrap() {
        let clock = SimulatedClock(offsetMicroseconds: .max, driftPPM: 1e6, hostReference: .min)
        #expect(clock.local(fromHost: .max) == .max)
        _ = clock.host(fromLocal: .min)
    }
}
