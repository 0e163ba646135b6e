import CoordCore
import Testing
@testable import Coordinator

@Suite struct RigStopTests {
    let grid = FrameGrid(t0: 1_000_000, periodMicroseconds: 33_333)

    @Test func theStopIsTheFirstGroupAtLeastTheLeadAfterTheLatestNode() {
        // Nodes disagree by a few µs about the rig clock: the latest one sets the stop.
        let stop = RigStop.stopGroup(grid: grid, rigNows: [5_000_000, 5_000_040, 4_999_990], lead: 2_000_000)
        #expect(grid.instant(ofGroup: stop) >= 7_000_040 - grid.periodMicroseconds / 2)
        #expect(grid.instant(ofGroup: stop) < 7_000_040 + 2 * grid.periodMicroseconds)
        // The same answer whichever node is asked first.
        #expect(stop == RigStop.stopGroup(grid: grid, rigNows: [4_999_990, 5_000_040, 5_000_000], lead: 2_000_000))
    }

    @Test func aStopBeforeGroupZeroStillRecordsOneGroup() {
        #expect(RigStop.stopGroup(grid: grid, rigNows: [0], lead: 0) == 1)
    }
}
