import Testing
@testable import CoordCore

/// A free-running sensor as the node sees it, like `SyntheticSensor`: true frame starts on the node clock; a
/// frame's duration is fixed when it is read out, from the request pending then (so a request made after
/// frame n sets frame n+1's duration); the node adds timestamp noise.
struct SimulatedSensor {
    var start: Double          // true start of the next frame to deliver, node clock
    var rate: Double           // sensor clock rate against the node clock
    var pending: Double?       // requested duration for the next frame read out
    let nominal: Double
    let exposure: Double
    var sequence: UInt32 = 0

    init(start: Double, ratePPM: Double, nominal: Double) {
        self.start = start
        rate = 1 + ratePPM * 1e-6
        self.nominal = nominal
        exposure = nominal / 2
    }

    /// Delivers the next frame: (sequence, true centre, duration it runs for).
    mutating func deliver() -> (sequence: UInt32, center: Double, duration: Double) {
        let duration = pending ?? nominal
        pending = nil
        let frame = (sequence, start + exposure / 2, duration)
        start += duration * rate
        sequence &+= 1
        return frame
    }
}

@Suite struct PhaseControllerTests {
    let grid = FrameGrid(t0: 0, periodMicroseconds: 33_333)
    let identity: (Double) -> Double = { $0 }

    @Test func canShiftPhaseOnlyWithRoomOnBothSides() {
        #expect(PhaseController(grid: grid, minPeriodMicroseconds: 16_667, maxPeriodMicroseconds: 1_000_000).canShiftPhase)
        #expect(!PhaseController(grid: grid, minPeriodMicroseconds: 33_333, maxPeriodMicroseconds: 1_000_000).canShiftPhase)
        #expect(!PhaseController(grid: grid, minPeriodMicroseconds: 16_667, maxPeriodMicroseconds: 33_333).canShiftPhase)
    }

    @Test func withoutAFrameTheGridPeriodIsRequested() {
        let c = PhaseController(grid: grid, minPeriodMicroseconds: 10_000, maxPeriodMicroseconds: 100_000)
        #expect(c.nextDuration(toLocal: identity, toRig: identity) == 33_333)
    }

    @Test func aLargeErrorIsCorrectedWithinTheSensorsLimits() {
        var c = PhaseController(grid: grid, minPeriodMicroseconds: 32_000, maxPeriodMicroseconds: 34_000)
        c.observe(sequence: 0, stampedCenterLocal: 10_000, durationMicroseconds: 33_333)
        // Frame 1 centres at 43 333; reaching 66 666 for frame 2 would need 23 333 µs: the limit holds.
        #expect(c.nextDuration(toLocal: identity, toRig: identity) == 32_000)
        var d = PhaseController(grid: grid, minPeriodMicroseconds: 32_000, maxPeriodMicroseconds: 34_000)
        d.observe(sequence: 0, stampedCenterLocal: -10_000, durationMicroseconds: 33_333)
        #expect(d.nextDuration(toLocal: identity, toRig: identity) == 34_000)
    }

    @Test func aNoiselessSensorIsPutOnTheGridInOneStep() {
        var c = PhaseController(grid: grid, minPeriodMicroseconds: 16_000, maxPeriodMicroseconds: 67_000)
        // Frame 0 centred 5 ms late; frame 1 (already running) will be too; frame 2 must land on 66 666.
        c.observe(sequence: 0, stampedCenterLocal: 5_000, durationMicroseconds: 33_333)
        let d = c.nextDuration(toLocal: identity, toRig: identity)
        #expect(abs((5_000 + 33_333 + d) - 66_666) < 1)
    }

    /// Closed loop from any start phase, rate error and clock mapping: the true centre (not the noisy stamp)
    /// locks onto the grid within a second, and stays there far more tightly than the 30 µs timestamp noise.
    @Test func lockedSensorFiltersTimestampNoiseRatherThanChasingIt() {
        var worstP99 = 0.0
        var worstEstimateError = 0.0
        for seed in UInt64(1)...12 {
            var rng = SeededRandom(seed: seed)
            let p = Double(grid.periodMicroseconds)
            // Node clock = rig + offset, running fast by drift.
            let offset = rng.double(-500_000...500_000)
            let drift = rng.double(-100...100) * 1e-6
            let toLocal: (Double) -> Double = { $0 + offset + drift * $0 }
            let toRig: (Double) -> Double = { ($0 - offset) / (1 + drift) }
            var sensor = SimulatedSensor(start: toLocal(rng.double(0...p)), ratePPM: rng.double(-100...100), nominal: p)
            var c = PhaseController(grid: grid, minPeriodMicroseconds: p / 2, maxPeriodMicroseconds: p * 2)
            var errors: [Double] = []
            for n in 0..<1_200 {
                let f = sensor.deliver()
                let e = c.observe(sequence: f.sequence, stampedCenterLocal: f.center + rng.gaussian(standardDeviation: 30),
                                  durationMicroseconds: f.duration)
                let d = c.nextDuration(toLocal: toLocal, toRig: toRig)
                #expect(d >= p / 2 && d <= p * 2)
                sensor.pending = d
                if n >= 30 {
                    let rigCenter = toRig(f.center)
                    errors.append(abs(rigCenter - Double(grid.instant(ofGroup: grid.nearestGroup(to: Int64(rigCenter.rounded()))))))
                    worstEstimateError = max(worstEstimateError, abs(e.centerLocal - f.center))
                }
            }
            errors.sort()
            let p99 = errors[Int(Double(errors.count) * 0.99)]
            worstP99 = max(worstP99, p99)
            #expect(c.restarts == 0)
            #expect(c.estimate!.noiseMicroseconds > 25 && c.estimate!.noiseMicroseconds < 35, "the measured noise is the driver's")
        }
        #expect(worstP99 < 20, "true phase error p99 after lock was \(worstP99) µs with 30 µs timestamp noise")
        #expect(worstEstimateError < 40)
    }

