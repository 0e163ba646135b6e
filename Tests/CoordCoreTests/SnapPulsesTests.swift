import Testing
@testable import CoordCore

/// A Snap from triggered cameras while no take's train runs: one pulse per shot group, the frame each pulse exposed.
@Suite struct SnapPulsesTests {
    let grid = FrameGrid(t0: 1_000_000, periodMicroseconds: 33_333)

    func schedule(_ groups: [Int64], exposure: Int64 = 8_000) -> TriggerSchedule {
        TriggerSchedule(grid: grid, delayMicroseconds: 20, exposureMicroseconds: exposure, widthMicroseconds: 500, groups: groups)
    }

    @Test func aShotsSchedulePulsesItsGroupsOnlyWithTheTakesArithmetic() throws {
        let s = schedule([40, 10, 25])
        let take = TriggerSchedule(grid: grid, delayMicroseconds: 20, exposureMicroseconds: 8_000, widthMicroseconds: 500)
        #expect(s.pulse(ofGroup: 25) == take.pulse(ofGroup: 25))
        #expect(s.pulse(ofGroup: 11) == nil && s.pulse(ofGroup: 9) == nil && s.pulse(ofGroup: 41) == nil)
        #expect(s.group(after: 10) == 25 && s.group(after: 25) == 40 && s.group(after: 40) == nil)
        var pulsed: [Int64] = []
        var t = Int64(0)
        while let p = s.nextPulse(atOrAfter: t) { pulsed.append(p.group); t = p.edge + 1 }
        #expect(pulsed == [10, 25, 40])
        // Asked after the first edge has gone: the next shot's, never a group between.
        #expect(s.nextPulse(atOrAfter: try #require(s.pulse(ofGroup: 10)).edge + 1)?.group == 25)
        // The take's contiguous schedule still steps one group at a time up to its stop.
        var stopped = take
        stopped.stop(at: 3)
        #expect(stopped.group(after: 0) == 1 && stopped.group(after: 2) == nil && take.group(after: 7) == 8)
    }

    @Test func thePulsesFrameIsTheStillCentredOnTheMeasuredEdge() throws {
        let s = schedule([30])
        var p = SnapPulses(schedule: s, delayMicroseconds: 20, groups: [30])
        let edge = try #require(s.pulse(ofGroup: 30)).edge
        // A free-running frame before the pulse's is no one's still; the shot waits.
        #expect(p.frame(center: grid.instant(ofGroup: 29), exposureMicroseconds: 8_000) == [])
        p.pulse(group: 30, actual: edge + 150)  // the edge went out 150 µs late
        #expect(p.frame(center: grid.instant(ofGroup: 30) + 2_000, exposureMicroseconds: 6_000)
            == [.keep(group: 30, center: edge + 150 + 20 + 3_000)])
        #expect(p.isDone)
        #expect(p.frame(center: grid.instant(ofGroup: 31), exposureMicroseconds: 8_000) == [])
    }

    @Test func aPulseWithNoFrameIsAMissingStillOnceAFrameIsHalfAPeriodPastIt() throws {
        let s = schedule([30])
        var p = SnapPulses(schedule: s, delayMicroseconds: 20, groups: [30])
        p.pulse(group: 30, actual: try #require(s.pulse(ofGroup: 30)).edge)
        // The camera never answered the pulse; its next frame (a spurious trigger) is more than half a period past.
        #expect(p.frame(center: grid.instant(ofGroup: 30) + 20_000, exposureMicroseconds: 8_000) == [.missed([30])])
        #expect(p.isDone)
        // A pulse the generator skipped (it woke too late) has no edge: missing all the same.
        var q = SnapPulses(schedule: s, delayMicroseconds: 20, groups: [30])
        #expect(q.frame(center: grid.instant(ofGroup: 30), exposureMicroseconds: 8_000) == [])
        #expect(q.frame(center: grid.instant(ofGroup: 31), exposureMicroseconds: 8_000) == [.missed([30])])
    }

    @Test func aBurstsEarlierShotWithNoFrameIsNamedBeforeTheNextIsKept() throws {
        let s = schedule([30, 36])
        var p = SnapPulses(schedule: s, delayMicroseconds: 20, groups: [30, 36])
        p.pulse(group: 30, actual: try #require(s.pulse(ofGroup: 30)).edge)
        let edge36 = try #require(s.pulse(ofGroup: 36)).edge
        p.pulse(group: 36, actual: edge36)
        #expect(p.frame(center: grid.instant(ofGroup: 36), exposureMicroseconds: 8_000)
            == [.missed([30]), .keep(group: 36, center: edge36 + 20 + 4_000)])
        #expect(p.isDone)
    }

    @Test func aCameraThatNeverAnswersIsMissingOnceItsAnswerTimeHasPassedNotAtTheNodesDeadline() throws {
        let s = schedule([30, 45])
        var p = SnapPulses(schedule: s, delayMicroseconds: 20, groups: [30, 45])
        p.pulse(group: 30, actual: try #require(s.pulse(ofGroup: 30)).edge)
        let answer = SnapPulses.answerMicroseconds
        #expect(p.idle(rigNow: grid.instant(ofGroup: 30) + answer) == [])
        #expect(p.idle(rigNow: grid.instant(ofGroup: 30) + answer + 1) == [.missed([30])])
        #expect(!p.isDone)
        #expect(p.idle(rigNow: grid.instant(ofGroup: 45) + answer + 1) == [.missed([45])])
        #expect(p.isDone && p.idle(rigNow: .max) == [])
    }
}

/// A shot's `<camera>.trigger.json` as a node wrote it: held to what a pulse can be before the manifest takes it.
@Suite struct ShotTriggerFiguresTests {
    @Test func impossibleFiguresAreOneSentenceNamingTheFile() {
        let good = TriggerFigures(output: "sync", source: "Line0", pulses: 1, error: TriggerTiming(p50: 12, p99: 12, max: 12))
        #expect(good.problem(file: "n1/cam0.trigger.json") == nil)
        for bad in [TriggerFigures(output: "", source: "Line0", pulses: 1, error: good.error),
                    TriggerFigures(output: "a b\n", source: "Line0", pulses: 1, error: good.error),
                    TriggerFigures(output: "sync", source: "Line0", pulses: -1, error: good.error),
                    TriggerFigures(output: "sync", source: "Line0", pulses: 1, error: TriggerTiming(p50: -5, p99: 0, max: 0)),
                    TriggerFigures(output: "sync", source: "Line0", pulses: 1, error: TriggerTiming(p50: 0, p99: 0, max: .max))] {
            let why = bad.problem(file: "n1/cam0.trigger.json")
            #expect(why?.hasPrefix("n1/cam0.trigger.json ") == true && why?.contains("\n") == false, "\(bad)")
        }
    }
}
