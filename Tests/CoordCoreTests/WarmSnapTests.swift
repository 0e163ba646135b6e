// The console's warm Snap as arithmetic: the group is the first a node can still reach, and it lands within two
// frame periods of the request whatever the round trip.
import CoordCore
import Testing

@Suite struct WarmSnapTests {
    let grid = FrameGrid(t0: 1_000_000, periodMicroseconds: 33_333)

    @Test func theLeadIsTheRoundTripAndAMarginCappedBelowAPeriod() {
        #expect(WarmSnap.lead(roundTripMicroseconds: 2_000, periodMicroseconds: 33_333) == 7_000)
        #expect(WarmSnap.lead(roundTripMicroseconds: 0, periodMicroseconds: 33_333) == WarmSnap.marginMicroseconds)
        // A slow node cannot push the shot past two periods: the lead stops a millisecond short of one.
        #expect(WarmSnap.lead(roundTripMicroseconds: 80_000, periodMicroseconds: 33_333) == 32_333)
        // A negative figure (clock trouble) is no round trip; a 1000 fps grid keeps a millisecond's lead.
        #expect(WarmSnap.lead(roundTripMicroseconds: -5, periodMicroseconds: 33_333) == 5_000)
        #expect(WarmSnap.lead(roundTripMicroseconds: 3_000, periodMicroseconds: 1_000) == 1_000)
    }

    @Test func theGroupIsTheFirstAtLeastTheLeadAheadAndWithinTwoPeriods() {
        for (now, roundTrip) in [(Int64(5_000_000), Int64(1_500)), (5_016_000, 9_000), (5_033_331, 60_000), (7_777_777, 0)] {
            let lead = WarmSnap.lead(roundTripMicroseconds: roundTrip, periodMicroseconds: grid.periodMicroseconds)
            let group = WarmSnap.group(now: now, lead: lead, grid: grid)
            let instant = grid.instant(ofGroup: group)
            #expect(instant >= now + lead)
            #expect(grid.instant(ofGroup: group - 1) < now + lead, "not the first group far enough ahead")
            #expect(instant - now < 2 * grid.periodMicroseconds)
        }
        // Exactly on an instant is early enough; a microsecond short is not.
        let onInstant = grid.instant(ofGroup: 200)
        #expect(WarmSnap.group(now: onInstant - 5_000, lead: 5_000, grid: grid) == 200)
        #expect(WarmSnap.group(now: onInstant - 4_999, lead: 5_000, grid: grid) == 201)
        // Before the grid's t0 the shot is group 0 at the earliest.
        #expect(WarmSnap.group(now: 0, lead: 5_000, grid: grid) == 0)
    }

    @Test func theLatencyCountsFromThePagesClickWhenItIsPlausible() {
        // Clicked 12.5 ms before the request arrived; the group is 20 ms after the arrival.
        let clicked = WarmSnap.latency(groupInstant: 520_000, arrivedAt: 500_000, arrivedWallMs: 1_000_000, clickedWallMs: 999_987.5)
        #expect(clicked.microseconds == 32_500 && clicked.from == "click")
        // No click time, one from the future or from long ago: counted from the request, and said so.
        for bad in [nil, 1_000_050, 980_000, .nan] as [Double?] {
            let r = WarmSnap.latency(groupInstant: 520_000, arrivedAt: 500_000, arrivedWallMs: 1_000_000, clickedWallMs: bad)
            #expect(r.microseconds == 20_000 && r.from == "request")
        }
    }
}
