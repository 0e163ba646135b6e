// Issue 35: a microphone's file keeps the xxh128 collection checked it by, in the manifest's audio entry (beside sha256)
// and so on the report's file list; a later collection run that finds the file already here keeps it too.
import CoordCore
import Foundation
import Testing
@testable import Coordinator

@Suite struct AudioChecksumTests {
    static let xxh128 = "00112233445566778899aabbccddeeff"

    func finished(_ verified: [String: TakeManifest.File]) -> TakeManifest {
        var pending = TakeManifest(takeID: "20260101-000000-x-000002", name: "x", status: .partial, t0Microseconds: 1_000_000,
                                   framePeriodMicroseconds: 33_333, groups: 30, startWallclock: "2026-01-01T00:00:00Z",
                                   cameras: [], events: [])
        pending.audio = [TakeManifest.Audio(node: "a", mic: "mic0", sampleRate: 48_000, channels: 1, startMicroseconds: 1_000_000,
                                            frames: 48_000, avOffsetMicroseconds: .init(p50: 20, p99: 70), rateErrorPPM: 12)]
        var outcome = Collector.Outcome(run: CollectionRecord.Run(started: "2026-01-01T00:00:05Z", seconds: 0, fetchedBytes: 0, alreadyHad: 0, files: []))
        outcome.verified = verified
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("audio-xxh128-\(UUID().uuidString)")
        return TakeCollection.finish(pending, outcome: outcome, directory: directory, afterConfirm: .delete).0
    }

    @Test func theManifestsAudioEntryCarriesTheCheckedXXH128() throws {
        let sha = String(repeating: "b", count: 64)
        let m = finished(["a/mic0.mka": .init(path: "a/mic0.mka", bytes: 97_351, sha256: sha, xxh128: Self.xxh128)])
        #expect(m.audio?.first?.sha256 == sha && m.audio?.first?.xxh128 == Self.xxh128 && m.audio?.first?.bytes == 97_351)
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(m)) as? [String: Any]
        #expect((json?["audio"] as? [[String: Any]])?.first?["xxh128"] as? String == Self.xxh128)
        // From a node that predates xxh128: no key, sha256 as before.
        let old = finished(["a/mic0.mka": .init(path: "a/mic0.mka", bytes: 97_351, sha256: sha)])
        #expect(old.audio?.first?.sha256 == sha && old.audio?.first?.xxh128 == nil)
        // Not collected: neither.
        let none = finished([:])
        #expect(none.audio?.first?.sha256 == "" && none.audio?.first?.xxh128 == nil)
    }
}
