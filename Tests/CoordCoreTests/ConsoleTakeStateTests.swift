import Testing
@testable import CoordCore

/// The console's take as a pure value: the paths its shell (LiveRigTakes) takes, each decided here.
@Suite struct ConsoleTakeStateTests {
    let grid = FrameGrid(t0: 10_000_000, periodMicroseconds: 40_000)
    let id = "20261127-091500-orphan-a1b2c3"

    func nothing(_ r: (view: LiveView.TakeView?, said: String?)) -> Bool { r.view == nil && r.said == nil }

    func elsewhere(stop: Int64 = 2_160_000, rigNow: Int64 = 12_000_000) -> AdoptedTake {
        AdoptedTake(takeID: id, grid: grid, stopGroup: stop, rigNow: rigNow, nodes: ["a", "b"])
    }

    @Test func aTakeFromThePageStartsRecordsStopsAndEnds() throws {
        var s = ConsoleTakeState()
        let started = try s.start(name: "scene", seconds: nil).get()
        #expect(started.state == .starting && started.takeId == nil)
        // Only one at a time.
        #expect(s.start(name: "again", seconds: 1) == .failure(.init(.conflict, "a take is already running from this console; stop it first.")))
        // A stop before it records is refused by the session, and said so.
        #expect(s.stop() == .own)
        #expect(s.ownStop(accepted: false) == .failure(.init(.conflict, "the take is not recording yet (it is starting); stop it once it records.")))
        let recording = s.recording(takeID: id)
        #expect(recording.view?.state == .recording && recording.view?.takeId == id && !recording.stopNow)
        #expect(try s.ownStop(accepted: true).get().state == .stopping)
        #expect(s.collecting()?.state == .collecting)
        var final = try #require(s.take)
        final.state = .done
        #expect(s.finished(final) == final)
        #expect(!s.ownRunning && s.finishedWhileClosing == nil)
        #expect(s.stop() == .refused(.init(.conflict, "no take is recording: there is nothing to stop.")))
        #expect(try s.start(name: "next", seconds: 2).get().seconds == 2)
    }

    @Test func elapsedTimeComesFromTheSessionForAnOwnTakeAndFromTheNodesForAnAdoptedOne() throws {
        var own = ConsoleTakeState()
        _ = own.start(name: "scene", seconds: 5)
        #expect(own.view(now: 0, ownRecorded: nil)?.elapsedS == 0)
        _ = own.recording(takeID: id)
        #expect(own.view(now: 0, ownRecorded: 1.25)?.elapsedS == 1.25)

        var adopted = ConsoleTakeState()
        _ = adopted.seen(elsewhere(rigNow: 12_000_000), now: 500_000_000)
        // Half a second later on this console's clock: the rig clock moved on as much.
        #expect(adopted.view(now: 500_500_000, ownRecorded: nil)?.elapsedS == 2.5)
    }

    @Test func aTakeTheNodesRecordIsAdoptedRefusesAStartAndIsStoppedFromHere() throws {
        var s = ConsoleTakeState()
        let (view, said) = s.seen(elsewhere(), now: 1)
        #expect(view?.state == .recording && view?.takeId == id && view?.name == "orphan")
        // 2 160 000 groups at 25 fps is a 24-hour limit: an open-ended take has no length to show.
        #expect(view?.seconds == nil)
        #expect(said?.contains("started elsewhere") == true)
        // Seen again unchanged: nothing new to show or say.
        #expect(nothing(s.seen(elsewhere(rigNow: 13_000_000), now: 2)))
        guard case .failure(let refusal) = s.start(name: "another", seconds: nil) else { Issue.record("a start was accepted"); return }
        #expect(refusal.kind == .conflict && refusal.sentence.contains(id) && refusal.sentence.contains("stop"))
        #expect(s.stop() == .adopted(elsewhere(rigNow: 13_000_000)))
        // A second Stop while it stops is refused, not sent again.
        guard case .refused = s.stop() else { Issue.record("a second stop was sent"); return }
        #expect(s.adoptedStopPlaced(true)?.state == .stopping)
        // The nodes finish: the adopted take stays until its collection here ends.
        #expect(nothing(s.seen(nil, now: 3)))
        #expect(s.adopted != nil && s.take?.state == .stopping)
        var final = try #require(s.take)
        final.state = .done
        _ = s.finished(final)
        #expect(s.adopted == nil && !s.adoptedStopping && s.take?.state == .done)
    }

    @Test func aStopThatCouldNotBePlacedCanBeTriedAgain() {
        var s = ConsoleTakeState()
        _ = s.seen(elsewhere(), now: 1)
        #expect(s.stop() == .adopted(elsewhere()))
        #expect(s.adoptedStopPlaced(false) == nil)
        #expect(s.stop() == .adopted(elsewhere()))
    }

    @Test func aStopBroughtForwardElsewhereShowsStoppingAndATakeThatEndsElsewhereIsLetGo() throws {
        var s = ConsoleTakeState()
        _ = s.seen(elsewhere(stop: 2_160_000), now: 1)
        let (stopping, _) = s.seen(elsewhere(stop: 300), now: 2)
        #expect(stopping?.state == .stopping)
        let (gone, said) = s.seen(nil, now: 3)
        #expect(gone == nil && s.take == nil && s.adopted == nil)
        #expect(said?.contains("no longer recorded") == true)
    }

    @Test func aTakeWithALengthStartedElsewhereShowsIt() {
        var s = ConsoleTakeState()
        #expect(s.seen(elsewhere(stop: 1500), now: 1).view?.seconds == 60)
    }

    @Test func theNodesRecordingThisConsolesOwnTakeAdoptNothing() throws {
        var s = ConsoleTakeState()
        _ = s.start(name: "scene", seconds: nil)
        _ = s.recording(takeID: id)
        #expect(nothing(s.seen(elsewhere(), now: 1)))
        #expect(s.adopted == nil)
    }

    @Test func shuttingDownStopsTheOwnTakeOrWaitsForTheAdoptedOneAndStartsNothing() throws {
        var idle = ConsoleTakeState()
        #expect(idle.close() == .nothing)
        #expect(idle.start(name: "late", seconds: nil) == .failure(.init(.unavailable, "the console is shutting down; start the take from a console that is running.")))

        var own = ConsoleTakeState()
        _ = own.start(name: "scene", seconds: nil)
        #expect(own.close() == .stopOwn(name: "scene"))
        // Still starting as the console closes: it stops the moment it records.
        let recording = own.recording(takeID: id)
        #expect(recording.stopNow && recording.view?.state == .stopping)
        var final = try #require(own.take)
        final.state = .done
        _ = own.finished(final)
        #expect(own.finishedWhileClosing == final)

        var adopted = ConsoleTakeState()
        _ = adopted.seen(elsewhere(), now: 1)
        _ = adopted.stop()
        _ = adopted.adoptedStopPlaced(true)
        #expect(adopted.close() == .adoptedStopping(takeID: id, stopGroup: 2_160_000))
        // An adopted take not being stopped from here is left to the rig.
        var left = ConsoleTakeState()
        _ = left.seen(elsewhere(), now: 1)
        #expect(left.close() == .nothing)
        guard case .refused(let refusal) = left.stop() else { Issue.record("a closing console stopped a take"); return }
        #expect(refusal.kind == .unavailable)
    }
}