    @Test func aSequenceGapRestartsTheFitAndTheLoopRelocks() {
        let p = Double(grid.periodMicroseconds)
        var sensor = SimulatedSensor(start: 12_345, ratePPM: 40, nominal: p)
        var c = PhaseController(grid: grid, minPeriodMicroseconds: p / 2, maxPeriodMicroseconds: p * 2)
        var rng = SeededRandom(seed: 9)
        var lastError = 0.0
        for n in 0..<400 {
            var f = sensor.deliver()
            if n == 200 {
                // Two frames lost in the driver: the node never sees them.
                f = sensor.deliver(); f = sensor.deliver()
            }
            c.observe(sequence: f.sequence, stampedCenterLocal: f.center + rng.gaussian(standardDeviation: 30), durationMicroseconds: f.duration)
            sensor.pending = c.nextDuration(toLocal: identity, toRig: identity)
            lastError = abs(f.center - Double(grid.instant(ofGroup: grid.nearestGroup(to: Int64(f.center)))))
        }
        #expect(c.restarts == 1)
        #expect(lastError < 20)
    }

    @Test func aSingleWildTimestampIsLeftOutOfTheFit() {
        let p = Double(grid.periodMicroseconds)
        var c = PhaseController(grid: grid, minPeriodMicroseconds: p / 2, maxPeriodMicroseconds: p * 2)
        for n in 0..<100 {
            c.observe(sequence: UInt32(n), stampedCenterLocal: Double(n) * p, durationMicroseconds: p)
        }
        let e = c.observe(sequence: 100, stampedCenterLocal: 100 * p + 5_000, durationMicroseconds: p)
        #expect(abs(e.centerLocal - 100 * p) < 1)
        #expect(c.restarts == 0)
        // Three in a row: the sensor's timing really changed, so the fit starts over from there.
        for n in 101...103 { c.observe(sequence: UInt32(n), stampedCenterLocal: Double(n) * p + 5_000, durationMicroseconds: p) }
        #expect(c.restarts == 1)
    }

    /// A frame re-estimated a couple of seconds later, from the frames on both sides of it, is closer to the
    /// truth than the estimate made when it arrived; after a restart the old frame cannot be re-estimated.
    @Test func aLaterEstimateOfAFrameIsBetterThanTheFirst() {
        let p = Double(grid.periodMicroseconds)
        var rng = SeededRandom(seed: 21)
        var sensor = SimulatedSensor(start: 7_777, ratePPM: -60, nominal: p)
        var c = PhaseController(grid: grid, minPeriodMicroseconds: p / 2, maxPeriodMicroseconds: p * 2)
        var history: [(estimate: PhaseController.Estimate, truth: Double)] = []
        var firstErrors: [Double] = [], laterErrors: [Double] = []
        for n in 0..<900 {
            let f = sensor.deliver()
            let e = c.observe(sequence: f.sequence, stampedCenterLocal: f.center + rng.gaussian(standardDeviation: 30),
                              durationMicroseconds: f.duration)
            sensor.pending = c.nextDuration(toLocal: identity, toRig: identity)
            history.append((e, f.center))
            if n >= 360 {
                let old = history[n - 60]
                firstErrors.append(abs(old.estimate.centerLocal - old.truth))
                laterErrors.append(abs(c.center(of: old.estimate)! - old.truth))
            }
        }
        let first = firstErrors.reduce(0, +) / Double(firstErrors.count)
        let later = laterErrors.reduce(0, +) / Double(laterErrors.count)
        #expect(later < first * 0.85, "mean error when it arrived \(first) µs, two seconds later \(later) µs")
        // A sequence gap restarts the fit: frames from before it are no longer in it.
        let old = history.last!.estimate
        _ = sensor.deliver()
        let f = sensor.deliver()
        c.observe(sequence: f.sequence, stampedCenterLocal: f.center, durationMicroseconds: f.duration)
        #expect(c.center(of: old) == nil)
    }

    /// A sensor already at its fastest frame rate cannot shorten a frame: while the take is being armed it is
    /// put on the grid by delaying one frame to the next group; while recording, a slight lateness is carried
    /// (no group is skipped for it).
    @Test func aSensorAtItsFastestRateIsDelayedOntoTheGrid() {
        let p = Double(grid.periodMicroseconds)
        var c = PhaseController(grid: grid, minPeriodMicroseconds: p, maxPeriodMicroseconds: 1_000_000)
        #expect(!c.canShiftPhase)
        // Frame 0 centred 10 ms past group 0: frame 1 will be 10 ms past group 1; frame 2 can only be delayed.
        c.observe(sequence: 0, stampedCenterLocal: 10_000, durationMicroseconds: p)
        let acquiring = c.nextDuration(toLocal: identity, toRig: identity, acquiring: true)
        #expect(abs((10_000 + p + acquiring) - 3 * p) < 1, "lands on group 3, one group later")
        // Recording, 200 µs late: the frame runs at its shortest rather than skipping a group.
        var d = PhaseController(grid: grid, minPeriodMicroseconds: p, maxPeriodMicroseconds: 1_000_000)
        d.observe(sequence: 0, stampedCenterLocal: 200, durationMicroseconds: p)
        #expect(d.nextDuration(toLocal: identity, toRig: identity) == p)
    }
}
