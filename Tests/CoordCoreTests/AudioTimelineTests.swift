import CoordCore
import Foundation
import Testing

@Suite("A microphone's samples on the rig timebase")
struct AudioTimelineTests {
    /// A device at `rate` × (1 + ppm) whose buffers of 480 frames are stamped with Gaussian noise.
    struct Device {
        var rate = 48_000
        var ppm: Double
        var start: Double
        var jitter: Double
        var random = SeededRandom(seed: 7)
        var frame: Int64 = 0
        func trueTime(_ n: Double) -> Double { start + n * 1e6 / (Double(rate) * (1 + ppm * 1e-6)) }
        /// The sample at true time t: a ramp of the time itself (µs mod 20000), so a sample says where it was taken.
        func value(atTrue t: Double) -> Int16 { Int16(Int(t.truncatingRemainder(dividingBy: 20_000)) - 10_000) }
        /// The next buffer's frame and stamp only (no samples), for long runs.
        mutating func stampOnly() -> (first: Int64, stamp: Double) {
            let stamp = trueTime(Double(frame)) + random.gaussian(standardDeviation: jitter)
            defer { frame += 480 }
            return (frame, stamp)
        }
        mutating func buffer() -> (samples: [Int16], first: Int64, stamp: Double) {
            let samples = (0..<480).map { value(atTrue: trueTime(Double(frame) + Double($0))) }
            let stamp = trueTime(Double(frame)) + random.gaussian(standardDeviation: jitter)
            defer { frame += 480 }
            return (samples, frame, stamp)
        }
    }

    @Test(arguments: [-100.0, 0, 37.5, 100])
    func theFitMeasuresTheDevicesRateErrorThroughTimestampNoise(ppm: Double) {
        var device = Device(ppm: ppm, start: 1_000_000, jitter: 50)
        var fit = SampleClockFit(nominalRate: 48_000)
        for _ in 0..<1000 {  // 10 s
            let b = device.buffer()
            fit.add(frame: b.first, rigTime: b.stamp)
        }
        #expect(abs(fit.rateErrorPPM - ppm) < 1, "measured \(fit.rateErrorPPM) ppm, true \(ppm)")
        let t = fit.rigTime(ofFrame: 240_000)!
        #expect(abs(t - device.trueTime(240_000)) < 5)
        #expect(abs(fit.frame(atRigTime: t)! - 240_000) < 1e-6)
    }

    @Test func underHalfASecondTheNominalRateStands() {
        var fit = SampleClockFit(nominalRate: 48_000)
        fit.add(frame: 0, rigTime: 0)
        fit.add(frame: 480, rigTime: 10_050)
        fit.add(frame: 960, rigTime: 19_950)
        #expect(fit.microsecondsPerFrame == 1e6 / 48_000)
    }

    @Test(arguments: [-100.0, 100])
    func theRetimedSoundSitsOnTheRigGridAndNeverDrifts(ppm: Double) {
        var device = Device(ppm: ppm, start: 0, jitter: 30)
        let start: Int64 = 2_000_000
        var retimer = AudioRetimer(rate: 48_000, startMicroseconds: start)
        var out: [Int16] = []
        for _ in 0..<3000 {  // 30 s
            let b = device.buffer()
            retimer.add(samples: b.samples, firstFrame: b.first, rigTime: b.stamp)
            out += retimer.produce(until: Double(start) + 25_000_000, limit: 25 * 48_000)
        }
        #expect(out.count == 25 * 48_000)
        #expect(retimer.filled == 0)
        // Output sample k was taken at rig time start + k/48 kHz: the ramp tells where it really came from.
        var worst = 0.0
        for k in stride(from: 1000, to: out.count, by: 997) {
            let t = Double(start) + Double(k) * 1e6 / 48_000
            let expected = Double(Int(t.truncatingRemainder(dividingBy: 20_000)) - 10_000)
            // Skip the ramp's wrap, where interpolation mixes its two ends.
            if abs(expected) > 9_950 { continue }
            worst = max(worst, abs(Double(out[k]) - expected))
        }
        #expect(worst < 25, "a sample was \(worst) µs from where the file puts it")
        let (p50, p99) = retimer.offsetPercentiles
        #expect(p50 > 5 && p50 < 40 && p99 < 120, "offsets p50 \(p50) p99 \(p99) for 30 µs of timestamp noise")
    }

