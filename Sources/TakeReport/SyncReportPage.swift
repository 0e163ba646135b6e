import CoordCore
import Foundation
import Mustache

// MARK: - The page

/// sync-report.html: one self-contained page (inline CSS and SVG, nothing loaded from anywhere) that an
/// operator reads top down: the verdict, then the plots of the take, then the tables.
public enum SyncReportPage {
    /// Series colours, distinguishable for up to 16 cameras (they repeat beyond).
    static let palette = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#e377c2", "#8c564b",
        "#bcbd22", "#393b79", "#637939", "#843c39", "#7b4173", "#00a087", "#636363", "#fb9a99",
    ]
    /// At most this many buckets per series: a long take's page stays a few hundred kilobytes.
    static let maxBuckets = 1000

    static func color(_ index: Int) -> String { palette[index % palette.count] }

    static func kindColor(_ kind: String) -> String {
        switch kind {
        case "start": return "#2e7d32"
        case "stop", "operator-stop": return "#424242"
        case "pressure": return "#f0b400"
        case "pressure-shutdown": return "#b71c1c"
        case "camera-slowed": return "#ef6c00"
        case "camera-disabled": return "#c2185b"
        case "camera-ended", "camera-error": return "#6a1b9a"
        case "collect-failed", "node-failed", "node-unfinished": return "#000000"
        case "file-damaged", "file-missing": return "#880e4f"
        case "incomplete": return "#795548"
        case "fit": return "#00838f"
        default: return "#757575"
        }
    }

    /// Summary events written at t0 that restate what the lanes already show.
    static let summaryKinds: Set<String> = ["dup", "held"]

    /// One camera's frames as the plots need them.
    struct CameraTrace {
        var node: String
        var camera: String
        var color: String
        /// nil: the frames.csv is missing.
        var rowCount: Int?
        /// (group, center_us − grid instant) of every non-dup row.
        var errors: [(x: Double, y: Double)]
        /// Dup rows the camera filled on purpose (a frame-rate cap or slow-down) and those it failed to deliver.
        var heldGroups: [Int64]
        var droppedGroups: [Int64]
        var key: String { "\(node)/\(camera)" }
    }

    /// The manifest's cameras in order, with their rows split into errors, held and dropped dup groups.
    static func traces(manifest: TakeManifest, rows: [String: [FrameRow]]) -> [CameraTrace] {
        let period = max(manifest.framePeriodMicroseconds, 1)
        let t0 = manifest.t0Microseconds
        return manifest.cameras.enumerated().map { index, cam in
            let key = "\(cam.node)/\(cam.camera)"
            var trace = CameraTrace(node: cam.node, camera: cam.camera, color: color(index), rowCount: rows[key]?.count,
                                    errors: [], heldGroups: [], droppedGroups: [])
            guard let list = rows[key] else { return trace }
            trace.errors.reserveCapacity(list.count)
            var dups: [Int64] = []
            for r in list {
                if r.isDup { dups.append(r.group); continue }
                trace.errors.append((Double(r.group), Double(r.centerMicroseconds) - (Double(t0) + Double(r.group) * Double(period))))
            }
            let held = cam.held ?? 0
            if held <= 0 {
                trace.droppedGroups = dups
            } else if held >= Int64(dups.count) {
                trace.heldGroups = dups
            } else {
                // Some of each: a cap holds the groups off its stride, a slow-down those after it took effect.
                let every = Int64(max(cam.recordEvery ?? 1, 1))
                let slowedFrom = manifest.events
                    .filter { $0.kind == .cameraSlowed && $0.node == cam.node && $0.camera == cam.camera }
                    .map { (Double($0.tMicroseconds) - Double(t0)) / Double(period) }.min()
                for g in dups {
                    if (every > 1 && g % every != 0) || (slowedFrom.map { Double(g) >= $0 } ?? false) {
                        trace.heldGroups.append(g)
                    } else {
                        trace.droppedGroups.append(g)
                    }
                }
            }
            return trace
        }
    }

    /// Per group, the largest minus the smallest non-dup `center_us` across cameras (sync-report.json's
    /// spread_us), for the groups where at least two cameras delivered a frame; in group order.
    static func spreadPerGroup(_ rows: [[FrameRow]]) -> [(group: Int64, spread: Int64)] {
        var first = Int64.max, last = Int64.min
        for list in rows { for r in list { first = min(first, r.group); last = max(last, r.group) } }
        guard first <= last else { return [] }
        // Groups are dense in a take: arrays indexed by group are far quicker than a dictionary for millions of rows.
        let (diff, overflow) = last.subtractingReportingOverflow(first)
        guard !overflow, diff < 50_000_000 else { return spreadPerGroupSparse(rows) }
        let slots = Int(diff) + 1
        var low = [Int64](repeating: .max, count: slots), high = [Int64](repeating: .min, count: slots)
        var count = [Int32](repeating: 0, count: slots)
        for list in rows {
            for r in list where !r.isDup {
                let i = Int(r.group - first)
                low[i] = min(low[i], r.centerMicroseconds)
                high[i] = max(high[i], r.centerMicroseconds)
                count[i] += 1
            }
        }
        return (0..<slots).compactMap { count[$0] >= 2 ? (first + Int64($0), high[$0] &- low[$0]) : nil }
    }

    static func spreadPerGroupSparse(_ rows: [[FrameRow]]) -> [(group: Int64, spread: Int64)] {
        var byGroup: [Int64: (low: Int64, high: Int64, count: Int)] = [:]
        for list in rows {
            for r in list where !r.isDup {
                let g = byGroup[r.group] ?? (.max, .min, 0)
                byGroup[r.group] = (min(g.low, r.centerMicroseconds), max(g.high, r.centerMicroseconds), g.count + 1)
            }
        }
        return byGroup.filter { $0.value.count >= 2 }.keys.sorted().map { ($0, byGroup[$0]!.high &- byGroup[$0]!.low) }
    }

    /// Groups run 0 …< groups; the x axis covers at least one group so an empty take still draws.
    static func groupAxis(_ manifest: TakeManifest, traces: [CameraTrace]) -> SVGPlot.Axis {
        let lastRow = traces.flatMap { [$0.errors.last?.x ?? 0, Double($0.heldGroups.max() ?? 0), Double($0.droppedGroups.max() ?? 0)] }.max() ?? 0
        let high = max(Double(manifest.groups), lastRow + 1, 1)
        let unit = timeStyle(reach: high * Double(max(manifest.framePeriodMicroseconds, 1)) / 1e6).unit
        return .exact(0, high, count: 8, label: "group (frame period \(SVGPlot.number(Double(manifest.framePeriodMicroseconds) / 1000)) ms); below: time since t0 (\(unit))")
    }

    // MARK: plots

    /// The left and right margins of the plots over groups (a, b, d), the same for all three so a group sits
    /// at one x in each: room for the lanes' camera names on the left and their counts on the right.
    static func groupMargins(_ traces: [CameraTrace]) -> (left: Double, right: Double) {
        let longest = traces.map(\.key.count).max() ?? 6
        return (min(220, max(76, Double(longest) * SVGPlot.characterWidth + 34)), 150)
    }

    /// a. Each camera's frame-centre error against the grid, per group; dup rows in a strip under it.
    static func errorPlot(_ manifest: TakeManifest, traces: [CameraTrace]) -> SVGPlot {
        let values = traces.flatMap { $0.errors.map(\.y) }
        let withDups = traces.filter { !$0.heldGroups.isEmpty || !$0.droppedGroups.isEmpty }
        let rowHeight = 4.0
        var legend = traces.map { SVGPlot.LegendEntry(name: $0.key, color: $0.color) }
        if !withDups.isEmpty { legend.append(.init(name: "dup rows (not in the lines): strip below, lighter = held", color: "#777", style: .box)) }
        let margins = groupMargins(traces)
        var plot = SVGPlot(title: "Frame-centre error per camera", x: groupAxis(manifest, traces: traces),
                           y: .nice(min(values.min() ?? -1, 0), max(values.max() ?? 1, 0), label: "centre − grid (µs)"),
                           legend: legend, plotHeight: 260, left: margins.left, right: margins.right,
                           bottomStrip: withDups.isEmpty ? 0 : Double(withDups.count) * rowHeight + 4)
        plot.xSecondaryLabel = secondsLabel(manifest, plot.x)
        if values.isEmpty { plot.emptyNote("no frames to plot") }
        // A camera's line is broken where it has no measurement for more than 1% of the take (at least 2 groups):
        // a stretch no frame measured is a gap, not a straight line; a shorter one (a dup or two, a node throttled
        // to one group in two) is a pixel or two, drawn through, its dup rows marked in the strip below.
        let maxGap = max(2, Double(manifest.groups) / 100)
        for t in traces {
            for run in SVGPlot.gappedRuns(t.errors, over: plot.x.low...plot.x.high, buckets: maxBuckets, maxGap: maxGap) {
                plot.line(run, color: t.color)
            }
        }
        // Dup rows: one thin row per camera that has any, in the strip under the data box.
        for (i, t) in withDups.enumerated() {
            let top = plot.plotBottom + 2 + Double(i) * rowHeight
            plot.ticks(at: t.heldGroups.map(Double.init), top: top, bottom: top + rowHeight - 1, color: t.color, opacity: 0.35,
                       tickWidth: tickWidth(plot))
            plot.ticks(at: t.droppedGroups.map(Double.init), top: top, bottom: top + rowHeight - 1, color: t.color,
                       tickWidth: tickWidth(plot))
        }
        if !withDups.isEmpty {
            plot.add("<text x=\"\(SVGPlot.f(plot.plotLeft - 6))\" y=\"\(SVGPlot.f(plot.plotBottom + plot.bottomStrip / 2 + 4))\" text-anchor=\"end\" fill=\"#555\" font-size=\"11\">dups</text>")
        }
        return plot
    }

    /// b. The spread of the frame centres across cameras per group, with the report's p50 and p99.
    static func spreadPlot(_ manifest: TakeManifest, report: SyncReport, traces: [CameraTrace],
                           spreads: [(group: Int64, spread: Int64)]) -> SVGPlot {
        let s = report.spreadMicroseconds
        let top = max(Double(spreads.map(\.spread).max() ?? 0), Double(s.p99), Double(s.p50), 1)
        let margins = groupMargins(traces)
        var plot = SVGPlot(title: "Spread per group", x: groupAxis(manifest, traces: traces),
                           y: .nice(0, top * 1.05, label: "spread (µs)"),
                           legend: [.init(name: "spread: max − min centre across cameras (dup rows left out; gaps: no group measured)", color: "#1f3b73"),
                                    .init(name: "p50 (report)", color: "#2e7d32", style: .dashed),
                                    .init(name: "p99 (report)", color: "#c62828", style: .dashed)],
                           plotHeight: 220, left: margins.left, right: margins.right)
        plot.xSecondaryLabel = secondsLabel(manifest, plot.x)
        if spreads.isEmpty { plot.emptyNote("no group has frames from two cameras") }
        // Consecutive measured groups only are joined: no line crosses groups without frames from two cameras (a rig
        // throttled to one group in two is a row of dots, a stretch no set measured is a gap).
        plot.gappedSeries(spreads.map { (Double($0.group), Double($0.spread)) }, color: "#1f3b73", cssClass: "series",
                          buckets: maxBuckets, maxGap: 1)
        // Labels in the right margin; two close rules push theirs apart.
        let gap = plot.py(Double(s.p50)) - plot.py(Double(s.p99))
        let push = max(0, (15 - gap) / 2)
        plot.rule(at: Double(s.p99), color: "#c62828", label: "p99 \(s.p99) µs", labelShift: -push, cssClass: "p99")
        plot.rule(at: Double(s.p50), color: "#2e7d32", label: "p50 \(s.p50) µs", labelShift: push, cssClass: "p50")
        return plot
    }

    /// c. Each node's clock uncertainty through the take (bound lighter), or one bar per camera without a track.
    static func clockPlot(_ manifest: TakeManifest, traces: [CameraTrace]) -> SVGPlot {
        let track = manifest.clockTrack ?? []
        var nodes: [String] = []
        for c in manifest.cameras where !nodes.contains(c.node) { nodes.append(c.node) }
        for p in track where !nodes.contains(p.node) { nodes.append(p.node) }
        func nodeColor(_ node: String) -> String {
            // A node takes its first camera's colour, so a rig with one camera per node reads alike everywhere.
            traces.first { $0.node == node }?.color ?? color(manifest.cameras.count + (nodes.firstIndex(of: node) ?? 0))
        }
        let period = Double(max(manifest.framePeriodMicroseconds, 1))
        let end = Double(manifest.groups) * period / 1e6
        if !track.isEmpty {
            let xs = track.map { (Double($0.tMicroseconds) - Double(manifest.t0Microseconds)) / 1e6 }
            let top = track.map { max($0.uncertaintyMicroseconds, $0.boundMicroseconds) }.max() ?? 1
            let smallest = track.map(\.uncertaintyMicroseconds).filter { $0 > 0 }.min() ?? top
            // A bound tens of times the uncertainty would flatten the uncertainty onto the axis: use a log scale.
            let logScale = top / max(smallest, 0.01) > 8
            let legend = nodes.filter { n in track.contains { $0.node == n } }.map { SVGPlot.LegendEntry(name: $0, color: nodeColor($0)) }
            let (low, high) = (min(xs.min() ?? 0, 0), max(xs.max() ?? 0, end, 0.001))
            let style = timeStyle(reach: max(abs(low), abs(high)))
            var plot = SVGPlot(title: "Clock uncertainty per node",
                               x: .time(low, high, label: "time since t0 (\(style.unit)); each estimate holds until the next"),
                               y: logScale ? .logarithmic(max(smallest * 0.8, 0.1), top * 1.2, label: "clock error (µs, log)")
                                   : .nice(0, max(top, 1) * 1.08, label: "clock error (µs)"),
                               legend: legend, plotHeight: 200)
            // One style along the axis: m:ss (or h:mm:ss) throughout once it reaches ten minutes or more.
            plot.xTickLabel = style.text
            for (at, name) in [(0.0, "start"), (end, "stop")] where at > plot.x.low && at <= plot.x.high {
                let x = SVGPlot.f(plot.px(at))
                plot.add("<line x1=\"\(x)\" x2=\"\(x)\" y1=\"\(SVGPlot.f(plot.plotTop))\" y2=\"\(SVGPlot.f(plot.plotBottom))\" stroke=\"#777\" stroke-dasharray=\"2 3\"/>")
                plot.add("<text x=\"\(x)\" y=\"\(SVGPlot.f(plot.plotTop + 12))\" dx=\"\(name == "stop" ? -4 : 4)\" text-anchor=\"\(name == "stop" ? "end" : "start")\" fill=\"#555\" class=\"halo\">\(name)</text>")
            }
            for n in nodes {
                let points = track.filter { $0.node == n }.sorted { $0.tMicroseconds < $1.tMicroseconds }
                guard !points.isEmpty else { continue }
                let at = points.map { (Double($0.tMicroseconds) - Double(manifest.t0Microseconds)) / 1e6 }
                let bound = zip(at, points).map { ($0, $1.boundMicroseconds) }
                let uncertainty = zip(at, points).map { ($0, $1.uncertaintyMicroseconds) }
                if points.count <= maxBuckets / 2 {
                    plot.step(bound, until: plot.x.high, color: nodeColor(n), width: 2, dash: "6 4", opacity: 0.5)
                    plot.step(uncertainty, until: plot.x.high, color: nodeColor(n), width: 2.5)
                } else {
                    // Estimates every second of a long take: each slice's min–max keeps the page small.
                    plot.envelope(bound, color: nodeColor(n), buckets: maxBuckets / 2, width: 2, dash: "6 4", opacity: 0.5)
                    plot.envelope(uncertainty, color: nodeColor(n), buckets: maxBuckets / 2, width: 2.5)
                }
            }
            return plot
        }
        // No track (an older take): the take's figure per camera.
        let bounds = manifest.cameras.map { $0.clock.boundMicroseconds ?? 0 }
        let top = max(manifest.cameras.map(\.clock.uncertaintyMicroseconds).max() ?? 0, bounds.max() ?? 0, 1)
        let n = manifest.cameras.count
        var legend: [SVGPlot.LegendEntry] = [.init(name: "uncertainty (1σ) through the take", color: "#555", style: .box)]
        if bounds.contains(where: { $0 > 0 }) { legend.append(.init(name: "bound (lighter)", color: "#bbb", style: .box)) }
        var plot = SVGPlot(title: "Clock uncertainty per camera (no clock track in this take)",
                           x: SVGPlot.Axis(low: -0.5, high: Double(max(n, 1)) - 0.5, ticks: (0..<n).map(Double.init), label: "camera"),
                           y: .nice(0, top * 1.08, label: "clock error (µs)"), legend: legend, plotHeight: 180)
        let slot = (plot.plotRight - plot.plotLeft) / Double(max(n, 1))
        let chars = max(3, Int(slot / SVGPlot.characterWidth) - 1)
        func clip(_ s: String) -> String { s.count <= chars ? s : String(s.prefix(chars - 1)) + "…" }
        plot.xTickLabel = { i in manifest.cameras.indices.contains(Int(i)) ? clip(manifest.cameras[Int(i)].camera) : "" }
        plot.xSecondaryLabel = { i in manifest.cameras.indices.contains(Int(i)) ? clip(manifest.cameras[Int(i)].node) : "" }
        if n == 0 { plot.emptyNote("no cameras") }
        for (i, c) in manifest.cameras.enumerated() {
            let w = min(60, slot * 0.6)
            let x = plot.px(Double(i)) - w / 2
            let col = i < traces.count ? traces[i].color : color(i)
            if let b = c.clock.boundMicroseconds, b > 0 {
                plot.add("<rect x=\"\(SVGPlot.f(x))\" y=\"\(SVGPlot.f(plot.py(b)))\" width=\"\(SVGPlot.f(w))\" height=\"\(SVGPlot.f(plot.plotBottom - plot.py(b)))\" fill=\"\(col)\" fill-opacity=\"0.3\"/>")
            }
            let u = c.clock.uncertaintyMicroseconds
            plot.add("<rect x=\"\(SVGPlot.f(x))\" y=\"\(SVGPlot.f(plot.py(u)))\" width=\"\(SVGPlot.f(w))\" height=\"\(SVGPlot.f(plot.plotBottom - plot.py(u)))\" fill=\"\(col)\"/>")
            plot.add("<text x=\"\(SVGPlot.f(x + w / 2))\" y=\"\(SVGPlot.f(plot.py(u) - 4))\" text-anchor=\"middle\" fill=\"#222\">±\(fixed(u))</text>")
        }
        return plot
    }

    /// d. One lane per camera with its dup rows, and the take's events as markers.
    static func timelinePlot(_ manifest: TakeManifest, traces: [CameraTrace], numbered: [(number: Int, event: TakeManifest.Event)]) -> SVGPlot {
        let lanes = max(traces.count, 1)
        let laneHeight = 22.0
        let (left, right) = groupMargins(traces)
        var kinds: [String] = []
        for (_, e) in numbered where !kinds.contains(e.kind.rawValue) { kinds.append(e.kind.rawValue) }
        var legend: [SVGPlot.LegendEntry] = [
            .init(name: "dropped (not delivered)", color: "#333", style: .box),
            .init(name: "held on purpose (lighter)", color: "#33333355", style: .box),
        ]
        legend += kinds.map { SVGPlot.LegendEntry(name: $0, color: kindColor($0), style: .marker) }
        let markerStrip = 18.0
        var plot = SVGPlot(title: "Drops and events", x: groupAxis(manifest, traces: traces),
                           y: SVGPlot.Axis(low: 0, high: Double(lanes), ticks: [], label: ""),
                           legend: legend, plotHeight: Double(lanes) * laneHeight + markerStrip, left: left, right: right)
        plot.showYAxis = false
        plot.xSecondaryLabel = secondsLabel(manifest, plot.x)
        let laneTop = plot.plotTop + markerStrip
        let width = tickWidth(plot)
        for (i, t) in traces.enumerated() {
            let top = laneTop + Double(i) * laneHeight, bottom = top + laneHeight
            if i % 2 == 1 {
                plot.add("<rect x=\"\(SVGPlot.f(plot.plotLeft))\" y=\"\(SVGPlot.f(top))\" width=\"\(SVGPlot.f(plot.plotRight - plot.plotLeft))\" height=\"\(SVGPlot.f(laneHeight))\" fill=\"#f6f6f6\"/>")
            }
            plot.add("<rect x=\"\(SVGPlot.f(plot.plotLeft - left + 8))\" y=\"\(SVGPlot.f(top + 6))\" width=\"10\" height=\"10\" fill=\"\(t.color)\"/>")
            plot.add("<text x=\"\(SVGPlot.f(plot.plotLeft - left + 24))\" y=\"\(SVGPlot.f(top + 15))\" fill=\"#222\">\(htmlEscape(clipped(t.key, Int((left - 30) / SVGPlot.characterWidth))))</text>")
            plot.ticks(at: t.heldGroups.map(Double.init), top: top + 7, bottom: bottom - 7, color: t.color, opacity: 0.35, tickWidth: width)
            plot.ticks(at: t.droppedGroups.map(Double.init), top: top + 3, bottom: bottom - 3, color: t.color, tickWidth: width)
            let cam = manifest.cameras.first { $0.node == t.node && $0.camera == t.camera }
            let counts = t.rowCount == nil ? "no frames.csv"
                : "\(cam?.dropped ?? Int64(t.droppedGroups.count)) dropped · \(cam?.held ?? Int64(t.heldGroups.count)) held"
            plot.add("<text x=\"\(SVGPlot.f(plot.plotRight + 8))\" y=\"\(SVGPlot.f(top + 15))\" fill=\"\(t.rowCount == nil ? "#b71c1c" : "#333")\">\(htmlEscape(counts))</text>")
        }
        if traces.isEmpty { plot.emptyNote("no cameras") }
        // Events: a marker in the strip above the lanes and a line down the lanes the event concerns.
        let period = Double(max(manifest.framePeriodMicroseconds, 1))
        var lastNumberX = -Double.infinity
        for (number, e) in numbered {
            let g = (Double(e.tMicroseconds) - Double(manifest.t0Microseconds)) / period
            let x = min(plot.plotRight, max(plot.plotLeft, plot.px(g)))
            let laneIndices = traces.indices.filter { i in
                e.node.isEmpty || (traces[i].node == e.node && (e.camera.isEmpty || traces[i].camera == e.camera))
            }
            let c = kindColor(e.kind.rawValue)
            let tip = "#\(number) \(seconds(g * period / 1e6)) \([e.node, e.camera].filter { !$0.isEmpty }.joined(separator: "/")) \(e.kind): \(e.detail)"
            var s = "<g><title>\(htmlEscape(tip))</title>"
            if let first = laneIndices.first, let last = laneIndices.last {
                s += "<line x1=\"\(SVGPlot.f(x))\" x2=\"\(SVGPlot.f(x))\" y1=\"\(SVGPlot.f(laneTop + Double(first) * laneHeight))\" y2=\"\(SVGPlot.f(laneTop + Double(last + 1) * laneHeight))\" stroke=\"\(c)\" stroke-width=\"2\" stroke-dasharray=\"3 2\"/>"
            }
            s += "<path d=\"M\(SVGPlot.f(x - 6)) \(SVGPlot.f(plot.plotTop + 2))h12l-6 10z\" fill=\"\(c)\" stroke=\"#fff\" stroke-width=\"0.5\"/>"
            if x - lastNumberX >= 22 {
                s += "<text x=\"\(SVGPlot.f(x + 7))\" y=\"\(SVGPlot.f(plot.plotTop + 11))\" font-size=\"10\" fill=\"#333\">\(number)</text>"
                lastNumberX = x
            }
            plot.add(s + "</g>")
        }
        return plot
    }

    /// A tick is one group wide where groups are wide, never thinner than 1.5 px.
    static func tickWidth(_ plot: SVGPlot) -> Double {
        let perGroup = (plot.plotRight - plot.plotLeft) / max(plot.x.high - plot.x.low, 1)
        return max(1.5, min(8, perGroup * 0.7))
    }

    /// The time since t0 of each group on `axis`, written one way along all of it (`timeStyle`).
    static func secondsLabel(_ manifest: TakeManifest, _ axis: SVGPlot.Axis) -> (Double) -> String {
        let period = Double(max(manifest.framePeriodMicroseconds, 1))
        let text = timeStyle(reach: max(abs(axis.low), abs(axis.high)) * period / 1e6).text
        return { g in text(g * period / 1e6) }
    }

    static func clipped(_ s: String, _ chars: Int) -> String {
        s.count <= max(chars, 4) ? s : String(s.prefix(max(chars, 4) - 1)) + "…"
    }

    // MARK: html

    /// The page's figures as the template shows them: every value already text, so the template holds no logic
    /// beyond presence and repetition. Row fields are never optional: a missing one would be looked up in the
    /// enclosing context instead (Mustache climbs the stack).
    struct PageContext {
        struct Figures { var p50: String; var p99: String; var max: String }
        struct EventRow { var number: String; var seconds: String; var node: String; var camera: String; var color: String
            var kind: String; var detail: String }
        struct CameraRow { var rowClass: String; var color: String; var node: String; var camera: String; var frames: String
            var dropped: String; var held: String; var phaseP50: String; var phaseP99: String; var phaseMax: String
            var clock: String; var centre: String; var state: String }
        struct BudgetRow { var isNote: Bool; var rowClass: String; var node: String; var resource: String; var demand: String
            var capacity: String; var cost: String; var note: String }
        /// `cost` is the rig's figure, or "not calibrated" (`counted` false) when no node had a calibration to count it
        /// by; `uncounted` names the nodes without one.
        struct BudgetSection { var cost: String; var counted: Bool; var longestTake: String?; var uncounted: String?
            var rows: [BudgetRow]; var hasChanges: Bool; var changes: [String] }
        struct MicRow { var node: String; var mic: String; var seconds: String; var p50: String; var p99: String; var rate: String
            var path: String; var state: String }
        struct SoundSection { var soundPlot: String; var mics: [MicRow] }

        var takeID: String
        var status: String
        var tone: String
        var verdict: String
        var spread: Figures
        var bound: Figures?
        var groups: String
        var takeLength: String
        var cameraCount: String
        var onNodes: String
        var groupsMeasured: String
        var framePeriodMilliseconds: String
        var startWallclock: String
        var hasClockTrack: Bool
        /// When clock updates stopped before the end: the bound was widened (sync-report.json's clock_note).
        var clockNote: String?
        var errorPlot: String
        var spreadPlot: String
        var clockPlot: String
        var timelinePlot: String
        var events: [EventRow]
        var cameras: [CameraRow]
        var hasState: Bool
        var timecode: String?
        var files: [FileRow]
        var hasXXH128: Bool
        var budget: BudgetSection?
        var sound: SoundSection?
    }

    /// The template's context for a take: the verdict, figures, the four plots' SVG and the tables' rows.
    static func context(manifest: TakeManifest, report: SyncReport, rows: [String: [FrameRow]], xxh128: [String: String] = [:]) -> PageContext {
        let traces = traces(manifest: manifest, rows: rows)
        let spreads = spreadPerGroup(manifest.cameras.compactMap { rows["\($0.node)/\($0.camera)"] })
        let numbered = manifest.events.filter { !summaryKinds.contains($0.kind.rawValue) }.enumerated().map { ($0.offset + 1, $0.element) }
        let problems = problems(manifest: manifest, report: report, traces: traces)
        let period = Double(max(manifest.framePeriodMicroseconds, 1))
        let partial = manifest.status == .partial
        let nodes = Set(manifest.cameras.map(\.node)).count
        func figures(_ p: Percentiles) -> PageContext.Figures { .init(p50: String(p.p50), p99: String(p.p99), max: String(p.max)) }

        var number = 0
        let events = manifest.events.map { e -> PageContext.EventRow in
            let isSummary = summaryKinds.contains(e.kind.rawValue)
            if !isSummary { number += 1 }
            let t = (Double(e.tMicroseconds) - Double(manifest.t0Microseconds)) / 1e6
            return .init(number: isSummary ? "" : String(number), seconds: String(format: "%.3f", t), node: e.node, camera: e.camera,
                         color: kindColor(e.kind.rawValue), kind: e.kind.rawValue, detail: e.detail)
        }

        let cameras = zip(traces, manifest.cameras).map { (t, cam) -> PageContext.CameraRow in
            let r = report.cameras.first { $0.node == cam.node && $0.camera == cam.camera }
            let p = r?.phaseErrorMicroseconds
            var state: [String] = []
            if t.rowCount == nil { state.append("frames.csv missing") }
            if cam.disabled == true { state.append("disabled") }
            if let every = cam.recordEvery, every > 1 { state.append("records 1 group in \(every)") }
            return .init(rowClass: cam.disabled == true ? "off" : "", color: t.color, node: cam.node, camera: cam.camera,
                         frames: String(r?.frames ?? cam.frames), dropped: String(r?.dropped ?? cam.dropped),
                         held: String(r?.held ?? cam.held ?? 0),
                         phaseP50: p.map { String($0.p50) } ?? "-", phaseP99: p.map { String($0.p99) } ?? "-",
                         phaseMax: p.map { String($0.max) } ?? "-",
                         clock: fixed(r?.clockUncertaintyMicroseconds ?? cam.clock.uncertaintyMicroseconds),
                         centre: (r?.centerUncertaintyMicroseconds ?? cam.centerUncertaintyMicroseconds).map { fixed($0) } ?? "-",
                         state: state.joined(separator: ", "))
        }

        let files = fileRows(manifest, xxh128: xxh128)
        return PageContext(
            takeID: manifest.takeID, status: manifest.status.rawValue,
            tone: partial ? "bad" : problems.isEmpty ? "good" : "warn",
            verdict: sentence(status: manifest.status, problems: problems, groups: manifest.groups),
            spread: figures(report.spreadMicroseconds), bound: report.spreadBoundMicroseconds.map(figures),
            groups: String(manifest.groups), takeLength: duration(Double(manifest.groups) * period / 1e6),
            cameraCount: String(manifest.cameras.count), onNodes: "on \(nodes) node\(nodes == 1 ? "" : "s")",
            groupsMeasured: String(report.groupsMeasured), framePeriodMilliseconds: SVGPlot.number(period / 1000),
            startWallclock: manifest.startWallclock, hasClockTrack: !(manifest.clockTrack ?? []).isEmpty,
            clockNote: report.clockNote.map { $0.prefix(1).uppercased() + $0.dropFirst() + "." },
            errorPlot: errorPlot(manifest, traces: traces).render(cssClass: "error"),
            spreadPlot: spreadPlot(manifest, report: report, traces: traces, spreads: spreads).render(cssClass: "spread"),
            clockPlot: clockPlot(manifest, traces: traces).render(cssClass: "clock"),
            timelinePlot: timelinePlot(manifest, traces: traces, numbered: numbered).render(cssClass: "timeline"),
            events: events, cameras: cameras, hasState: cameras.contains { !$0.state.isEmpty }, timecode: manifest.timecode,
            files: files, hasXXH128: files.contains { $0.xxh128 != "-" }, budget: manifest.budget.map(budgetSection), sound: soundSection(manifest))
    }

    /// The whole page. `rows` holds each camera's frames.csv rows keyed "node/camera"; a camera whose
    /// frames.csv is missing has no entry.
    /// `xxh128` holds each file's checksum by path where the manifest's files[] carry one.
    public static func html(manifest: TakeManifest, report: SyncReport, rows: [String: [FrameRow]], xxh128: [String: String] = [:]) -> String {
        template.render(context(manifest: manifest, report: report, rows: rows, xxh128: xxh128))
    }
}
