import Testing
@testable import CoordCore

/// The per-frame arithmetic a camera's recording and its preview share.
@Suite struct NodeTakeFrameCentresTests {
    let grid = FrameGrid(t0: 1_000_000, periodMicroseconds: 40_000)

    @Test func aCentreIsMappedOntoTheRigAndPlacedInItsNearestGroup() {
        var centres = FrameCentres(grid: grid)
        // The node's clock runs 500 µs behind the rig's: local 1 079 000.4 is rig 1 079 500.4, group 2 (1 080 000).
        let placed = centres.place(centerLocal: 1_079_000.4, mapping: ClockMapping(offsetMicroseconds: 500))
        #expect(placed == FrameCentres.Placed(center: 1_079_500, group: 2, phaseError: -500))
        #expect(centres.last == 1_079_500)
        let next = centres.place(centerLocal: 1_119_700, mapping: ClockMapping(offsetMicroseconds: 500))
        #expect(next == FrameCentres.Placed(center: 1_120_200, group: 3, phaseError: 200))
    }

    @Test func centresNeverGoBackwardsWhateverAClockUpdateDid() {
        var centres = FrameCentres(grid: grid)
        _ = centres.place(centerLocal: 1_200_000, mapping: ClockMapping(offsetMicroseconds: 0))
        // A newer mapping moves the rig 3 ms back: the next frame would land before the last one.
        let moved = centres.place(centerLocal: 1_201_000, mapping: ClockMapping(offsetMicroseconds: -3_000))
        #expect(moved.center == 1_200_001)
        #expect(moved.group == 5 && moved.phaseError == 1)
        let equal = centres.place(centerLocal: 1_203_001, mapping: ClockMapping(offsetMicroseconds: -3_000))
        #expect(equal.center == 1_200_002)
    }

    @Test func theAnchorIsAGroupOnTheNodesClockWithThePeriodThere() {
        // The node's clock runs 100 ppm fast against the rig's, 2 ms behind at local 0.
        let mapping = ClockMapping(offsetMicroseconds: 2_000, ratePPM: -100)
        let anchor = FrameCentres.anchor(of: grid, group: 3, mapping: mapping)
        #expect(abs(mapping.rig(fromLocal: anchor.instantLocal) - 1_120_000) < 1e-6)
        #expect(abs(mapping.rig(fromLocal: anchor.instantLocal + anchor.periodMicroseconds) - 1_160_000) < 1e-6)
        #expect(abs(anchor.periodMicroseconds - 40_000 * (1 + 100e-6)) < 0.01)
    }

    @Test func steeringAsksThePhaseLoopForTheNextDurationThroughTheMapping() {
        var phase = PhaseController(grid: grid, minPeriodMicroseconds: 16_667, maxPeriodMicroseconds: 1_000_000)
        let mapping = ClockMapping(offsetMicroseconds: 1_000)
        for n in 0..<30 {
            _ = phase.observe(sequence: UInt32(n), stampedCenterLocal: 1_000_000 + Double(n) * 40_000 + 7_000, durationMicroseconds: 40_000)
        }
        let steered = FrameCentres.steer(&phase, mapping: mapping, acquiring: false)
        let direct = phase.nextDuration(toLocal: { mapping.local(fromRig: $0) }, toRig: { mapping.rig(fromLocal: $0) }, acquiring: false)
        #expect(steered == direct)
        // Frames 8 ms late on the rig (7 ms late locally, plus the 1 ms offset) are pulled earlier: a shorter frame.
        #expect(steered < 40_000 && steered >= 16_667)
    }
}
