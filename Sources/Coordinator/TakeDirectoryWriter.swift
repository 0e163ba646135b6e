import CoordCore
import Foundation
import Platform
import TakeReport

/// Writes manifest.json, sync-report.json and sync-report.html into a take directory and reads back the
/// collected frames tables.
struct TakeDirectoryWriter {
    let directory: URL

    /// The frames table at `csvPath`, read through the take funnel (a link or FIFO there gives no rows, never its
    /// target's); empty when there is none or it does not parse.
    func rows(csvPath: String) -> [FrameRow] {
        guard let data = try? TakeDirectory.open(directory.path).data(csvPath, limit: 256 << 20),
              let text = String(data: data, encoding: .utf8) else { return [] }
        return (try? FramesTable.parse(text)) ?? []
    }

    /// Frame i of a complete file is group i.
    func rowsMatchGroups(_ rows: [FrameRow]) -> Bool {
        rows.enumerated().allSatisfy { Int64($0.offset) == $0.element.frame && Int64($0.offset) == $0.element.group }
    }

    func write(manifest: TakeManifest, report: SyncReport) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try atomically(encoder.encode(manifest), "manifest.json")
        try atomically(encoder.encode(report), "sync-report.json")
        try atomically(EditorialTimeline.otio(manifest), "\(manifest.takeID).otio")
        try atomically(Data(SyncReportPage.html(takeDirectory: directory, manifest: manifest, report: report).utf8),
                       "sync-report.html")
    }

    /// Each manifest camera's frames.csv rows keyed "node/camera"; a camera whose frames.csv is missing has no entry.
    func framesRows(_ manifest: TakeManifest) -> [String: [FrameRow]] {
        var out: [String: [FrameRow]] = [:]
        for camera in manifest.cameras {
            let csv = "\(camera.node)/\(camera.camera).frames.csv"
            guard (try? TakeDirectory.open(directory.path).checkFile(csv)) == true else { continue }
            out["\(camera.node)/\(camera.camera)"] = rows(csvPath: csv)
        }
        return out
    }

    /// The manifest alone, before collection (no report yet: it is made from the collected frames).
    func writePending(_ manifest: TakeManifest) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try atomically(encoder.encode(manifest), "manifest.json")
    }

    private func atomically(_ data: Data, _ name: String) throws {
        let url = directory.appendingPathComponent(name)
        do {
            try data.write(to: url, options: .atomic)
        } catch {
            throw CoordError(.failure, "cannot write \(url.path): \(reason(error)).")
        }
    }
}
