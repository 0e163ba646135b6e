import CoordCore
import Foundation

/// The short table printed at the end of every take (and by `coord report`).
public enum TakeSummary {
    public static func text(directory: String, manifest: TakeManifest, report: SyncReport) -> String {
        var lines: [String] = []
        lines.append("take \(manifest.takeID): \(manifest.status.rawValue), \(manifest.groups) groups × \(manifest.cameras.count) camera(s)"
                     + (report.repeatsNote.map { "; \($0)" } ?? ""))
        lines.append("  \(directory)")
        if let timecode = manifest.timecode { lines.append("  timecode \(timecode) at group 0 · started \(manifest.startWallclock)") }
        if let collection = manifest.collection {
            switch collection.state {
            case .pending: lines.append("  not collected yet: coord collect --rig RIG.yaml \(directory)")
            case .incomplete: lines.append("  collection incomplete: \(collection.missing.count) file(s) missing or damaged; coord collect fetches what it can")
            case .complete: break
            }
            for m in collection.missing { lines.append("  missing \(m.path): \(m.reason)") }
        }
        let header = ["node", "camera", "frames", "dup", "phase p50/p99/max µs", "clock ± µs", "centre ± µs"]
        var table = [header]
        for c in report.cameras {
            let p = c.phaseErrorMicroseconds
            table.append([c.node, c.camera, "\(c.frames)", "\(c.dropped)", "\(p.p50)/\(p.p99)/\(p.max)",
                          String(format: "%.1f", c.clockUncertaintyMicroseconds),
                          c.centerUncertaintyMicroseconds.map { String(format: "%.1f", $0) } ?? "-"])
        }
        let widths = (0..<header.count).map { col in table.map { $0[col].count }.max()! }
        for row in table {
            lines.append("  " + row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "  "))
        }
        let s = report.spreadMicroseconds
        lines.append("  frame-centre spread across cameras (node estimates): p50 \(s.p50) µs, p99 \(s.p99) µs, max \(s.max) µs over \(report.groupsMeasured) groups")
        if let b = report.spreadBoundMicroseconds {
            lines.append("  allowing two sigma of each camera's clock and centre error: p50 \(b.p50) µs, p99 \(b.p99) µs, max \(b.max) µs")
        }
        // A triggered camera's output and its pulses' timing (CONTRACT §17).
        for c in manifest.cameras { if let t = c.trigger { lines.append("  " + t.reportLine(node: c.node, camera: c.camera)) } }
        if let note = report.clockNote { lines.append("  note: \(note)") }
        let unsaid: Set<TakeEvent.Kind> = [.start, .stop, .fileDamaged, .fileMissing]
        for e in manifest.events where !unsaid.contains(e.kind) {
            lines.append("  event: \([e.node, e.camera].filter { !$0.isEmpty }.joined(separator: "/")) \(e.kind): \(e.detail)")
        }
        return lines.joined(separator: "\n")
    }
}
