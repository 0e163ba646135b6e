import Testing
@testable import CoordCore

@Suite struct AdoptedTakeTests {
    let grid = FrameGrid(t0: 10_000_000, periodMicroseconds: 40_000)

    func status(_ node: String, _ state: TakeConductor.NodeState, take: String = "20261127-091500-orphan-a1b2c3",
                stop: Int64 = 0, rigNow: Int64 = 12_000_000, grid: FrameGrid? = nil) -> NodeStatus {
        var s = NodeStatus(node: node, state: state, takeID: take)
        s.grid = grid ?? self.grid
        s.stopGroup = stop
        s.rigNowMicroseconds = rigNow
        return s
    }

    @Test func aTakeTheNodesRecordIsSeenWithItsGridNameAndLatestRigClock() throws {
        let seen = try #require(AdoptedTake.seen([status("a", .recording, rigNow: 12_000_000), status("b", .recording, rigNow: 12_000_400)]))
        #expect(seen.takeID == "20261127-091500-orphan-a1b2c3" && seen.name == "orphan")
        #expect(seen.grid == grid && seen.rigNow == 12_000_400 && seen.nodes == ["a", "b"])
        #expect(seen.stopGroup == 0)
        #expect(seen.recordedSeconds(rigNow: 12_000_400) == 2.0004)
    }

    @Test func idleFinishedOrGridlessNodesRecordNothing() {
        #expect(AdoptedTake.seen([]) == nil)
        #expect(AdoptedTake.seen([status("a", .idle, take: ""), status("b", .finished)]) == nil)
        var gridless = status("a", .recording)
        gridless.grid = nil
        #expect(AdoptedTake.seen([gridless]) == nil)
        #expect(AdoptedTake.seen([status("a", .recording, take: "")]) == nil)
    }

    @Test func theStopIsAgreedOnlyOnceEveryNodeHasOne() throws {
        let half = try #require(AdoptedTake.seen([status("a", .recording, stop: 100), status("b", .recording)]))
        #expect(half.stopGroup == 0)
        let both = try #require(AdoptedTake.seen([status("a", .recording, stop: 100), status("b", .armed, stop: 100)]))
        #expect(both.stopGroup == 100)
        // Elapsed time never passes the stop instant, and is 0 before group 0.
        #expect(both.recordedSeconds(rigNow: 99_000_000) == 4.0)
        #expect(both.recordedSeconds(rigNow: 9_000_000) == 0)
    }

    @Test func theTakeMostNodesRecordIsTheOneShown() throws {
        let seen = try #require(AdoptedTake.seen([status("a", .recording, take: "20261127-091500-one-000001"),
                                                  status("b", .recording, take: "20261127-091600-two-000002"),
                                                  status("c", .recording, take: "20261127-091600-two-000002")]))
        #expect(seen.takeID == "20261127-091600-two-000002" && seen.nodes == ["b", "c"])
        // A tie goes to the smaller id, whatever the order the nodes answered in.
        let tie = [status("a", .recording, take: "20261127-091600-b-000002"), status("b", .recording, take: "20261127-091500-a-000001")]
        #expect(AdoptedTake.seen(tie)?.takeID == "20261127-091500-a-000001")
        #expect(AdoptedTake.seen(tie.reversed())?.takeID == "20261127-091500-a-000001")
    }

    @Test func aNameThatIsNotATakeIDIsShownWhole() throws {
        #expect(try #require(AdoptedTake.seen([status("a", .recording, take: "not-a-take-id")])).name == "not-a-take-id")
        #expect(try #require(AdoptedTake.seen([status("a", .recording, take: "20261127-091500-with-dashes-abcdef")])).name == "with-dashes")
    }
}

@Suite struct RecordedLengthTests {
    @Test func aTakeStoppedEarlyEndsAtTheGroupItsCamerasStoppedAt() {
        // An open-ended take's 24-hour plan, stopped at group 505 on every node.
        #expect(RecordedLength.groups(planned: 2_592_026, tableEnds: [505, 505]) == 505)
        // A camera that lost its last frames does not shorten the take: it is the one that is incomplete.
        #expect(RecordedLength.groups(planned: 2_592_026, tableEnds: [505, 480, nil]) == 505)
    }

    @Test func aTakeRecordedToItsPlanOrWithoutTablesKeepsThePlan() {
        #expect(RecordedLength.groups(planned: 90, tableEnds: [90, 90]) == 90)
        #expect(RecordedLength.groups(planned: 90, tableEnds: [nil, nil]) == 90)
        #expect(RecordedLength.groups(planned: 90, tableEnds: []) == 90)
        #expect(RecordedLength.groups(planned: 90, tableEnds: [0]) == 90)
        // Never longer than planned, whatever a table claims.
        #expect(RecordedLength.groups(planned: 90, tableEnds: [120]) == 90)
    }
}
