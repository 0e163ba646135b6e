@testable import Coordinator
import CoordCore
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import TakeReport
import Testing

/// sync-report.html as the take directory writer makes it: the page from TakeReport, fed the collected frames
/// tables. (The page itself is tested in TakeReportTests.)
@Suite("Sync report page writer")
struct ReportPageWriterTests {
    @Test func writerRendersThePageFromTheCollectedFramesTables() throws {
        let dir = try E2E.makeScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let period: Int64 = 33_333, t0: Int64 = 5_000_000, groups: Int64 = 30
        var cameras: [TakeManifest.Camera] = [], inputs: [SyncReport.Input] = [], rows: [String: [FrameRow]] = [:]
        for i in 0..<2 {
            let (node, camera) = ("node-0", "cam\(i)")
            let list = (0..<groups).map { g in FrameRow(frame: g, group: g, centerMicroseconds: t0 + g * period + Int64(i * 3), isDup: false) }
            rows["\(node)/\(camera)"] = list
            cameras.append(TakeManifest.Camera(
                node: node, camera: camera, ordinal: i, width: 320, height: 240, fps: 30, codec: "mjpeg", frames: groups, dropped: 0,
                clock: .init(offsetMicroseconds: 0, driftPPM: 0, uncertaintyMicroseconds: 2, boundMicroseconds: 40),
                files: [.init(path: "\(node)/\(camera).mkv", bytes: 1, sha256: ""), .init(path: "\(node)/\(camera).frames.csv", bytes: 1, sha256: "")]))
            inputs.append(SyncReport.Input(node: node, camera: camera, rows: list, clockUncertaintyMicroseconds: 2))
        }
        let manifest = TakeManifest(takeID: "20260101-000000-test-abcdef", name: "test", status: .complete, t0Microseconds: t0,
                                    framePeriodMicroseconds: period, groups: groups, startWallclock: "2026-01-01T00:00:00.000000Z",
                                    cameras: cameras, events: [])
        let report = SyncReport(groups: groups, grid: FrameGrid(t0: t0, periodMicroseconds: period), inputs: inputs)
        // Only the first camera's frames.csv was collected.
        let (node, camera) = (manifest.cameras[0].node, manifest.cameras[0].camera)
        try FileManager.default.createDirectory(at: dir.appendingPathComponent(node), withIntermediateDirectories: true)
        let csv = ([FramesTable.header] + rows["\(node)/\(camera)"]!.map(FramesTable.line)).joined(separator: "\n") + "\n"
        try csv.write(to: dir.appendingPathComponent("\(node)/\(camera).frames.csv"), atomically: true, encoding: .utf8)
        let writer = TakeDirectoryWriter(directory: dir)
        let read = writer.framesRows(manifest)
        #expect(read.keys.sorted() == ["\(node)/\(camera)"], "the second camera has no frames.csv, so no entry")
        #expect(read["\(node)/\(camera)"] == rows["\(node)/\(camera)"])
        try writer.write(manifest: manifest, report: report)
        let page = try String(contentsOf: dir.appendingPathComponent("sync-report.html"), encoding: .utf8)
        #expect(page == SyncReportPage.html(manifest: manifest, report: report, rows: read))
        #expect(page == SyncReportPage.html(takeDirectory: dir, manifest: manifest, report: report))
        let verdict = try XMLDocument(xmlString: page, options: []).nodes(forXPath: "//p[starts-with(@class, 'verdict ')]")
        #expect(verdict.count == 1)
        #expect(verdict.first?.stringValue?.contains("\(manifest.cameras[1].node)/\(manifest.cameras[1].camera).frames.csv is missing") == true)
    }
}
