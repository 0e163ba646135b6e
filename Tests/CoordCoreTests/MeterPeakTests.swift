import Testing
@testable import CoordCore

/// The console's level meter holds the peak since about a second ago (issue 35: it read −60.8 dBFS while the file
/// peaked at −6 dBFS every second, a 1 ms click between two statuses).
@Suite struct MeterPeakTests {
    @Test func aClickBetweenTwoStatusesIsTheLevelUntilASecondHasPassed() {
        var meter = MeterPeak()
        #expect(meter.level == -100)
        // 10 ms buffers at the floor, one with the click.
        for i in 0..<100 { meter.add(i == 37 ? -6 : -61, now: Int64(i) * 10_000) }
        #expect(meter.level == -6)
        // Into the next window: the click is still held (it was under a second ago at the next status).
        for i in 100..<150 { meter.add(-61, now: Int64(i) * 10_000) }
        #expect(meter.level == -6)
        // A window later, the floor.
        for i in 150..<300 { meter.add(-61, now: Int64(i) * 10_000) }
        #expect(meter.level == -61)
    }

    @Test func soundAfterASilentGapForgetsTheOldPeak() {
        var meter = MeterPeak()
        meter.add(-3, now: 0)
        meter.add(-50, now: 5_000_000)
        #expect(meter.level == -50)
    }
}
