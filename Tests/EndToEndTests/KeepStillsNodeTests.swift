// The console's Snap at a real coord-node process (issue 39): KeepStills is refused in one sentence while the node
// does not preview, for a group already past and for a shot id it holds; a shot ahead is kept from every previewing
// camera at the camera's size and listed (final) with its table of centres once written.
import CoordCore
import CoordWire
import Foundation
import Platform
import Testing
import ZeroMQ
@testable import Coordinator

@Suite struct KeepStillsNodeTests {
    /// The node's answer to `body`: nil for an Ack, else the refusal's sentence.
    func answer(_ link: NodeLink, _ body: Envelope.OneOf_Body) async -> String? {
        do {
            _ = try await link.request(body, timeout: 10, what: "the test's request")
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func aNodeKeepsAShotFromItsPreviewAndRefusesWhatItCannotKeep() async throws {
        let scratch = try E2E.makeScratch()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let node = try await E2E.offPool {
            try NodeProcess.start(name: "n1", staging: scratch.appendingPathComponent("staging"), log: scratch.appendingPathComponent("n1.log"),
                                  cameras: ["cam0", "cam1"])
        }
        defer { node.stop() }
        let context = ZMQContext()
        let link = try NodeLink(endpoint: node.endpoint, context: context)
        defer { link.close() }
        let grid = FrameGrid(t0: MonotonicClock.now(), periodMicroseconds: 33_333)
        let ahead = { (ms: Int64) in grid.nearestGroup(to: MonotonicClock.now() + ms * 1000) }

        let idle = await answer(link, CoordRequest.keepStills(shotID: "shot-idle", groups: [ahead(300)], format: .png))
        #expect(idle?.contains("does not preview") == true, "\(idle ?? "accepted")")

        // The node's clock is the host's (no simulated offset): the identity mapping is the truth.
        let cameras = [CameraSettings(camera: "cam0", ordinal: 0, width: 320, height: 240, fps: 30, codec: .mjpeg),
                       CameraSettings(camera: "cam1", ordinal: 1, width: 640, height: 480, fps: 30, codec: .mjpeg)]
        let start = CoordRequest.startPreview(cameras: cameras, clock: ClockMapping(offsetMicroseconds: 0, referenceLocal: MonotonicClock.now(), uncertaintyMicroseconds: 5),
                                              grid: grid, preview: PreviewSettings(width: 160, fps: 5), lease: .seconds(20))
        #expect(await answer(link, start) == nil)

        let past = await answer(link, CoordRequest.keepStills(shotID: "shot-past", groups: [max(0, ahead(-100))], format: .png))
        #expect(past?.contains("is already past on node n1") == true, "\(past ?? "accepted")")
        let far = await answer(link, CoordRequest.keepStills(shotID: "shot-far", groups: [ahead(120_000)], format: .png))
        #expect(far?.contains("at most 60 s ahead") == true, "\(far ?? "accepted")")

        let group = ahead(1_000)
        #expect(await answer(link, CoordRequest.keepStills(shotID: "shot-1", groups: [group], format: .png)) == nil)
        let again = await answer(link, CoordRequest.keepStills(shotID: "shot-1", groups: [group + 3], format: .png))
        #expect(again?.contains("already holds files of shot-1") == true, "\(again ?? "accepted")")

        // Listed as not final until both cameras passed the group and their stills are written.
        var listed: [String] = []
        let deadline = MonotonicClock.now() + 15_000_000
        while MonotonicClock.now() < deadline {
            let (reply, _) = try await link.request(CoordRequest.listFiles(takeID: "shot-1"), timeout: 10, what: "the file list")
            if case .fileList(let list) = reply.body, list.final { listed = list.files.map(\.path).sorted(); break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(listed == ["n1/cam0.png", "n1/cam0.stills.csv", "n1/cam1.png", "n1/cam1.stills.csv"])
        #expect(MonotonicClock.now() >= grid.instant(ofGroup: group), "listed before the shot's group came")
        let folder = node.staging.appendingPathComponent("shot-1/n1")
        for (camera, width, height) in [("cam0", 320, 240), ("cam1", 640, 480)] {
            let png = try Data(contentsOf: folder.appendingPathComponent("\(camera).png"))
            // PNG's IHDR: width and height, big-endian, at bytes 16 and 20.
            let size = (png[16..<20].reduce(0) { $0 << 8 | Int($1) }, png[20..<24].reduce(0) { $0 << 8 | Int($1) })
            #expect(size == (width, height), "\(camera)")
            let rows = try FramesTable.parse(String(decoding: try Data(contentsOf: folder.appendingPathComponent("\(camera).stills.csv")), as: UTF8.self))
            #expect(rows.count == 1 && rows[0].group == group)
            #expect(abs(rows[0].centerMicroseconds - grid.instant(ofGroup: group)) < 2_000, "\(rows)")
        }
    }
}
