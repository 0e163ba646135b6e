import Foundation
import Testing
@testable import CoordCore

@Suite struct TriggerPlanTests {
    let grid = FrameGrid(t0: 1_000_000, periodMicroseconds: 33_333)

    @Test func anEdgeLeadsItsGroupByTheDelayAndHalfTheExposure() throws {
        let s = TriggerSchedule(grid: grid, delayMicroseconds: 40, exposureMicroseconds: 10_000, widthMicroseconds: 500)
        let p = try #require(s.pulse(ofGroup: 3))
        #expect(p.edge == 1_000_000 + 3 * 33_333 - 40 - 5_000)
        #expect(p.end == p.edge + 500)
        // The exposure's centre lands on the grid.
        #expect(p.edge + 40 + 10_000 / 2 == grid.instant(ofGroup: 3))
    }

    @Test func aRationalGridUsesItsExactInstants() throws {
        let ntsc = FrameGrid(t0: 0, rate: try #require(FrameRate(numerator: 30000, denominator: 1001)))
        let s = TriggerSchedule(grid: ntsc, delayMicroseconds: 0, exposureMicroseconds: 0, widthMicroseconds: 100)
        #expect(s.pulse(ofGroup: 30_000)?.edge == ntsc.instant(ofGroup: 30_000))
        #expect(s.pulse(ofGroup: 30_000)?.edge == 1_001_000_000)
    }

    @Test func pulsesRunFromGroupZeroToTheLastGroupAndNoneOutside() {
        var s = TriggerSchedule(grid: grid, delayMicroseconds: 0, exposureMicroseconds: 2_000, widthMicroseconds: 500)
        #expect(s.pulse(ofGroup: -1) == nil)
        #expect(s.pulse(ofGroup: 1_000_000) != nil)  // open-ended until the stop is known
        s.stop(at: 90)
        #expect(s.pulseCount == 90)
        #expect(s.pulse(ofGroup: 89) != nil && s.pulse(ofGroup: 90) == nil)
        var groups: [Int64] = []
        var t = Int64(0)
        while let p = s.nextPulse(atOrAfter: t) { groups.append(p.group); t = p.edge + 1 }
        #expect(groups == Array(0..<90))
    }

    @Test func theNextPulseAfterAnInstantIsTheFirstNotBeforeIt() throws {
        let s = TriggerSchedule(grid: grid, delayMicroseconds: 100, exposureMicroseconds: 0, widthMicroseconds: 500)
        let edge5 = try #require(s.pulse(ofGroup: 5)).edge
        #expect(s.nextPulse(atOrAfter: edge5)?.group == 5)
        #expect(s.nextPulse(atOrAfter: edge5 + 1)?.group == 6)
        #expect(s.nextPulse(atOrAfter: edge5 - 20_000)?.group == 5)
    }

    @Test func aWidthNotShorterThanTheFramePeriodIsOneSentence() {
        #expect(TriggerSchedule.widthProblem(output: "sync", widthMicroseconds: 500, rate: FrameRate(30)) == nil)
        #expect(TriggerSchedule.widthProblem(output: "sync", widthMicroseconds: 33_333, rate: FrameRate(30))
            == "trigger output sync: width_us 33333 is not shorter than the frame period (33333 µs at 30 fps).")
        #expect(TriggerSchedule.widthProblem(output: "sync", widthMicroseconds: 0, rate: FrameRate(30))?.contains("positive") == true)
    }

    @Test func timingErrorIsP50P99AndMaxOfTheMagnitudes() {
        let errors: [Int64] = (0..<100).map { Int64($0 % 2 == 0 ? $0 : -$0) }
        let t = TriggerTiming(errors: errors)
        #expect(t == TriggerTiming(p50: 49, p99: 98, max: 99))
        #expect(TriggerTiming(errors: []) == TriggerTiming(p50: 0, p99: 0, max: 0))
    }

