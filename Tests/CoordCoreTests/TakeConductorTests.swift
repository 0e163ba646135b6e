import CoordCore
import Testing

/// Every path of a take's recording phase, once tested only with real processes: the operator's stop, a stop
/// placed by `coord stop-take` elsewhere, a stop a node does not acknowledge, a node that goes silent, a failed
/// node, camera errors, the finish deadline.
struct TakeConductorTests {
    static let period: Int64 = 33_333
    static let t0: Int64 = 10_000_000
    let grid = FrameGrid(t0: TakeConductorTests.t0, periodMicroseconds: TakeConductorTests.period)

    func conductor(groups: Int64 = 300, nodes: [String] = ["n1", "n2"]) -> TakeConductor {
        TakeConductor(takeID: "T", nodes: nodes, grid: grid, groups: groups, now: Self.t0 - 1_000_000)
    }

    func recording(_ node: String = "n1", stop: Int64 = 0) -> TakeConductor.NodeReport {
        .init(takeID: "T", state: .recording, stopGroup: stop)
    }

    func events(_ directives: [TakeConductor.Directive]) -> [TakeEvent] {
        directives.compactMap { if case .record(let e) = $0 { return e } else { return nil } }
    }

    func finish(_ directives: [TakeConductor.Directive]) -> TakeConductor.Finish? {
        directives.lazy.compactMap { if case .finish(let f) = $0 { return f } else { return nil } }.first
    }

    @Test func aTickAsksEveryUnfinishedNodeForItsStatus() {
        var c = conductor()
        #expect(c.handle(.tick(now: Self.t0)) == [.requestStatus(nodes: ["n1", "n2"])])
        _ = c.handle(.status(node: "n1", .init(takeID: "T", state: .finished), now: Self.t0))
        #expect(c.handle(.tick(now: Self.t0)) == [.requestStatus(nodes: ["n2"])])
    }

    @Test func everyNodeFinishedEndsTheTakeComplete() {
        var c = conductor(groups: 30)
        for node in ["n1", "n2"] { _ = c.handle(.status(node: node, .init(takeID: "T", state: .finished), now: Self.t0 + 1_100_000)) }
        let out = c.handle(.tick(now: Self.t0 + 1_100_000))
        #expect(finish(out) == .init(groups: 30, unfinished: []))
        #expect(events(out).map(\.kind) == [.stop])
        #expect(events(out)[0].tMicroseconds == grid.instant(ofGroup: 30))
        #expect(c.isDone && c.handle(.tick(now: Self.t0 + 2_000_000)).isEmpty)
    }

