import Foundation
import Synchronization
import Testing
@testable import CoordCore

/// A node with two cameras (a, b), its take configured, armed and its devices opened with a microphone, the way
/// `NodeAgent` drives the instance.
private struct Rig {
    static let grid = FrameGrid(t0: 10_000_000, periodMicroseconds: 40_000)
    /// The node's clock is 1 s behind the rig's.
    static let clock = ClockMapping(offsetMicroseconds: 1_000_000)
    static let capabilities = ["a", "b"].map { name in
        CameraCapabilities(name: name, source: "synthetic",
                           formats: [CameraFormat(pixelFormat: "yuv420p", width: 640, height: 480,
                                                  minFramePeriodMicroseconds: 16_667, maxFramePeriodMicroseconds: 1_000_000)],
                           codecs: [.ffv1])
    }
    static let settings = ["a", "b"].enumerated().map { CameraSettings(camera: $1, ordinal: $0, width: 640, height: 480, fps: 25, codec: .ffv1) }

    var take = NodeTake(node: "n1", cameras: capabilities)
    var arming: NodeTake.Arming!

    /// Configured and armed, the devices open (cameras a and b, microphone m).
    static func armed(_ takeID: String = "T1") -> Rig {
        var rig = Rig()
        #expect(rig.take.handle(.configure(takeID: takeID, cameras: settings, now: 0)) == [.configured(takeID: takeID, cameras: settings)])
        let open = rig.take.handle(.arm(takeID: takeID, grid: grid, clock: clock))
        guard case .openDevices(let arming, let cameras, let grid, let clock) = open.first, open.count == 1 else {
            Issue.record("arm gave \(open)")
            return rig
        }
        #expect(cameras == settings && grid == Rig.grid && clock == Rig.clock && arming.takeID == takeID)
        rig.arming = arming
        #expect(rig.take.handle(.opened(arming, cameras: ["a", "b"], microphones: ["m"])) ==
                [.keepRecorders(arming), .markRecording(takeID: takeID, t0: grid.t0, periodMicroseconds: grid.periodMicroseconds, startGroup: 0)])
        return rig
    }

    /// Armed, then started at group 10 (the node's clock well before it).
    static func recording(_ takeID: String = "T1", stop: Int64 = 0) -> Rig {
        var rig = armed(takeID)
        let d = rig.take.handle(.start(takeID: takeID, startGroup: 10, stopGroup: stop, localNow: 0))
        #expect(d == [.markRecording(takeID: takeID, t0: grid.t0, periodMicroseconds: grid.periodMicroseconds, startGroup: 10),
                      .startRecorders(group: 10, stop: stop == 0 ? nil : stop)])
        #expect(rig.take.state == .recording)
        return rig
    }

    mutating func finished(_ recorder: String) -> [NodeTake.Directive] {
        take.handle(.recorderFinished(arming, recorder: recorder))
    }
}

private func refusal(_ directives: [NodeTake.Directive]) -> NodeFailure? {
    guard directives.count == 1, case .refuse(let failure) = directives[0] else { return nil }
    return failure
}

@Suite struct NodeTakeTests {
    // MARK: Arm

    @Test func armOpensTheConfiguredCamerasAndKeepsThemOnceOpen() {
        let rig = Rig.armed()
        #expect(rig.take.state == .armed && rig.take.takeID == "T1")
        #expect(rig.take.grid == Rig.grid && rig.take.clock == Rig.clock)
        #expect(rig.take.recordingCameras == ["a", "b"])
        #expect(rig.take.collectable("T1")?.code == .badState)
    }

    @Test func configureIsCheckedAgainstTheNodesCameras() throws {
        var take = NodeTake(node: "n1", cameras: Rig.capabilities)
        #expect(refusal(take.handle(.configure(takeID: "bad id!", cameras: Rig.settings, now: 0)))?.code == .badConfig)
        #expect(refusal(take.handle(.configure(takeID: "T", cameras: [], now: 0)))?.message.contains("configures no cameras") == true)
        let twice = refusal(take.handle(.configure(takeID: "T", cameras: [Rig.settings[0], Rig.settings[0]], now: 0)))
        #expect(twice?.message == "take T configures a camera of node n1 twice.")
        var unknown = Rig.settings[0]
        unknown.camera = "zz"
        #expect(refusal(take.handle(.configure(takeID: "T", cameras: [unknown], now: 0)))?.message == "node n1 has no camera named \"zz\".")
        #expect(take.state == .idle)
    }

