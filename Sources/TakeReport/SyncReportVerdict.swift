import CoordCore
import Foundation

// The page's verdict: the take's problems, one clause each, and the sentence at the top that names them.
extension SyncReportPage {
    /// The take's problems, one clause each (empty when there are none).
    static func problems(manifest: TakeManifest, report: SyncReport, traces: [CameraTrace]) -> [String] {
        // Files first (the operator can act on them: `coord collect`), then what the rig did, then drops.
        var files: [String] = [], short: [String] = [], disabled: [String] = []
        // Collection's own account of a file that did not arrive intact starts with its path.
        let fileEvents = manifest.events.filter { $0.kind == .fileDamaged || $0.kind == .fileMissing }
        var explained = Set<Int>()
        func missing(_ path: String) -> String {
            guard let i = fileEvents.firstIndex(where: { $0.detail.hasPrefix(path) }) else { return "\(path) is missing" }
            explained.insert(i)
            var detail = fileEvents[i].detail.trimmingCharacters(in: .whitespacesAndNewlines)
            while detail.hasSuffix(".") { detail.removeLast() }
            return detail
        }
        for (t, cam) in zip(traces, manifest.cameras) {
            if t.rowCount == nil {
                files.append(missing("\(t.key).frames.csv"))
            } else if let n = t.rowCount, Int64(n) != manifest.groups {
                short.append("\(t.key).frames.csv holds \(n) rows for \(manifest.groups) groups")
            }
            if !cam.files.contains(where: { $0.path.hasSuffix(".mkv") }) {
                files.append(missing("\(t.key).mkv"))
            }
            if cam.disabled == true { disabled.append("\(t.key) was disabled by \(cam.disabler)") }
        }
        func clause(_ e: TakeManifest.Event) -> String {
            let who = [e.node, e.camera].filter { !$0.isEmpty }.joined(separator: "/")
            var detail = e.detail.trimmingCharacters(in: .whitespacesAndNewlines)
            while detail.hasSuffix(".") { detail.removeLast() }
            return "\(who.isEmpty ? "" : who + " ")\(e.kind): \(detail)"
        }
        for (i, e) in fileEvents.enumerated() where !explained.contains(i) {
            files.append(clause(e))
        }
        let serious: Set<String> = ["collect-failed", "node-failed", "node-unfinished", "pressure-shutdown",
                                    "camera-ended", "camera-error", "stop-undelivered", "take-aborted", "staging-lost", "write-failed"]
        let happenings = manifest.events.filter { serious.contains($0.kind.rawValue) }.map(clause)
        var drops: [String] = []
        let dropped = report.cameras.filter { $0.dropped > 0 }
        if !dropped.isEmpty {
            let total = dropped.map(\.dropped).reduce(0, +)
            let named = dropped.prefix(4).map { "\($0.node)/\($0.camera) \($0.dropped)" } + (dropped.count > 4 ? ["…"] : [])
            drops.append("\(total) frame\(total == 1 ? "" : "s") dropped (" + named.joined(separator: ", ") + ")")
        }
        // Many held or filled frames: complete, yet not the take the operator expects.
        let repeats = report.repeatsNote.map { [$0] } ?? []
        return files + short + happenings + disabled + repeats + drops
    }

    static func sentence(status: TakeManifest.Status, problems: [String], groups: Int64) -> String {
        if problems.isEmpty {
            return status == .complete ? "Complete: every camera delivered all \(groups) groups and no frame was dropped."
                : "Partial: the manifest marks this take partial; see the events below."
        }
        let shown = problems.prefix(4)
        var text = (status == .partial ? "Partial take: " : "Complete, but: ") + shown.joined(separator: "; ")
        if problems.count > shown.count { text += "; and \(problems.count - shown.count) more (see the events below)" }
        return text + "."
    }
}