    @Test func theOperatorsStopLandsOneGroupPastTheLeadAndIsSentToEveryNode() {
        var c = conductor()
        let now = Self.t0 + 1_000_000
        let out = c.handle(.operatorStop(now: now))
        let stop = grid.nearestGroup(to: now + 2_000_000) + 1
        #expect(c.groups == stop && c.stopping)
        #expect(events(out).map(\.kind) == [.operatorStop])
        #expect(out.contains(.say("stopping every camera after group \(stop - 1), in 2.0 s")))
        #expect(c.handle(.tick(now: now)) == [.sendStop(group: stop, nodes: ["n1", "n2"], freshConnection: []),
                                               .requestStatus(nodes: ["n1", "n2"])])
        _ = c.handle(.stopAcknowledged(node: "n1", now: now))
        _ = c.handle(.stopAcknowledged(node: "n2", now: now))
        #expect(c.handle(.tick(now: now)) == [.requestStatus(nodes: ["n1", "n2"])])
    }

    @Test func aStopPastThePlannedEndChangesNothing() {
        var c = conductor(groups: 30)
        #expect(c.handle(.operatorStop(now: Self.t0 + 500_000)).isEmpty)
        #expect(c.groups == 30 && !c.stopping)
    }

    @Test func anUnacknowledgedStopIsRetriedOverAFreshConnectionAndNamedWhenItArrives() {
        var c = conductor()
        let now = Self.t0 + 1_000_000
        _ = c.handle(.operatorStop(now: now))
        _ = c.handle(.tick(now: now))
        _ = c.handle(.stopAcknowledged(node: "n1", now: now))
        #expect(c.handle(.stopFailed(node: "n2")) == [.say("node n2 did not acknowledge the stop yet; retrying")])
        #expect(c.handle(.stopFailed(node: "n2")).isEmpty)  // said once
        #expect(c.handle(.tick(now: now + 500_000)) == [.sendStop(group: c.groups, nodes: ["n2"], freshConnection: ["n2"]),
                                                         .requestStatus(nodes: ["n1", "n2"])])
        let delivered = events(c.handle(.stopAcknowledged(node: "n2", now: now + 1_500_000)))
        #expect(delivered.map(\.kind) == [.stopDelivered] && delivered[0].node == "n2")
        #expect(delivered[0].detail.contains("0.5 s before the stop instant"), "\(delivered[0].detail)")
    }

    @Test func aStopNeverAcknowledgedIsAnEventAtTheFinish() {
        var c = conductor()
        let now = Self.t0 + 1_000_000
        _ = c.handle(.operatorStop(now: now))
        _ = c.handle(.status(node: "n1", .init(takeID: "T", state: .finished), now: now))
        _ = c.handle(.status(node: "n2", .init(takeID: "T", state: .finished), now: now))
        let out = c.handle(.tick(now: now))
        #expect(events(out).filter { $0.kind == .stopUndelivered }.map(\.node) == ["n1", "n2"])
        #expect(finish(out)?.unfinished == [])
    }

    @Test func aStopPlacedByStopTakeElsewhereIsAdoptedAndSpreadToEveryNode() {
        var c = conductor()
        let out = c.handle(.status(node: "n2", recording(stop: 120), now: Self.t0 + 1_000_000))
        #expect(c.groups == 120 && c.stopping)
        #expect(out.contains(.say("coord stop-take: every camera stops after group 119")))
        #expect(events(out).map { "\($0.kind) \($0.node)" } == ["operator-stop n2"])
        #expect(c.handle(.tick(now: Self.t0 + 1_000_000)).first == .sendStop(group: 120, nodes: ["n1", "n2"], freshConnection: []))
        // A later stop of another take, or one no earlier than ours, is not adopted.
        _ = c.handle(.status(node: "n1", .init(takeID: "other", state: .recording, stopGroup: 50), now: Self.t0))
        _ = c.handle(.status(node: "n1", recording(stop: 200), now: Self.t0))
        #expect(c.groups == 120)
    }

    @Test func aNodeSilentPastTheStopIsGivenUpAndTheOthersCollected() {
        var c = conductor(groups: 30)
        let stopInstant = grid.instant(ofGroup: 30)
        _ = c.handle(.status(node: "n1", .init(takeID: "T", state: .finished), now: stopInstant))
        _ = c.handle(.status(node: "n2", recording(), now: stopInstant))
        // Silent, but not yet for 5 s past the stop: still asked.
        #expect(c.handle(.statusFailed(node: "n2", now: stopInstant + 4_000_000)).isEmpty)
        #expect(c.handle(.tick(now: stopInstant + 4_000_000)) == [.requestStatus(nodes: ["n2"])])
        let said = c.handle(.statusFailed(node: "n2", now: stopInstant + 5_500_000))
        #expect(said == [.say("node n2 has not answered for 5 s; collecting the others")])
        let out = c.handle(.tick(now: stopInstant + 5_500_000))
        #expect(finish(out) == .init(groups: 30, unfinished: ["n2"]))
        #expect(events(out).first { $0.kind == .nodeUnfinished }?.detail.contains("stopped answering") == true)
    }

    @Test func aNodeSilentBeforeTheStopIsStillWaitedFor() {
        var c = conductor(groups: 300)
        #expect(c.handle(.statusFailed(node: "n2", now: Self.t0 + 8_000_000)).isEmpty)
        #expect(c.silent.isEmpty)
    }

    @Test func theDeadlineEndsTheTakeWithTheSlowNodeNamed() {
        var c = conductor(groups: 30)
        let stopInstant = grid.instant(ofGroup: 30)
        _ = c.handle(.status(node: "n1", .init(takeID: "T", state: .finished), now: stopInstant))
        _ = c.handle(.status(node: "n2", recording(), now: stopInstant + 29_000_000))
        #expect(finish(c.handle(.tick(now: stopInstant + 29_000_000))) == nil)
        let out = c.handle(.tick(now: stopInstant + 30_000_001))
        #expect(finish(out) == .init(groups: 30, unfinished: ["n2"]))
        #expect(events(out).first { $0.kind == .nodeUnfinished }?.detail == "node n2 did not report its files final within 30 s of the stop instant")
    }

    @Test func aFailedNodeIsOneEventAndUnfinished() {
        var c = conductor(groups: 30)
        let failed = TakeConductor.NodeReport(takeID: "T", state: .failed, detail: "camera n2/cam0 cannot start")
        #expect(events(c.handle(.status(node: "n2", failed, now: Self.t0))).map(\.kind) == [.nodeFailed])
        #expect(events(c.handle(.status(node: "n2", failed, now: Self.t0))).isEmpty)
        _ = c.handle(.status(node: "n1", .init(takeID: "T", state: .finished), now: Self.t0))
        #expect(finish(c.handle(.tick(now: Self.t0)))?.unfinished == ["n2"])
    }

    @Test func aCameraErrorIsOneEventHoweverOftenItIsReported() {
        var c = conductor()
        let report = TakeConductor.NodeReport(takeID: "T", state: .recording, cameraErrors: [("cam0", "unplugged"), ("cam1", "")])
        let first = events(c.handle(.status(node: "n1", report, now: Self.t0)))
        #expect(first.map { "\($0.kind) \($0.node)/\($0.camera) \($0.detail)" } == ["camera-error n1/cam0 unplugged"])
        #expect(events(c.handle(.status(node: "n1", report, now: Self.t0 + 500_000))).isEmpty)
    }

    @Test func pollingQuickensNearTheStop() {
        let c = conductor(groups: 30)
        #expect(c.pollInterval(now: Self.t0) == 500_000)
        #expect(c.pollInterval(now: c.stopInstant - 150_000) == 150_000)
        #expect(c.pollInterval(now: c.stopInstant - 10_000) == 100_000)
        #expect(c.pollInterval(now: c.stopInstant + 1) == 200_000)
    }

    @Test func aTakeAbortedElsewhereIsNamedAtOnceAndTheNodeIsUnfinished() {
        var c = conductor(groups: 300)
        let gone = TakeConductor.NodeReport(takeID: "", state: .idle, detail: "take T was aborted (someone else)")
        let out = c.handle(.status(node: "n2", gone, now: Self.t0 + 1_000_000))
        #expect(events(out).map(\.kind) == [.takeAborted])
        #expect(events(out)[0].detail.contains("aborted on node n2 by another coordinator") && events(out)[0].detail.contains("someone else"))
        #expect(events(c.handle(.status(node: "n2", gone, now: Self.t0 + 1_500_000))).isEmpty)  // once
        #expect(c.handle(.tick(now: Self.t0 + 1_500_000)) == [.requestStatus(nodes: ["n1"])])
        _ = c.handle(.status(node: "n1", .init(takeID: "T", state: .finished), now: grid.instant(ofGroup: 300)))
        #expect(finish(c.handle(.tick(now: grid.instant(ofGroup: 300))))?.unfinished == ["n2"])
    }

    @Test func aNodeThatHoldsNoTakeAndSaysNothingOfAnAbortIsNotBlamedOnSomeoneElse() {
        var c = conductor(groups: 300)
        let out = c.handle(.status(node: "n2", .init(takeID: "", state: .idle), now: Self.t0 + 1_000_000))
        #expect(events(out).map(\.kind) == [.takeAborted])
        #expect(events(out)[0].detail == "take T is gone from node n2, which now holds no take and says nothing of it: the node was restarted without it, or another coordinator or peer aborted it")
    }

    @Test func aCameraDisabledElsewhereIsNamedAndOneDisabledByThePolicyIsNot() {
        var c = conductor()
        c.disabledByPolicy(node: "n1", camera: "cam0")
        let report = TakeConductor.NodeReport(takeID: "T", state: .recording, disabledCameras: ["cam0", "cam1"])
        let out = events(c.handle(.status(node: "n1", report, now: Self.t0)))
        #expect(out.map { "\($0.kind) \($0.node)/\($0.camera)" } == ["camera-disabled n1/cam1"])
        #expect(c.disabledElsewhere == ["n1/cam1"])
        #expect(events(c.handle(.status(node: "n1", report, now: Self.t0 + 500_000))).isEmpty)
    }

    @Test func aStopTheCamerasHadPassedIsNamedNotAdopted() {
        var c = conductor(groups: 300)
        let late = TakeConductor.NodeReport(takeID: "T", state: .recording, stopGroup: 5, lastGroup: 100)
        let out = c.handle(.status(node: "n1", late, now: Self.t0 + 3_400_000))
        #expect(c.groups == 300 && !c.stopping)
        #expect(events(out).first?.detail.contains("stop before group 5, which had already passed") == true, "\(out)")
    }
}

