import Testing
@testable import CoordCore

@Suite struct PhaseControllerTests {
    let grid = FrameGrid(t0: 0, periodMicroseconds: 33_333)

    @Test func onTheGridTheSensorKeepsTheGridPeriod() {
        var c = PhaseController(grid: grid, minPeriodMicroseconds: 10_000, maxPeriodMicroseconds: 100_000)
        #expect(c.nextPeriod(afterFrameCenteredAt: 33_333 * 7) == 33_333)
    }

    @Test func largeErrorIsCorrectedInOneStepAndTheNextObservationIgnored() {
        var c = PhaseController(grid: grid, minPeriodMicroseconds: 10_000, maxPeriodMicroseconds: 100_000)
        // 5 ms late: shorten one frame by 5 ms.
        #expect(c.nextPeriod(afterFrameCenteredAt: 5_000) == 28_333)
        // The next frame was already exposing with the old duration: its (unchanged) error is not corrected twice.
        #expect(c.nextPeriod(afterFrameCenteredAt: 33_333 + 5_000) == 33_333)
        // Small errors then get a proportional correction (gain 0.25): 200 µs early → lengthen by 50 µs.
        #expect(c.nextPeriod(afterFrameCenteredAt: 2 * 33_333 - 200) == 33_383)
    }

    @Test func requestsStayWithinTheSensorsLimits() {
        var c = PhaseController(grid: grid, minPeriodMicroseconds: 32_000, maxPeriodMicroseconds: 34_000)
        #expect(c.nextPeriod(afterFrameCenteredAt: 10_000) == 32_000)
        _ = c.nextPeriod(afterFrameCenteredAt: 0)
        #expect(c.nextPeriod(afterFrameCenteredAt: -10_000) == 34_000)
        var rng = SeededRandom(seed: 2)
        for _ in 0..<2_000 {
            let d = c.nextPeriod(afterFrameCenteredAt: rng.int(Int64(-1_000_000)...1_000_000))
            #expect(d >= 32_000 && d <= 34_000)
        }
    }

    @Test func canShiftPhaseOnlyWithRoomOnBothSides() {
        #expect(PhaseController(grid: grid, minPeriodMicroseconds: 16_667, maxPeriodMicroseconds: 1_000_000).canShiftPhase)
        #expect(!PhaseController(grid: grid, minPeriodMicroseconds: 33_333, maxPeriodMicroseconds: 1_000_000).canShiftPhase)
        #expect(!PhaseController(grid: grid, minPeriodMicroseconds: 16_667, maxPeriodMicroseconds: 33_333).canShiftPhase)
    }

    /// Closed loop: a free-running sensor with its own rate error and noisy timestamps, whose requested duration
    /// takes effect one frame late, locks onto the grid from any start phase and stays there.
    @Test func lockedSensorTracksTheGridDespiteDriftAndNoise() {
        for seed in UInt64(1)...40 {
            var rng = SeededRandom(seed: seed)
            let p = Double(grid.periodMicroseconds)
            let drift = rng.double(-100...100) * 1e-6
            var c = PhaseController(grid: grid, minPeriodMicroseconds: p / 2, maxPeriodMicroseconds: p * 2)
            var center = Double(rng.int(Int64(1_000_000)...2_000_000))  // true exposure centre of frame 0
            var duration = p                                              // frame 0 → 1, as the sensor runs now
            var worstLocked = 0.0
            for n in 0..<300 {
                let observed = Int64((center + rng.gaussian(standardDeviation: 30)).rounded())
                let requested = c.nextPeriod(afterFrameCenteredAt: observed)
                #expect(requested >= p / 2 && requested <= p * 2)
                // Frame n+1 was already running with `duration`; the request applies to the frame after it.
                center += duration * (1 + drift)
                duration = requested
                if n >= 10 {
                    let truth = grid.phaseError(of: Int64(center.rounded()))
                    worstLocked = max(worstLocked, Double(abs(truth)))
                }
            }
            #expect(worstLocked < 120, "seed \(seed), drift \(drift * 1e6) ppm: phase error reached \(worstLocked) µs after lock")
        }
    }
}
