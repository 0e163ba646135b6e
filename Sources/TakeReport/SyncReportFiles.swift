import CoordCore
import Foundation

// The report's file list: every file of the take the manifest names, with its size and, where the manifest
// carries one, its xxh128 (the hand-off's checksum); paths relative to the take directory (the page links nothing).
extension SyncReportPage.PageContext {
    struct FileRow { var path: String; var size: String; var xxh128: String }
}

extension SyncReportPage {
    /// Each camera file and collected microphone file, by path; its xxh128 the manifest's own (camera `files[]`, the
    /// microphone's entry), else `xxh128[path]`, else "-".
    static func fileRows(_ manifest: TakeManifest, xxh128: [String: String]) -> [PageContext.FileRow] {
        var files = manifest.cameras.flatMap { camera in camera.files.map { file in (file.path, file.bytes, file.xxh128) } }
        files += (manifest.audio ?? []).compactMap { a in a.bytes.map { (a.path, $0, a.xxh128 ?? "") } }
        return files.sorted { $0.0 < $1.0 }.map { path, bytes, hash in
            .init(path: path, size: byteCount(bytes), xxh128: !hash.isEmpty ? hash : xxh128[path] ?? "-")
        }
    }

    /// Bytes as a person reads them: exact below 1 kB, else three figures and a unit.
    static func byteCount(_ bytes: UInt64) -> String {
        let units = ["kB", "MB", "GB", "TB"]
        guard bytes >= 1000 else { return "\(bytes) B" }
        var value = Double(bytes) / 1000, unit = 0
        while value >= 1000, unit < units.count - 1 { value /= 1000; unit += 1 }
        return (value >= 100 ? String(format: "%.0f", value) : value >= 10 ? String(format: "%.1f", value) : String(format: "%.2f", value)) + " " + units[unit]
    }
}