/// The start of a take: configure first node, the rest, arm, start; any failure abandons it everywhere.
struct TakeStartTests {
    @Test func aStartThatGoesWellConfiguresTheFirstNodeAloneThenTheOthersArmsAndStarts() {
        var s = TakeStart(nodes: ["a", "b", "c"])
        #expect(s.begin() == .configure(nodes: ["a"]))
        #expect(s.configured(["a"], failures: [:]) == .configure(nodes: ["b", "c"]))
        #expect(s.configured(["b", "c"], failures: [:]) == .arm(nodes: ["a", "b", "c"]))
        #expect(s.armed(failures: [:], armTimes: ["a": 100_000], now: 0, t0: 2_000_000, margin: 200_000) == .start(nodes: ["a", "b", "c"]))
        #expect(s.started(failures: [:]) == .recording && s.isDone)
    }

    @Test func aOneNodeRigArmsRightAfterItsConfiguration() {
        var s = TakeStart(nodes: ["a"])
        #expect(s.configured(["a"], failures: [:]) == .arm(nodes: ["a"]))
    }

    @Test func aFirstNodeHeldByAnotherTakeStopsTheStartBeforeAnyOtherNodeIsTouched() {
        var s = TakeStart(nodes: ["a", "b"])
        let d = s.configured(["a"], failures: ["a": "node a refused the configuration: take T is configured"])
        #expect(d == .abandon(reason: "a node could not be configured",
                              failure: "nothing was recorded: node a refused the configuration: take T is configured"))
        #expect(s.isDone)
    }

    @Test func anArmFailureAbandonsTheTakeAndASlowArmingIsArmedAgainOnce() {
        var s = TakeStart(nodes: ["a", "b"])
        #expect(s.armed(failures: ["b": "camera b/cam0 cannot start"], armTimes: [:], now: 0, t0: 2_000_000, margin: 200_000)
                == .abandon(reason: "a node could not be armed", failure: "nothing was recorded: camera b/cam0 cannot start"))
        // A slow arming is measured and armed again once, every node configured afresh; a second ends the take.
        var slow = TakeStart(nodes: ["a", "b"])
        #expect(slow.armed(failures: [:], armTimes: ["a": 300_000, "b": 1_900_000], now: 1_850_000, t0: 2_000_000, margin: 200_000)
                == .rearm(nodes: ["a", "b"], learned: .init(nodes: 2, took: 1_900_000),
                          note: "node b took 1900 ms to arm, past the start instant; arming every node again with more lead"))
        #expect(slow.isRearmed && !slow.isDone)
        #expect(slow.rearming() == .configure(nodes: ["a", "b"]))
        #expect(slow.configured(["a", "b"], failures: [:]) == .arm(nodes: ["a", "b"]))
        #expect(slow.armed(failures: [:], armTimes: ["a": 300_000, "b": 4_900_000], now: 4_950_000, t0: 5_000_000, margin: 200_000)
                == .abandon(reason: "arming took too long",
                            failure: "nothing was recorded: node b took 4900 ms to arm, past the start instant, also when armed again with more lead."))
        #expect(slow.isDone)
        // The second arm's lead makes room for what the first took (half again, at most 3 s on top of the 2 s).
        #expect(TakeStart.groupZeroLead(slowestConfigure: 5_000, nodes: 2, previous: .init(nodes: 2, took: 1_900_000)) == 4_850_000)
        var recovered = TakeStart(nodes: ["a"])
        _ = recovered.armed(failures: [:], armTimes: ["a": 2_000_000], now: 2_050_000, t0: 2_100_000, margin: 200_000)
        #expect(recovered.armed(failures: [:], armTimes: ["a": 2_000_000], now: 2_050_000, t0: 4_850_000, margin: 200_000) == .start(nodes: ["a"]))
    }

    @Test func aRefusedStartAbandonsTheTake() {
        var s = TakeStart(nodes: ["a", "b"])
        #expect(s.started(failures: ["a": "start group 0 begins 5 ms from now"]) ==
                .abandon(reason: "a node did not accept the start", failure: "nothing was recorded: start group 0 begins 5 ms from now"))
    }
}