    @Test func armIsRefusedAtShutdownPressure() {
        var take = NodeTake(node: "n1", cameras: Rig.capabilities)
        _ = take.handle(.configure(takeID: "T", cameras: Rig.settings, now: 0))
        _ = take.handle(.pressure(PressureReading(level: .shutdown, factor: "disk", cause: "the disk is full"), localNow: 0))
        let f = refusal(take.handle(.arm(takeID: "T", grid: Rig.grid, clock: Rig.clock)))
        #expect(f == NodeFailure(.io, "node n1 cannot record take T: the disk is full."))
        #expect(take.state == .configured)
    }

    @Test func aDeviceThatCannotOpenFailsTheTake() {
        var take = NodeTake(node: "n1", cameras: Rig.capabilities)
        _ = take.handle(.configure(takeID: "T", cameras: Rig.settings, now: 0))
        guard case .openDevices(let arming, _, _, _) = take.handle(.arm(takeID: "T", grid: Rig.grid, clock: Rig.clock)).first else {
            Issue.record("no open")
            return
        }
        let busy = NodeFailure(.io, "camera n1/a: device busy.")
        #expect(refusal(take.handle(.openFailed(arming, busy))) == busy)
        #expect(take.state == .failed && take.detail == busy.message)
    }

    @Test func anAbortWhileTheDevicesOpenWins() {
        var take = NodeTake(node: "n1", cameras: Rig.capabilities)
        _ = take.handle(.configure(takeID: "T", cameras: Rig.settings, now: 0))
        guard case .openDevices(let arming, _, _, _) = take.handle(.arm(takeID: "T", grid: Rig.grid, clock: Rig.clock)).first else {
            Issue.record("no open")
            return
        }
        // Before the devices are open, no clock is in force to update.
        #expect(refusal(take.handle(.updateClock(takeID: "T", Rig.clock)))?.code == .notFound)
        #expect(take.handle(.abort(takeID: "T", reason: "operator")) == [.abandonRecorders, .deleteTake(takeID: "T")])
        let late = refusal(take.handle(.opened(arming, cameras: ["a", "b"], microphones: [])))
        #expect(late == NodeFailure(.badState, "take T was aborted on node n1 while its cameras were opening."))
        #expect(refusal(take.handle(.openFailed(arming, NodeFailure(.io, "x")))) == late)
        #expect(take.state == .idle && take.grid == nil)
    }

    // MARK: Start and stop

    @Test func startRecordsFromTheGroupAndAStopEndsAtTheEarliest() {
        var rig = Rig.recording(stop: 500)
        #expect(rig.take.stopGroup == 500)
        #expect(rig.take.handle(.stop(takeID: "T1", stopGroup: 300)) == [.stopRecorders(atGroup: 300)])
        #expect(rig.take.handle(.stop(takeID: "T1", stopGroup: 400)) == [.stopRecorders(atGroup: 400)])
        #expect(rig.take.stopGroup == 300)
        #expect(refusal(rig.take.handle(.stop(takeID: "T9", stopGroup: 1)))?.code == .badState)
    }

    @Test func aStartLessThanAFrameAheadIsRefused() {
        var rig = Rig.armed()
        // Group 10 begins at rig 10.4 s; the node's clock 9.38 s is rig 10.38 s, 20 ms before it.
        let f = refusal(rig.take.handle(.start(takeID: "T1", startGroup: 10, stopGroup: 0, localNow: 9_380_000)))
        #expect(f == NodeFailure(.badState, "start group 10 of take T1 begins 20 ms from now on node n1, less than one frame period ahead."))
        #expect(refusal(rig.take.handle(.start(takeID: "T1", startGroup: 10, stopGroup: 10, localNow: 0)))?.code == .badConfig)
        #expect(rig.take.state == .armed)
    }

    // MARK: Finishing

    @Test func theTakeIsFinalizedOnceWhenEveryRecorderHasFinished() {
        var rig = Rig.recording(stop: 100)
        #expect(rig.finished("a") == [])
        #expect(rig.finished("m") == [])
        #expect(rig.finished("b") == [.finalize(takeID: "T1")])
        #expect(rig.take.collectable("T1") != nil)   // still recording until the files are indexed
        #expect(rig.take.handle(.finalized(takeID: "T1")) == [])
        #expect(rig.take.state == .finished && rig.take.takesRecorded == 1)
        #expect(rig.take.collectable("T1") == nil)
        #expect(rig.take.handle(.stop(takeID: "T1", stopGroup: 100)) == [.stopRecorders(atGroup: 100)])
    }

