import Testing
@testable import CoordCore

/// The arming lead on the console: a take started here is armed before its group 0, and is shown starting, with
/// the time left to group 0, until then (issue 35: it was shown recording from the arm).
@Suite struct ConsoleTakeLeadTests {
    @Test func anArmedTakeIsStartingUntilGroupZeroThenRecording() throws {
        var s = ConsoleTakeState()
        _ = s.start(name: "scene", seconds: 5)
        _ = s.recording(takeID: "20261127-091500-scene-a1b2c3")
        // Armed, group 0 not placed yet.
        let armed = try #require(s.view(now: 1_000_000, ownRecorded: nil))
        #expect(armed.state == .starting && armed.startsInS == nil && armed.elapsedS == 0)
        // Group 0 at 2.8 s: 1.8 s ahead, then 0.05 s ahead (said as 0.1 s, never 0 while still ahead).
        let lead = try #require(s.view(now: 1_000_000, ownRecorded: 0, ownGroupZero: 2_800_000))
        #expect(lead.state == .starting && lead.startsInS == 1.8 && lead.elapsedS == 0)
        #expect(s.view(now: 2_750_000, ownRecorded: 0, ownGroupZero: 2_800_000)?.startsInS == 0.1)
        // From group 0 it records.
        let recording = try #require(s.view(now: 3_800_000, ownRecorded: 1, ownGroupZero: 2_800_000))
        #expect(recording.state == .recording && recording.startsInS == nil && recording.elapsedS == 1)
        // A stop asked in the lead is shown as stopping, not as starting.
        _ = s.ownStop(accepted: true)
        #expect(s.view(now: 1_000_000, ownRecorded: 0, ownGroupZero: 2_800_000)?.state == .stopping)
    }

    @Test func aTakeNotYetArmedIsStartingWithNoCountdown() throws {
        var s = ConsoleTakeState()
        _ = s.start(name: "scene", seconds: nil)
        let view = try #require(s.view(now: 0, ownRecorded: nil, ownGroupZero: nil))
        #expect(view.state == .starting && view.startsInS == nil)
    }
}
