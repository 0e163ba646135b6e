import Testing
@testable import CoordCore

@Suite struct PreviewTrainTests {
    @Test func onRunsWhereANodeAcceptedAndNamesNoOneElse() throws {
        let answer = PreviewTrain.answer(on: true, refusals: ["n2": "node n2 refused the preview train: node n2 has no trigger outputs.", "n1": nil])
        #expect(try answer.get() == ["n1"])
    }

    @Test func onIsRefusedWithEveryNodesSentenceWhenNoneCanRunIt() {
        let answer = PreviewTrain.answer(on: true, refusals: ["b": "node b has no trigger outputs.", "a": "node a does not preview."])
        guard case .failure(let refusal) = answer else { Issue.record("accepted: \(answer)"); return }
        #expect(refusal.kind == .conflict)
        #expect(refusal.sentence == "node a does not preview. node b has no trigger outputs.")
    }

    @Test func onWithNoNodeReachedSaysSo() {
        guard case .failure(let refusal) = PreviewTrain.answer(on: true, refusals: [:]) else { Issue.record("accepted"); return }
        #expect(refusal.sentence.hasPrefix("no node previews yet"))
    }

    @Test func offIsNeverRefused() throws {
        #expect(try PreviewTrain.answer(on: false, refusals: ["n2": "node n2 has no trigger outputs."]).get() == [])
    }

    @Test func eachNodesNewestAnswerSaysWhetherItRuns() {
        var train = PreviewTrain(wanted: true, running: ["n1"])
        train.node("n2", runs: true)
        train.node("n1", runs: false)
        #expect(train == PreviewTrain(wanted: true, running: ["n2"]))
    }

    /// The train is a take's schedule with no stop: from any moment, the next group's pulse and then every group's.
    @Test func theTrainsScheduleIsATakesWithNoEnd() throws {
        let grid = FrameGrid(t0: 1_000_000, periodMicroseconds: 33_333)
        let s = TriggerSchedule(grid: grid, delayMicroseconds: 20, exposureMicroseconds: 8_000, widthMicroseconds: 500)
        let now: Int64 = 1_000_000 + 90_000 * 33_333 + 10_000
        let first = try #require(s.nextPulse(atOrAfter: now))
        #expect(first.edge >= now && first.edge - now < 33_333)
        #expect(first.edge == grid.instant(ofGroup: first.group) - 20 - 4_000)
        #expect(s.group(after: first.group + 1_000_000) == first.group + 1_000_001)
        #expect(s.pulseCount == nil)
    }
}
