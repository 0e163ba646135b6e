import CoordCore
import Foundation
import Platform

/// Writes manifest.json, sync-report.json and sync-report.html into a take directory and reads back the
/// collected frames tables.
struct TakeDirectoryWriter {
    let directory: URL

    func rows(csvPath: String) -> [FrameRow] {
        guard let text = try? String(contentsOf: directory.appendingPathComponent(csvPath), encoding: .utf8) else { return [] }
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
        try atomically(Data(SyncReportPage.html(manifest: manifest, report: report).utf8), "sync-report.html")
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

/// A self-contained page with the report's figures (no plots yet: they come with the report issue).
enum SyncReportPage {
    static func html(manifest: TakeManifest, report: SyncReport) -> String {
        func esc(_ s: String) -> String {
            s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        }
        var rows = ""
        for c in report.cameras {
            rows += "<tr><td>\(esc(c.node))</td><td>\(esc(c.camera))</td><td>\(c.frames)</td><td>\(c.dropped)</td>"
            rows += "<td>\(c.phaseErrorMicroseconds.p50)</td><td>\(c.phaseErrorMicroseconds.p99)</td><td>\(c.phaseErrorMicroseconds.max)</td>"
            rows += "<td>\(String(format: "%.1f", c.clockUncertaintyMicroseconds))</td></tr>\n"
        }
        var events = ""
        for e in manifest.events {
            events += "<tr><td>\(e.tMicroseconds)</td><td>\(esc(e.node))</td><td>\(esc(e.camera))</td><td>\(esc(e.kind))</td><td>\(esc(e.detail))</td></tr>\n"
        }
        var budget = ""
        if let b = manifest.budget {
            budget = "<h2>Budget</h2><p class=\"s\">Hardware cost <b>\(String(format: "%.2f", b.cost))</b>"
            if let longest = b.longestSeconds { budget += " · longest take \(Budget.duration(longest))" }
            budget += "</p>\n<table><tr><th>node</th><th>resource</th><th>demand</th><th>capacity</th><th>cost</th></tr>\n"
            for node in b.nodes {
                for load in node.loads {
                    let scale = load.unit == "pixels/s" ? ("Mpx/s", 1e6) : ("MB/s", 1e6)
                    budget += "<tr><td>\(esc(node.node))</td><td>\(esc(load.resource))</td><td>\(String(format: "%.1f", load.demand / scale.1)) \(scale.0)</td>"
                    budget += "<td>\(String(format: "%.1f", load.capacity / scale.1)) \(scale.0)</td><td>\(String(format: "%.2f", load.cost))</td></tr>\n"
                }
            }
            budget += "</table>\n"
            budget += b.changes.map { "<p>fit: \(esc($0))</p>\n" }.joined()
        }
        return """
        <!doctype html>
        <html><head><meta charset="utf-8"><title>coord sync report: \(esc(manifest.takeID))</title>
        <style>body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}
        td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}.s{font-size:18px}</style></head>
        <body><h1>Take \(esc(manifest.takeID))</h1>
        <p class="s">Status <b>\(manifest.status.rawValue)</b> · \(manifest.groups) groups · frame period \(manifest.framePeriodMicroseconds) µs ·
        started \(esc(manifest.startWallclock))</p>
        <p class="s">Frame-centre spread across cameras (node estimates, dup frames left out):
        p50 <b>\(report.spreadMicroseconds.p50) µs</b>, p99 <b>\(report.spreadMicroseconds.p99) µs</b>, max \(report.spreadMicroseconds.max) µs
        over \(report.groupsMeasured) groups\(report.spreadBoundMicroseconds.map { b in "; allowing two sigma of each camera's clock and centre error: p50 <b>\(b.p50) µs</b>, p99 <b>\(b.p99) µs</b>, max \(b.max) µs" } ?? "").</p>
        <table><tr><th>node</th><th>camera</th><th>frames</th><th>dup</th><th>phase p50 µs</th><th>phase p99 µs</th><th>phase max µs</th><th>clock ± µs</th></tr>
        \(rows)</table>
        \(budget)
        <h2>Events</h2>
        <table><tr><th>t (µs, rig)</th><th>node</th><th>camera</th><th>kind</th><th>detail</th></tr>
        \(events)</table>
        </body></html>
        """
    }
}