    @Test func soundBeforeTheDeviceStartedIsSilenceAndCounted() {
        var device = Device(ppm: 0, start: 1_000_000, jitter: 0)
        var retimer = AudioRetimer(rate: 48_000, startMicroseconds: 990_000)  // 10 ms before the first sample
        var out: [Int16] = []
        for _ in 0..<200 {
            let b = device.buffer()
            retimer.add(samples: b.samples, firstFrame: b.first, rigTime: b.stamp)
            out += retimer.produce(until: 2_000_000)
        }
        #expect(retimer.filled == 480)
        #expect(out.prefix(480).allSatisfy { $0 == 0 })
    }

    @Test func aReportedGapKeepsLaterSamplesOnTheirFrames() {
        var retimer = AudioRetimer(rate: 48_000, startMicroseconds: 0)
        let ramp = (0..<480).map { Int16($0) }
        retimer.add(samples: ramp, firstFrame: 0, rigTime: 0)
        retimer.add(samples: ramp, firstFrame: 960, rigTime: 20_000)  // 480 frames lost between
        let out = retimer.produce(until: 19_000)
        #expect(out.count == 912)
        #expect(out[500] == 0)  // in the gap
        #expect(out[479] == 479)
    }

    @Test func aLateReadIsSkippedAndALastingShiftStartsTheFitOver() {
        var device = Device(ppm: 0, start: 0, jitter: 10)
        var retimer = AudioRetimer(rate: 48_000, startMicroseconds: 5_000_000)
        for i in 0..<300 {
            var b = device.buffer()
            if i == 100 { b.stamp += 8_000 }          // one read 8 ms late: not believed
            if i >= 150 { b.stamp += 500_000 }        // from here every stamp is half a second later, for good
            retimer.add(samples: b.samples, firstFrame: b.first, rigTime: b.stamp)
            if i == 120 {
                #expect(retimer.restarts == 0)
                #expect(abs(retimer.fit.rateErrorPPM) < 20, "a single late read bent the fit to \(retimer.fit.rateErrorPPM) ppm")
            }
        }
        #expect(retimer.restarts == 1)
        let t = retimer.fit.rigTime(ofFrame: Double(250 * 480))!
        #expect(abs(t - (device.trueTime(Double(250 * 480)) + 500_000)) < 50)
    }

    @Test func onceSoundIsWrittenMovedStampsAreSkippedNotFollowed() {
        var device = Device(ppm: 0, start: 0, jitter: 10)
        var retimer = AudioRetimer(rate: 48_000, startMicroseconds: 1_000_000)
        var out: [Int16] = []
        for i in 0..<400 {
            var b = device.buffer()
            if i >= 200 { b.stamp += 50_000 }  // a sound server's delivery 50 ms later from here on
            retimer.add(samples: b.samples, firstFrame: b.first, rigTime: b.stamp)
            out += retimer.produce(until: 3_500_000)
        }
        #expect(retimer.restarts == 0)
        #expect(out.count == 120_000)
        let t = retimer.fit.rigTime(ofFrame: Double(300 * 480))!
        #expect(abs(t - device.trueTime(Double(300 * 480))) < 50, "the mapping jumped by \(t - device.trueTime(Double(300 * 480))) µs")
    }

    @Test func longTakesOffsetsAreSampledNotKeptAndTheirPercentilesHold() {
        // Ten minutes of 10 ms buffers: 60 000 offsets, of which a fixed-size sample is kept.
        var device = Device(ppm: 20, start: 0, jitter: 30)
        var retimer = AudioRetimer(rate: 48_000, startMicroseconds: 1_000_000)
        for _ in 0..<60_000 {
            let b = device.stampOnly()
            retimer.add(samples: [], firstFrame: b.first, rigTime: b.stamp)
        }
        #expect(retimer.offsets.count == AudioRetimer.offsetSample)
        // |N(0, 30 µs)|: p50 ≈ 0.674 σ = 20 µs, p99 ≈ 2.576 σ = 77 µs.
        let (p50, p99) = retimer.offsetPercentiles
        #expect(abs(p50 - 20.2) < 2 && abs(p99 - 77.3) < 5, "p50 \(p50) p99 \(p99)")
    }
}