    /// The bug fixed in `cameraFinished()`: two recorders finishing at once finished the take twice and counted it
    /// twice. However the finishes interleave (a recorder reporting twice, the last two at the same moment), one
    /// finalize comes out and the take is counted once.
    @Test func twoRecordersFinishingAtOnceFinalizeTheTakeOnce() {
        var rig = Rig.recording(stop: 100)
        _ = rig.finished("m")
        #expect(rig.finished("a") == [])
        #expect(rig.finished("b") == [.finalize(takeID: "T1")])
        #expect(rig.finished("a") == [])
        #expect(rig.finished("b") == [])
        _ = rig.take.handle(.finalized(takeID: "T1"))
        _ = rig.take.handle(.finalized(takeID: "T1"))
        #expect(rig.take.takesRecorded == 1)
    }

    /// The same, from recorder threads: the instance under one `Mutex`, as `NodeAgent` keeps it, with every
    /// recorder reporting its finish from its own thread at once.
    @Test func recorderThreadsFinishingTogetherGiveOneFinalize() {
        final class Node: Sendable {
            let state: Mutex<NodeTake>
            let finalizes = Atomic<Int>(0)
            init(_ take: NodeTake) { state = Mutex(take) }
        }
        for _ in 0..<50 {
            let rig = Rig.recording(stop: 100)
            let arming = rig.arming!
            let node = Node(rig.take)
            DispatchQueue.concurrentPerform(iterations: 6) { i in
                let recorder = ["a", "b", "m"][i % 3]
                let directives = node.state.withLock { $0.handle(.recorderFinished(arming, recorder: recorder)) }
                for case .finalize(let takeID) in directives {
                    node.finalizes.add(1, ordering: .relaxed)
                    node.state.withLock { _ = $0.handle(.finalized(takeID: takeID)) }
                }
            }
            #expect(node.finalizes.load(ordering: .relaxed) == 1)
            #expect(node.state.withLock { $0.takesRecorded } == 1)
            #expect(node.state.withLock { $0.state } == .finished)
        }
    }

    @Test func everyCameraEndedWhileArmedFinalizesAtTheStart() {
        var rig = Rig.armed()
        #expect(rig.finished("a") == [] && rig.finished("b") == [] && rig.finished("m") == [])
        let d = rig.take.handle(.start(takeID: "T1", startGroup: 10, stopGroup: 0, localNow: 0))
        #expect(d.last == .finalize(takeID: "T1"))
    }

