// Issue 25: a microphone lost before group 0 has no file; where sound is required, the take is partial and says why.
import CoordCore
import Foundation
import Testing
@testable import Coordinator

@Suite struct LostMicrophoneTests {
    func finished(required: Bool) -> TakeManifest {
        var pending = PendingManifest(takeID: "20260101-000000-x-000001", name: "x", grid: FrameGrid(t0: 1_000_000, periodMicroseconds: 33_333),
                                      groups: 30, startWallclock: "2026-01-01T00:00:00Z", nodes: [])
        var status = NodeStatus(node: "a", state: .finished)
        var mic = NodeStatus.Mic(mic: "mic0")
        mic.finished = true
        mic.error = "the microphone stopped delivering sound"
        status.mics = [mic]
        pending.nodes = [.init(name: "a", cameras: [], clock: .init(offsetMicroseconds: 0, driftPPM: 0, uncertaintyMicroseconds: 1))]
        pending.finalStatus = ["a": status]
        pending.audioRequired = required
        let outcome = Collector.Outcome(run: CollectionRecord.Run(started: "2026-01-01T00:00:05Z", seconds: 0, fetchedBytes: 0, alreadyHad: 0, files: []))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lost-mic-\(UUID().uuidString)")
        return TakeCollection.finish(pending.manifest, outcome: outcome, directory: directory, afterConfirm: .delete).0
    }

    @Test func itIsListedApartAndNeverFetched() {
        let m = finished(required: false)
        #expect(m.audio == nil && m.audioLost?.map(\.mic) == ["mic0"])
        #expect(m.status == .complete && !m.events.contains { $0.kind == .incomplete })
    }

    @Test func requiredSoundMakesTheTakePartialAndSaysWhich() {
        let m = finished(required: true)
        #expect(m.status == .partial)
        let said = m.events.filter { $0.kind == .incomplete }.map(\.detail)
        #expect(said == ["sound is required and microphone a/mic0 recorded none: it ended before group 0: the microphone stopped delivering sound"])
    }
}