    /// A scripted triggered camera over a 12-group take: it misses group 4's pulse and sees one extra frame between
    /// groups 7 and 8 (a spurious trigger). Matching plus the recorder's GroupAssigner writes every group once:
    /// group 4 filled and flagged dup, the extra frame discarded, every other group its own frame.
    @Test func aMissedPulseAndAnExtraFrameAreFilledAndFlaggedExactlyThere() {
        var s = TriggerSchedule(grid: grid, delayMicroseconds: 30, exposureMicroseconds: 8_000, widthMicroseconds: 500)
        s.stop(at: 12)
        var matcher = TriggerMatcher(schedule: s)
        var assigner = GroupAssigner(grid: grid, startGroup: 0, stopGroup: 12)
        var written: [Int64: Bool] = [:]  // group → dup
        func apply(_ actions: [GroupAssigner.Action]) {
            for a in actions {
                if case .write(let g) = a { written[g] = false }
                if case .repeatPrevious(let g) = a { written[g] = true }
            }
        }
        var discarded = 0
        for g in Int64(0)..<12 {
            // The generator's measured edge: a few µs late, as a real line.
            let intended = s.pulse(ofGroup: g)!.edge
            matcher.pulse(group: g, actual: intended + (g % 3) * 7)
            if g == 4 { continue }  // the camera missed this pulse
            // The camera's timestamp of the frame's centre: the true centre plus 150 µs of device-clock noise.
            let trueCenter = intended + (g % 3) * 7 + 30 + 4_000
            if case .pulse(let group, let center) = matcher.frame(center: trueCenter + 150) {
                #expect(group == g)
                #expect(center == trueCenter)
                apply(assigner.frame(center: center))
            } else {
                Issue.record("frame of group \(g) unmatched")
            }
            if g == 7 {
                // A frame half way to group 8, with no pulse behind it.
                let extra = matcher.frame(center: grid.instant(ofGroup: 7) + 16_000)
                #expect(extra == .extra)
                discarded += 1
            }
        }
        #expect(discarded == 1 && matcher.extraFrames == 1)
        #expect(matcher.missedPulses(startGroup: 0, stopGroup: 12) == 1)
        apply(assigner.tick(now: grid.instant(ofGroup: 13), lateness: 0))
        #expect(written.keys.sorted() == Array(0..<12))
        #expect(written.filter { $0.value }.map(\.key) == [4])
    }

    @Test func aFrameBeforeItsPredecessorsPulseIsExtraNotAReorder() {
        let s = TriggerSchedule(grid: grid, delayMicroseconds: 0, exposureMicroseconds: 0, widthMicroseconds: 100)
        var m = TriggerMatcher(schedule: s)
        for g in Int64(0)..<4 { m.pulse(group: g, actual: s.pulse(ofGroup: g)!.edge) }
        #expect(m.frame(center: grid.instant(ofGroup: 2)) == .pulse(group: 2, center: grid.instant(ofGroup: 2)))
        // A late frame for group 1 after group 2's: arrival order says it cannot be 1's.
        #expect(m.frame(center: grid.instant(ofGroup: 1)) == .extra)
        #expect(m.frame(center: grid.instant(ofGroup: 3) + 1_000) == .pulse(group: 3, center: grid.instant(ofGroup: 3)))
    }
}

@Suite struct TriggerFiguresTests {
    @Test func theManifestKeysAreTheContracts() throws {
        let f = TriggerFigures(output: "sync", source: "Line0", pulses: 900, error: TriggerTiming(p50: 12, p99: 40, max: 95))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let text = String(decoding: try encoder.encode(f), as: UTF8.self)
        #expect(text == #"{"error_us":{"max":95,"p50":12,"p99":40},"output":"sync","pulses":900,"source":"Line0"}"#)
        #expect(try JSONDecoder().decode(TriggerFigures.self, from: Data(text.utf8)) == f)
        #expect(f.reportLine(node: "node-1", camera: "mv0")
            == "node-1/mv0: triggered by sync on Line0, 900 pulses, error p50 12 µs, p99 40 µs, max 95 µs")
    }

    @Test func aFreeRunningCameraHasNoTriggerKeyInTheManifest() throws {
        var camera = TakeManifest.Camera(node: "n", camera: "c", ordinal: 0, width: 64, height: 48, fps: 30, codec: "ffv1",
                                         frames: 1, dropped: 0, clock: .init(offsetMicroseconds: 0, driftPPM: 0, uncertaintyMicroseconds: 0), files: [])
        #expect(!String(decoding: try JSONEncoder().encode(camera), as: UTF8.self).contains("trigger"))
        camera.trigger = TriggerFigures(output: "sync", source: "Line0", pulses: 1, error: TriggerTiming(p50: 1, p99: 1, max: 1))
        let back = try JSONDecoder().decode(TakeManifest.Camera.self, from: try JSONEncoder().encode(camera))
        #expect(back.trigger == camera.trigger)
    }

    @Test func aRateTheCameraCannotFollowNamesTheCamera() {
        #expect(TriggerRate.problem(camera: "mv0", rate: FrameRate(30), exposureMicroseconds: 20_000, readoutMicroseconds: 10_000,
                                    maximumFrameRate: 42) == nil)
        #expect(TriggerRate.problem(camera: "mv0", rate: FrameRate(60), exposureMicroseconds: 10_000, readoutMicroseconds: 8_000,
                                    maximumFrameRate: nil)
            == "camera mv0 cannot follow a trigger at 60 fps: its exposure (10000 µs) plus readout (8000 µs) is longer than the frame period (16667 µs); shorten the exposure or lower the rate.")
        #expect(TriggerRate.problem(camera: "mv1", rate: FrameRate(60), exposureMicroseconds: 1_000, readoutMicroseconds: 1_000,
                                    maximumFrameRate: 41.5)
            == "camera mv1 cannot follow a trigger at 60 fps: its AcquisitionFrameRate allows at most 41.5 fps at this size and exposure.")
    }
}
