// Issue 36 item 4: the lone USB webcam of a take unplugged mid-take (uvcvideo through the lab's dummy_hcd) left a
// manifest saying "complete": the take's groups shrink to the last table's end, where its frames then match. A
// camera that ended mid-take makes the take partial, with the node's sentence as the event that says why.
import CoordCore
import Foundation
import Testing
@testable import Coordinator

@Suite struct EndedCameraTests {
    func finished(events: [TakeManifest.Event]) -> TakeManifest {
        var pending = PendingManifest(takeID: "20260101-000000-x-000002", name: "x",
                                      grid: FrameGrid(t0: 1_000_000, periodMicroseconds: 33_333),
                                      groups: 240, startWallclock: "2026-01-01T00:00:00Z", nodes: [])
        pending.nodes = [.init(name: "vm1", cameras: [], clock: .init(offsetMicroseconds: 0, driftPPM: 0, uncertaintyMicroseconds: 1))]
        pending.finalStatus = ["vm1": NodeStatus(node: "vm1", state: .finished)]
        pending.events = events
        let outcome = Collector.Outcome(run: CollectionRecord.Run(started: "2026-01-01T00:00:05Z", seconds: 0, fetchedBytes: 0,
                                                                  alreadyHad: 0, files: []))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ended-camera-\(UUID().uuidString)")
        return TakeCollection.finish(pending.manifest, outcome: outcome, directory: directory, afterConfirm: .delete).0
    }

    @Test func aCameraThatEndedMidTakeMakesItPartialAndSaysWhy() {
        let why = "camera vm1/cam0 ended after group 118: poll on /dev/video1 failed: No such device, the camera was "
            + "unplugged or reset (errno 19)"
        let manifest = finished(events: [.init(tMicroseconds: 4_000_000, node: "vm1", camera: "cam0", kind: .cameraEnded,
                                               detail: why)])
        #expect(manifest.status == .partial)
        #expect(manifest.events.contains { $0.kind == .cameraEnded && $0.camera == "cam0" && $0.detail == why })
    }

    @Test func aTakeNoCameraLeftEarlyStaysComplete() {
        #expect(finished(events: []).status == .complete)
    }
}
