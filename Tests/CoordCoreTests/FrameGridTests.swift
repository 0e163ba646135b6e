import Testing
@testable import CoordCore

@Suite struct FrameGridTests {
    let grid = FrameGrid(t0: 1_000, periodMicroseconds: 100)

    @Test func instantsLieOnTheGrid() {
        #expect(grid.instant(ofGroup: 0) == 1_000)
        #expect(grid.instant(ofGroup: 7) == 1_700)
        #expect(grid.instant(ofGroup: -3) == 700)
    }

    @Test func nearestGroupAroundPositiveInstants() {
        #expect(grid.nearestGroup(to: 1_000) == 0)
        #expect(grid.nearestGroup(to: 1_049) == 0)
        #expect(grid.nearestGroup(to: 1_051) == 1)
        #expect(grid.nearestGroup(to: 1_149) == 1)
        #expect(grid.nearestGroup(to: 1_151) == 2)
        #expect(grid.nearestGroup(to: 1_000 + 100 * 1_000_000) == 1_000_000)
    }

    @Test func nearestGroupBeforeT0AndBelowZeroTime() {
        #expect(grid.nearestGroup(to: 951) == 0)
        #expect(grid.nearestGroup(to: 949) == -1)
        #expect(grid.nearestGroup(to: 900) == -1)
        #expect(grid.nearestGroup(to: 851) == -1)
        #expect(grid.nearestGroup(to: 849) == -2)
        // Negative absolute times (t0 = 1000, so time −1000 is 20 periods before t0).
        #expect(grid.nearestGroup(to: -1_000) == -20)
        #expect(grid.nearestGroup(to: -1_049) == -20)
        #expect(grid.nearestGroup(to: -1_051) == -21)
        let negativeT0 = FrameGrid(t0: -5_000, periodMicroseconds: 1_000)
        #expect(negativeT0.nearestGroup(to: -5_000) == 0)
        #expect(negativeT0.nearestGroup(to: -5_499) == 0)
        #expect(negativeT0.nearestGroup(to: -5_501) == -1)
        #expect(negativeT0.nearestGroup(to: 0) == 5)
    }

    /// A time exactly half a period between two instants goes to the later group, on both sides of t0,
    /// so the rule does not change direction at t0.
    @Test func exactHalfPeriodGoesToTheLaterGroupOnBothSidesOfT0() {
        #expect(grid.nearestGroup(to: 1_050) == 1)
        #expect(grid.nearestGroup(to: 1_150) == 2)
        #expect(grid.nearestGroup(to: 950) == 0)
        #expect(grid.nearestGroup(to: 850) == -1)
        #expect(grid.nearestGroup(to: -1_050) == -20)
        #expect(grid.phaseError(of: 1_050) == -50)
        #expect(grid.phaseError(of: 950) == -50)
        #expect(grid.phaseError(of: 850) == -50)
    }

    @Test func oddPeriodHasNoTiesAndSplitsEvenly() {
        let g = FrameGrid(t0: 0, periodMicroseconds: 33_333)
        #expect(g.nearestGroup(to: 16_666) == 0)
        #expect(g.nearestGroup(to: 16_667) == 1)
        #expect(g.nearestGroup(to: -16_666) == 0)
        #expect(g.nearestGroup(to: -16_667) == -1)
    }

    @Test func nearestGroupAgreesWithDirectComparisonOverRandomTimes() {
        var rng = SeededRandom(seed: 0xF4A3)
        for _ in 0..<20_000 {
            let period = rng.int(Int64(1)...100_000)
            let grid = FrameGrid(t0: rng.int(Int64(-1_000_000_000_000)...1_000_000_000_000), periodMicroseconds: period)
            let time = grid.t0 + rng.int(Int64(-50_000_000_000)...50_000_000_000)
            let g = grid.nearestGroup(to: time)
            #expect(g == nearestGroupByComparison(time, on: grid), "t0 \(grid.t0) period \(period) time \(time)")
            let phase = grid.phaseError(of: time)
            #expect(phase == time - grid.instant(ofGroup: g))
            // Even period: [−p/2, p/2) (a tie belongs to the later group); odd period: [−(p−1)/2, (p−1)/2].
            #expect(phase >= -(period / 2) && phase < period - period / 2, "period \(period) phase \(phase)")
        }
    }

    @Test func shiftingByWholePeriodsShiftsTheGroup() {
        var rng = SeededRandom(seed: 77)
        for _ in 0..<5_000 {
            let grid = FrameGrid(t0: rng.int(Int64(-10_000_000)...10_000_000), periodMicroseconds: rng.int(Int64(2)...50_000))
            let time = rng.int(Int64(-1_000_000_000)...1_000_000_000)
            let k = rng.int(Int64(-10_000)...10_000)
            #expect(grid.nearestGroup(to: time + k * grid.periodMicroseconds) == grid.nearestGroup(to: time) + k)
        }
    }

    @Test(arguments: [
        (30, Int64(33_333)), (24, 41_667), (25, 40_000), (60, 16_667), (29, 34_483), (7, 142_857),
        (1, 1_000_000), (120, 8_333), (240, 4_167), (3, 333_333), (6, 166_667),
    ])
    func periodIsRoundedToTheNearestMicrosecond(fps: Int, expected: Int64) {
        #expect(FrameGrid.period(fps: fps) == expected)
    }

    @Test func periodIsWithinHalfAMicrosecondOfExactForEveryRate() {
        for fps in 1...1_000 {
            let p = FrameGrid.period(fps: fps)
            // |p − 1e6/fps| ≤ 1/2  ⇔  |p·fps − 1e6| ≤ fps/2
            #expect(2 * abs(p * Int64(fps) - 1_000_000) <= Int64(fps), "fps \(fps) → \(p)")
        }
    }
}
