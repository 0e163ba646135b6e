import CoordCore
import Foundation
import Platform
import TakeReport

extension SyncReportPage {
    /// The page for the take in `directory`, its rows read from each manifest camera's frames.csv and its file list
    /// with each file's xxh128 where manifest.json's files[] carry one.
    public static func html(takeDirectory directory: URL, manifest: TakeManifest, report: SyncReport) -> String {
        html(manifest: manifest, report: report, rows: TakeDirectoryWriter(directory: directory).framesRows(manifest),
             xxh128: checksums(directory))
    }

    /// Each file's `xxh128` by path from the take's manifest's cameras[].files[] and audio[] (read as JSON: the key is
    /// the hand-off's, CONTRACT §10); empty when the manifest has none or is not a regular file.
    static func checksums(_ directory: URL) -> [String: String] {
        guard let data = try? TakeDirectory.open(directory.path).data("manifest.json", limit: 64 << 20),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return [:] }
        var out: [String: String] = [:]
        let cameraFiles = (json["cameras"] as? [[String: Any]] ?? []).flatMap { $0["files"] as? [[String: Any]] ?? [] }
        for file in cameraFiles + (json["audio"] as? [[String: Any]] ?? []) {
            if let path = file["path"] as? String, let hash = file["xxh128"] as? String { out[path] = hash }
        }
        return out
    }
}