extension TakeConductorTests {
    @Test func aNodeChecksummingGigabytesIsWaitedForAndAStuckOneIsNot() {
        // Found by the 30-minute soak: both nodes spent more than 30 s hashing 3.3 GB after their last frame, and
        // the take was given up as partial while every frame was on disk.
        var c = conductor(groups: 30)
        let stop = grid.instant(ofGroup: 30)
        let hashing = TakeConductor.NodeReport(takeID: "T", state: .recording, lastGroup: 29, camerasFinished: true)
        let out = c.handle(.status(node: "n1", hashing, now: stop + 1_000_000))
        #expect(out.contains(.say("node n1: every camera has ended; checksumming its files")))
        _ = c.handle(.status(node: "n2", .init(takeID: "T", state: .recording, lastGroup: 20), now: stop + 1_000_000))
        // Past the usual allowance: n2 (cameras still running) is given up on only once n1 is done or out of time.
        #expect(finish(c.handle(.tick(now: stop + 31_000_000))) == nil)
        _ = c.handle(.status(node: "n1", .init(takeID: "T", state: .finished), now: stop + 90_000_000))
        let done = c.handle(.tick(now: stop + 90_000_000))
        #expect(finish(done) == .init(groups: 30, unfinished: ["n2"]))
        #expect(events(done).contains { $0.kind == .nodeUnfinished && $0.node == "n2" })
    }

    @Test func checksummingHasItsOwnLimit() {
        var c = conductor(groups: 30, nodes: ["n1"])
        let stop = grid.instant(ofGroup: 30)
        _ = c.handle(.status(node: "n1", .init(takeID: "T", state: .recording, lastGroup: 29, camerasFinished: true), now: stop))
        #expect(finish(c.handle(.tick(now: stop + 599_000_000))) == nil)
        let out = c.handle(.tick(now: stop + 601_000_000))
        #expect(finish(out) == .init(groups: 30, unfinished: ["n1"]))
        #expect(events(out).first { $0.kind == .nodeUnfinished }?.detail.contains("checksumming") == true)
    }
}