    @Test func aRecorderOfAnEarlierArmChangesNothing() {
        var rig = Rig.recording()
        let old = rig.arming!
        _ = rig.take.handle(.abort(takeID: "T1", reason: "again"))
        // The same take id, configured and armed again.
        _ = rig.take.handle(.configure(takeID: "T1", cameras: Rig.settings, now: 0))
        guard case .openDevices(let arming, _, _, _) = rig.take.handle(.arm(takeID: "T1", grid: Rig.grid, clock: Rig.clock)).first else {
            Issue.record("no open")
            return
        }
        rig.arming = arming
        _ = rig.take.handle(.opened(arming, cameras: ["a", "b"], microphones: []))
        _ = rig.take.handle(.start(takeID: "T1", startGroup: 10, stopGroup: 0, localNow: 0))
        #expect(arming != old)
        for r in ["a", "b", "m"] { #expect(rig.take.handle(.recorderFinished(old, recorder: r)) == []) }
        #expect(rig.take.handle(.recorderEvent(old, recorder: "a", .cameraEnded, "late", localNow: 0)) == [])
        #expect(rig.take.events.isEmpty)
        #expect(rig.finished("a") == [])
        #expect(rig.finished("b") == [.finalize(takeID: "T1")])
    }

    // MARK: Abort

    @Test func abortOfAnArmedTakeDeletesItsFilesAndOfARecordingOneKeepsThem() {
        var armed = Rig.armed()
        #expect(armed.take.handle(.abort(takeID: "T1", reason: "")) == [.abandonRecorders, .deleteTake(takeID: "T1")])
        #expect(armed.take.state == .idle && armed.take.detail == "take T1 was aborted (no reason given)")
        var recording = Rig.recording()
        #expect(recording.take.handle(.abort(takeID: "T1", reason: "operator stop")) == [.abandonRecorders])
        #expect(recording.take.detail == "take T1 was aborted (operator stop)")
        #expect(recording.finished("a") == [] && recording.finished("b") == [] && recording.finished("m") == [])
        #expect(recording.take.takesRecorded == 0)
    }

    @Test func aForeignAbortIsRefusedAndTheTakeGoesOn() {
        var rig = Rig.recording(stop: 100)
        let f = refusal(rig.take.handle(.abort(takeID: "other", reason: "someone else")))
        #expect(f == NodeFailure(.notFound, "cannot abort take other: this node's take is T1."))
        #expect(rig.take.state == .recording && rig.take.detail.isEmpty)
        _ = rig.finished("a"); _ = rig.finished("m")
        #expect(rig.finished("b") == [.finalize(takeID: "T1")])
    }

    @Test func anArmedTakeNeverStartedIsDroppedFiveSecondsPastItsStart() {
        var rig = Rig.armed()
        // t0 is rig 10 s, local 9 s: at local 14 s the rig is exactly 5 s past t0, not more.
        #expect(rig.take.handle(.tick(localNow: 14_000_000)) == [])
        let d = rig.take.handle(.tick(localNow: 14_000_001))
        #expect(d == [.log(.warning, "take T1 was armed but never started; its start instant passed 5 s ago, so it is dropped"),
                      .abandonRecorders, .deleteTake(takeID: "T1")])
        #expect(rig.take.state == .idle && rig.take.detail == "take T1 was aborted (never started)")
        var recording = Rig.recording()
        #expect(recording.take.handle(.tick(localNow: 100_000_000)) == [])
    }

    // MARK: Repair

    @Test func aTakeACrashedPredecessorWasRecordingIsFinishedAgain() {
        var take = NodeTake(node: "n1", cameras: Rig.capabilities)
        #expect(take.handle(.recovered(takeID: "T0")) == [])
        #expect(take.state == .finished && take.takeID == "T0")
        #expect(take.detail == "take T0 was recovered after this node stopped mid-take; its files end where the recording did")
        #expect(take.collectable("T0") == nil && take.takesRecorded == 0)
        // Its coordinator, still polling, may stop it again; the next take replaces it.
        #expect(take.handle(.stop(takeID: "T0", stopGroup: 5)) == [.stopRecorders(atGroup: 5)])
        #expect(take.handle(.configure(takeID: "T1", cameras: Rig.settings, now: 0)) == [.configured(takeID: "T1", cameras: Rig.settings)])
        #expect(take.detail.isEmpty)
    }

    // MARK: What recorders do on their own

    @Test func aLostMicrophoneIsAnEventAndTheCamerasGoOn() {
        var rig = Rig.recording()
        let sentence = "microphone n1/m ended after 48000 samples: no sound arrived for 3 s; its file ends there and the cameras go on."
        let d = rig.take.handle(.recorderEvent(rig.arming, recorder: "m", .microphoneEnded, sentence, localNow: 11_000_000))
        // Local 11 s is rig 12 s.
        let event = TakeEvent(.microphoneEnded, at: 12_000_000, node: "n1", camera: "m", sentence)
        #expect(d == [.say(event)] && rig.take.events == [event])
        #expect(rig.finished("m") == [])
        #expect(rig.take.state == .recording)
        #expect(rig.take.handle(.stop(takeID: "T1", stopGroup: 400)) == [.stopRecorders(atGroup: 400)])
        _ = rig.finished("a")
        #expect(rig.finished("b") == [.finalize(takeID: "T1")])
    }

    @Test func aMicrophoneLeftOutAtArmIsSaidOnTheNodesClock() {
        var take = NodeTake(node: "n1", cameras: Rig.capabilities)
        _ = take.handle(.configure(takeID: "T", cameras: Rig.settings, now: 0))
        guard case .openDevices(let arming, _, _, _) = take.handle(.arm(takeID: "T", grid: Rig.grid, clock: Rig.clock)).first else {
            Issue.record("no open")
            return
        }
        let d = take.handle(.recorderEvent(arming, recorder: "m", .microphoneEnded, "no device. The take goes on without it.", localNow: 7))
        #expect(d == [.say(TakeEvent(.microphoneEnded, at: 7, node: "n1", camera: "m", "no device. The take goes on without it."))])
        _ = take.handle(.opened(arming, cameras: ["a", "b"], microphones: []))
        #expect(take.events.count == 1)
    }

    @Test func stagingLostEndsOneCameraWithAnEvent() {
        var rig = Rig.recording()
        let sentence = "camera n1/a stopped after group 40: its files were deleted from the staging directory /s/T1/n1 while it recorded"
        let d = rig.take.handle(.recorderEvent(rig.arming, recorder: "a", .stagingLost, sentence, localNow: 0))
        #expect(d == [.say(TakeEvent(.stagingLost, at: 1_000_000, node: "n1", camera: "a", sentence))])
        #expect(rig.finished("a") == [] && rig.take.state == .recording)
        #expect(refusal(rig.take.handle(.adjust(takeID: "T1", camera: "b", .disable(from: 50)))) == nil)
        _ = rig.finished("m")
        #expect(rig.finished("b") == [.finalize(takeID: "T1")])
    }

    @Test func aFullDiskEndsTheCameraItFilledAndShutdownPressureStopsTheTake() {
        var rig = Rig.recording()
        let full = "camera n1/b stopped recording after group 80: No space left on device"
        #expect(rig.take.handle(.recorderEvent(rig.arming, recorder: "b", .writeFailed, full, localNow: 0)).count == 1)
        #expect(rig.finished("b") == [])
        // The disk filling is judged shutdown: every recorder stops two groups past the nearest one now.
        let reading = PressureReading(level: .shutdown, factor: "disk", cause: "the staging disk has 80 MB left")
        let d = rig.take.handle(.pressure(reading, localNow: 11_000_000))   // rig 12 s: group 50
        let shutdown = "node n1 stopped its cameras after group 51 with their files finalized: the staging disk has 80 MB left"
        #expect(d == [.log(.notice, "pressure shutdown (the staging disk has 80 MB left)"),
                      .say(TakeEvent(.pressure, at: 12_000_000, node: "n1", "shutdown: the staging disk has 80 MB left")),
                      .stopRecorders(atGroup: 52), .log(.error, shutdown),
                      .say(TakeEvent(.pressureShutdown, at: 12_000_000, node: "n1", shutdown))])
        #expect(rig.take.events.map(\.kind) == [.writeFailed, .pressure, .pressureShutdown])
        // Said once: a later reading at the same level stops nothing again.
        #expect(rig.take.handle(.pressure(reading, localNow: 11_500_000)) == [])
        _ = rig.finished("a"); _ = rig.finished("m")
        #expect(rig.take.handle(.finalized(takeID: "T1")) == [])
        #expect(rig.take.state == .finished)
    }

    @Test func theNodesOwnStopEndsARecordingTakeOnAGroupItNamesAndTakesNoOtherTake() {
        var rig = Rig.recording()
        let d = rig.take.handle(.stopping(cause: "SIGTERM, its service shutting down", localNow: 11_000_000))   // rig 12 s: group 50
        let sentence = "node n1 was stopped (SIGTERM, its service shutting down): its cameras end take T1 after group 51, and the take's later groups are not recorded on this node"
        #expect(d == [.stopRecorders(atGroup: 52), .log(.warning, sentence),
                      .say(TakeEvent(.nodeStopped, at: 12_000_000, node: "n1", sentence))])
        #expect(rig.take.detail == sentence && rig.take.stoppingCause == "SIGTERM, its service shutting down")
        // Not the take's stop group: a coordinator must not take it for a stop of the whole rig.
        #expect(rig.take.stopGroup == 0)
        // Said once; the recorders then finish and the take is final as usual.
        #expect(rig.take.handle(.stopping(cause: "SIGINT", localNow: 11_100_000)) == [])
        _ = rig.finished("a"); _ = rig.finished("m")
        #expect(rig.finished("b") == [.finalize(takeID: "T1")])
        #expect(rig.take.handle(.finalized(takeID: "T1")) == [] && rig.take.state == .finished)
        // A stopping node takes no new take.
        let refused = refusal(rig.take.handle(.configure(takeID: "T2", cameras: Rig.settings, now: 0)))
        #expect(refused?.message == "node n1 is stopping (SIGTERM, its service shutting down); it takes no new take.")
    }

    @Test func theNodesOwnStopBeforeATakesOwnStopKeepsTheEarlierAndOfAnArmedTakeRecordsNothing() {
        var rig = Rig.recording(stop: 30)
        #expect(rig.take.handle(.stopping(cause: "SIGTERM, its service shutting down", localNow: 11_000_000)).first == .stopRecorders(atGroup: 30))
        var armed = Rig.armed()
        let d = armed.take.handle(.stopping(cause: "SIGINT, its service shutting down", localNow: 0))
        let sentence = "node n1 was stopped (SIGINT, its service shutting down) while take T1 was armed: it records nothing of it"
        #expect(d == [.log(.warning, sentence), .say(TakeEvent(.nodeStopped, at: 1_000_000, node: "n1", sentence))])
        var idle = NodeTake(node: "n1", cameras: Rig.capabilities)
        #expect(idle.handle(.stopping(cause: "SIGTERM", localNow: 0)) == [] && idle.events.isEmpty)
    }

    @Test func aTakeEndedByThePreviousProcesssStopIsItsTakeAgainWithItsEvents() {
        var take = NodeTake(node: "n1", cameras: Rig.capabilities)
        let event = TakeEvent(.nodeStopped, at: 5, node: "n1", "node n1 was stopped (SIGTERM, its service shutting down): …")
        #expect(take.handle(.resumedStopped(takeID: "T0", detail: event.detail, events: [event])) == [])
        #expect(take.state == .finished && take.takeID == "T0" && take.events == [event] && take.detail == event.detail)
        // Its coordinator's clock updates are ignored, not refused as for a take the node does not have.
        #expect(take.handle(.updateClock(takeID: "T0", Rig.clock)) == [.ignored("take T0 is finished; clock update ignored")])
        #expect(take.stoppingCause == nil)
        #expect(take.handle(.configure(takeID: "T1", cameras: Rig.settings, now: 0)) == [.configured(takeID: "T1", cameras: Rig.settings)])
    }

    @Test func pressureChangesOutsideATakeAreOnlyLogged() {
        var take = NodeTake(node: "n1", cameras: Rig.capabilities)
        let d = take.handle(.pressure(PressureReading(level: .serious, factor: "thermal", cause: "hot"), localNow: 0))
        #expect(d == [.log(.notice, "pressure serious (hot)")] && take.events.isEmpty && take.pressure.level == .serious)
    }

    // MARK: Adjust and clock

    @Test func adjustSlowsOrDisablesARecordedCamera() {
        var rig = Rig.recording()
        #expect(rig.take.handle(.adjust(takeID: "T1", camera: "a", .slow(every: 5, from: 40))) == [.adjust(camera: "a", .slow(every: 5, from: 40))])
        #expect(rig.take.handle(.adjust(takeID: "T1", camera: "a", .disable(from: 60))) == [.adjust(camera: "a", .disable(from: 60))])
        #expect(refusal(rig.take.handle(.adjust(takeID: "T1", camera: "a", .slow(every: 26, from: 40))))
                == NodeFailure(.badConfig, "camera n1/a: record_every 26 must be between 1 and 25."))
        #expect(refusal(rig.take.handle(.adjust(takeID: "T1", camera: "a", .unknown)))?.code == .badConfig)
        // A microphone is no camera to adjust.
        #expect(refusal(rig.take.handle(.adjust(takeID: "T1", camera: "m", .disable(from: 1))))
                == NodeFailure(.notFound, "node n1 records no camera m in take T1."))
        #expect(refusal(rig.take.handle(.adjust(takeID: "T2", camera: "a", .disable(from: 1))))
                == NodeFailure(.badState, "node n1 is not recording take T2."))
    }

    @Test func aClockUpdateAppliesWhileTheTakeRunsAndIsIgnoredAfter() {
        var rig = Rig.recording(stop: 100)
        let newer = ClockMapping(offsetMicroseconds: 1_000_050)
        #expect(rig.take.handle(.updateClock(takeID: "T1", newer)) == [.updateClock(newer)])
        #expect(rig.take.clock == newer)
        _ = rig.finished("a"); _ = rig.finished("b"); _ = rig.finished("m")
        _ = rig.take.handle(.finalized(takeID: "T1"))
        #expect(rig.take.handle(.updateClock(takeID: "T1", Rig.clock)) == [.ignored("take T1 is finished; clock update ignored")])
        #expect(refusal(rig.take.handle(.updateClock(takeID: "T2", Rig.clock)))?.code == .notFound)
    }
}
