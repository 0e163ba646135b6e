import CoordCore
import Foundation
import TakeReport

extension SyncReportPage {
    /// The page for the take in `directory`, its rows read from each manifest camera's frames.csv.
    public static func html(takeDirectory directory: URL, manifest: TakeManifest, report: SyncReport) -> String {
        html(manifest: manifest, report: report, rows: TakeDirectoryWriter(directory: directory).framesRows(manifest))
    }
}
