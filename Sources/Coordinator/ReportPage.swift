import CoordCore
import Foundation

// MARK: - Plot geometry (pure)

/// One 2-D plot: its pixel box, data ranges, ticks and legend, and the SVG it draws. Mapping, tick choice and
/// downsampling are pure functions a test can check; the drawing methods only string SVG elements together.
struct SVGPlot {
    struct Axis {
        var low: Double
        var high: Double
        var ticks: [Double]
        var label: String

        /// An axis over exactly [low, high] with ticks of a 1-2-5 step inside it (about `count` of them).
        static func exact(_ low: Double, _ high: Double, count: Int = 8, label: String) -> Axis {
            let (lo, hi) = SVGPlot.widen(low, high)
            let step = SVGPlot.niceStep((hi - lo) / Double(max(count, 1)))
            let first = (lo / step).rounded(.up) * step
            let ticks = stride(from: first, through: hi + step * 1e-9, by: step).map { abs($0) < step * 1e-9 ? 0 : $0 }
            return Axis(low: lo, high: hi, ticks: ticks, label: label)
        }

        /// An axis over [low, high] widened out to whole ticks of a 1-2-5 step (about `count` of them).
        static func nice(_ low: Double, _ high: Double, count: Int = 5, label: String) -> Axis {
            let (lo, hi) = SVGPlot.widen(low, high)
            let step = SVGPlot.niceStep((hi - lo) / Double(max(count, 1)))
            let first = (lo / step + 1e-9).rounded(.down) * step
            let last = (hi / step - 1e-9).rounded(.up) * step
            let ticks = stride(from: first, through: last + step * 1e-9, by: step).map { abs($0) < step * 1e-9 ? 0 : $0 }
            return Axis(low: first, high: last, ticks: ticks, label: label)
        }

        /// A time axis in seconds over exactly [low, high]: decimal ticks for a short span, else whole minutes or
        /// hours (labels in m:ss read badly at 500 s steps).
        static func time(_ low: Double, _ high: Double, label: String) -> Axis {
            let (lo, hi) = SVGPlot.widen(low, high)
            guard hi - lo > 120 else { return exact(lo, hi, count: 8, label: label) }
            let steps: [Double] = [30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400]
            let step = steps.first { (hi - lo) / $0 <= 8 } ?? SVGPlot.niceStep((hi - lo) / 8)
            let first = (lo / step).rounded(.up) * step
            return Axis(low: lo, high: hi, ticks: Array(stride(from: first, through: hi, by: step)), label: label)
        }

        /// A base-10 logarithmic axis from the decade at or below `low` to the one at or above `high` (both > 0),
        /// ticked at 1, 2 and 5 of each decade (decades only when that would crowd it).
        static func logarithmic(_ low: Double, _ high: Double, label: String) -> Axis {
            let lo = max(low, 1e-6), hi = max(high, lo * 2)
            let first = (log10(lo) + 1e-9).rounded(.down), last = (log10(hi) - 1e-9).rounded(.up)
            let decades = stride(from: first, through: last, by: 1).map { pow(10, $0) }
            let marks = decades.flatMap { [$0, 2 * $0, 5 * $0] }
            // The axis runs from the 1-2-5 mark at or below `low` to the one at or above `high`.
            let bottom = marks.last { $0 <= lo * (1 + 1e-9) } ?? pow(10, first)
            let top = marks.first { $0 >= hi * (1 - 1e-9) } ?? pow(10, last)
            var ticks = marks.filter { $0 >= bottom * (1 - 1e-9) && $0 <= top * (1 + 1e-9) }
            if ticks.count > 12 { ticks = ticks.filter { decades.contains($0) } }
            var axis = Axis(low: bottom, high: top, ticks: ticks, label: label)
            axis.log = true
            return axis
        }

        var log = false
    }

    struct LegendEntry {
        enum Style { case line, dashed, box, marker }
        var name: String
        var color: String
        var style: Style = .line
    }

    /// One bucket of a downsampled series: the smallest and largest value of the points that fell in it.
    struct Bucket: Equatable {
        var x: Double
        var low: Double
        var high: Double
    }

    var width: Double = 1000
    var height: Double
    var left: Double = 76
    var right: Double = 24
    var top: Double = 12
    var bottom: Double = 52
    /// A band under the data box (above the x tick labels) for marks that are not data values, e.g. dup rows.
    var bottomStrip: Double = 0
    var x: Axis
    var y: Axis
    var legend: [LegendEntry]
    /// The plot's name for screen readers and its SVG title.
    var title: String
    var xTickLabel: (Double) -> String = { SVGPlot.number($0) }
    /// A second, grey line under each x tick label (seconds under groups).
    var xSecondaryLabel: ((Double) -> String)?
    var yTickLabel: (Double) -> String = { SVGPlot.number($0) }
    /// Drawn horizontal grid lines and y tick labels.
    var showYAxis = true
    private(set) var layers: [String] = []

    static let legendRowHeight = 18.0
    static let characterWidth = 7.0

    /// `plotHeight` is the data box's height; the legend's rows are added above it.
    init(title: String, x: Axis, y: Axis, legend: [LegendEntry], plotHeight: Double = 240, left: Double = 76,
         right: Double = 24, bottom: Double = 52, bottomStrip: Double = 0) {
        self.title = title
        self.x = x
        self.y = y
        self.legend = legend
        self.left = left
        self.right = right
        self.bottom = bottom
        self.bottomStrip = bottomStrip
        self.top = 12 + Double(SVGPlot.legendLayout(legend, width: 1000 - left - right).rows) * SVGPlot.legendRowHeight
        self.height = top + plotHeight + bottomStrip + bottom
    }

    var plotLeft: Double { left }
    var plotRight: Double { width - right }
    var plotTop: Double { top }
    var plotBottom: Double { height - bottom - bottomStrip }
    /// Where the x axis and its tick labels sit: under the strip, if there is one.
    var axisBottom: Double { height - bottom }

    /// Pixel column of data value `v` on the x axis.
    func px(_ v: Double) -> Double {
        plotLeft + (v - x.low) / (x.high - x.low) * (plotRight - plotLeft)
    }

    /// Pixel row of data value `v` on the y axis (up is larger).
    func py(_ v: Double) -> Double {
        if y.log {
            let l = log10(y.low), h = log10(y.high)
            return plotBottom - (log10(min(max(v, y.low), y.high)) - l) / (h - l) * (plotBottom - plotTop)
        }
        return plotBottom - (v - y.low) / (y.high - y.low) * (plotBottom - plotTop)
    }

    // MARK: pure helpers

    /// A range with room in it: a single value gets ±1 (or ±10 % of itself) around it.
    static func widen(_ low: Double, _ high: Double) -> (Double, Double) {
        guard low.isFinite, high.isFinite, low <= high else { return (0, 1) }
        if high > low { return (low, high) }
        let pad = low == 0 ? 1 : abs(low) * 0.1
        return (low - pad, high + pad)
    }

    /// The 1, 2 or 5 × 10ⁿ at or above `raw`.
    static func niceStep(_ raw: Double) -> Double {
        guard raw > 0, raw.isFinite else { return 1 }
        let magnitude = pow(10, (log10(raw)).rounded(.down))
        let fraction = raw / magnitude
        let nice: Double = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10
        return nice * magnitude
    }

    /// Downsamples `points` (any order) into at most `buckets` equal slices of `over`, keeping each slice's
    /// minimum and maximum so a single spike stays visible. Few enough points are returned as they are.
    static func envelope(_ points: [(x: Double, y: Double)], over range: ClosedRange<Double>, buckets: Int) -> [Bucket] {
        if points.count <= buckets {
            return points.sorted { $0.x < $1.x }.map { Bucket(x: $0.x, low: $0.y, high: $0.y) }
        }
        let span = max(range.upperBound - range.lowerBound, .leastNonzeroMagnitude)
        var low = [Double](repeating: .infinity, count: buckets)
        var high = [Double](repeating: -.infinity, count: buckets)
        for p in points {
            let raw = (p.x - range.lowerBound) / span * Double(buckets)
            let i = raw.isFinite ? Int(min(max(raw, 0), Double(buckets - 1))) : 0
            low[i] = min(low[i], p.y)
            high[i] = max(high[i], p.y)
        }
        return (0..<buckets).compactMap { i in
            low[i] <= high[i] ? Bucket(x: range.lowerBound + (Double(i) + 0.5) * span / Double(buckets), low: low[i], high: high[i]) : nil
        }
    }

    /// Merges ticks of `width` pixels centred on `centres` (any order) into runs, so a take with thousands of
    /// neighbouring ticks draws a few rectangles.
    static func runs(_ centres: [Double], width: Double) -> [ClosedRange<Double>] {
        var out: [ClosedRange<Double>] = []
        for c in centres.sorted() {
            let tick = (c - width / 2)...(c + width / 2)
            if let last = out.last, tick.lowerBound <= last.upperBound + 0.5 {
                out[out.count - 1] = last.lowerBound...max(last.upperBound, tick.upperBound)
            } else {
                out.append(tick)
            }
        }
        return out
    }

    /// Where each legend entry sits (offset from the legend's top-left) and how many rows it takes.
    static func legendLayout(_ entries: [LegendEntry], width: Double) -> (positions: [(x: Double, y: Double)], rows: Int) {
        guard !entries.isEmpty else { return ([], 0) }
        var positions: [(x: Double, y: Double)] = []
        var x = 0.0, row = 0
        for e in entries {
            let w = 26 + Double(e.name.count) * characterWidth + 18
            if x > 0, x + w > width { x = 0; row += 1 }
            positions.append((x, Double(row) * legendRowHeight))
            x += w
        }
        return (positions, row + 1)
    }

    static func number(_ v: Double) -> String {
        guard v.isFinite else { return "–" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        let digits = max(1, min(6, Int(-log10(abs(v)).rounded(.down)) + 2))
        var s = String(format: "%.\(digits)f", v)
        while s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
        return s
    }

    /// A pixel coordinate as SVG text: one decimal is finer than any screen needs.
    static func f(_ v: Double) -> String {
        guard v.isFinite, abs(v) < 1e12 else { return "0" }
        let tenths = (v * 10).rounded()
        let whole = Int64(tenths / 10)
        let frac = Int64(abs(tenths.truncatingRemainder(dividingBy: 10)))
        if frac == 0 { return String(whole) }
        return (tenths < 0 && whole == 0 ? "-0" : String(whole)) + "." + String(frac)
    }

    // MARK: layers

    mutating func add(_ svg: String) { layers.append(svg) }

    /// A line through `points` (data space, drawn in the given order).
    mutating func line(_ points: [(x: Double, y: Double)], color: String, width: Double = 1.5, dash: String? = nil,
                       opacity: Double = 1) {
        guard !points.isEmpty else { return }
        var d = ""
        d.reserveCapacity(points.count * 12)
        for p in points {
            if !d.isEmpty { d += " " }
            d += SVGPlot.f(px(p.x)) + "," + SVGPlot.f(py(p.y))
        }
        var attrs = "fill=\"none\" stroke=\"\(color)\" stroke-width=\"\(SVGPlot.f(width))\" stroke-linejoin=\"round\""
        if let dash { attrs += " stroke-dasharray=\"\(dash)\"" }
        if opacity < 1 { attrs += " stroke-opacity=\"\(opacity)\"" }
        if points.count == 1 {
            layers.append("<circle cx=\"\(SVGPlot.f(px(points[0].x)))\" cy=\"\(SVGPlot.f(py(points[0].y)))\" r=\"2.5\" fill=\"\(color)\"/>")
        } else {
            layers.append("<polyline \(attrs) points=\"\(d)\"/>")
        }
    }

    /// A downsampled series: a line through the points, or through each bucket's minimum and maximum.
    mutating func envelope(_ points: [(x: Double, y: Double)], color: String, buckets: Int = 1000, width: Double = 1.5,
                           dash: String? = nil, opacity: Double = 1) {
        let b = SVGPlot.envelope(points, over: x.low...x.high, buckets: buckets)
        var path: [(x: Double, y: Double)] = []
        path.reserveCapacity(b.count * 2)
        for (i, bucket) in b.enumerated() {
            if bucket.low == bucket.high {
                path.append((bucket.x, bucket.low))
            } else if i % 2 == 0 {
                path.append((bucket.x, bucket.low)); path.append((bucket.x, bucket.high))
            } else {
                path.append((bucket.x, bucket.high)); path.append((bucket.x, bucket.low))
            }
        }
        line(path, color: color, width: width, dash: dash, opacity: opacity)
    }

    /// A staircase: each point's value holds until the next point's x (the last until `until`).
    mutating func step(_ points: [(x: Double, y: Double)], until end: Double, color: String, width: Double = 2,
                       dash: String? = nil, opacity: Double = 1) {
        guard !points.isEmpty else { return }
        var path: [(x: Double, y: Double)] = []
        for (i, p) in points.enumerated() {
            if i > 0 { path.append((p.x, points[i - 1].y)) }
            path.append(p)
        }
        if let last = points.last, end > last.x { path.append((end, last.y)) }
        line(path, color: color, width: width, dash: dash, opacity: opacity)
    }

    /// A horizontal rule at data value `value` across the plot, labelled in the right margin (moved down by
    /// `labelShift` pixels, so two close rules keep their labels apart).
    mutating func rule(at value: Double, color: String, label: String, labelShift: Double = 0, cssClass: String) {
        let y = py(value)
        layers.append("<line class=\"\(cssClass)\" x1=\"\(SVGPlot.f(plotLeft))\" x2=\"\(SVGPlot.f(plotRight))\" y1=\"\(SVGPlot.f(y))\" y2=\"\(SVGPlot.f(y))\" stroke=\"\(color)\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>")
        layers.append("<text x=\"\(SVGPlot.f(plotRight + 6))\" y=\"\(SVGPlot.f(y + 4 + labelShift))\" fill=\"\(color)\" font-weight=\"600\">\(htmlEscape(label))</text>")
    }

    /// Ticks at data x values, `tickWidth` pixels wide, between pixel rows `top` and `bottom`, merged into runs.
    mutating func ticks(at xs: [Double], top: Double, bottom: Double, color: String, opacity: Double = 1, tickWidth: Double) {
        guard !xs.isEmpty else { return }
        var d = ""
        for r in SVGPlot.runs(xs.map(px), width: tickWidth) {
            let l = max(plotLeft, r.lowerBound), h = min(plotRight, r.upperBound)
            d += "M\(SVGPlot.f(l)) \(SVGPlot.f(top))H\(SVGPlot.f(max(h, l + 1)))V\(SVGPlot.f(bottom))H\(SVGPlot.f(l))Z"
        }
        let op = opacity < 1 ? " fill-opacity=\"\(opacity)\"" : ""
        layers.append("<path fill=\"\(color)\"\(op) d=\"\(d)\"/>")
    }

    /// A grey note in the middle of an empty plot.
    mutating func emptyNote(_ text: String) {
        layers.append("<text x=\"\(SVGPlot.f((plotLeft + plotRight) / 2))\" y=\"\(SVGPlot.f((plotTop + plotBottom) / 2))\" text-anchor=\"middle\" fill=\"#777\" font-size=\"15\">\(htmlEscape(text))</text>")
    }

    // MARK: render

    func render(cssClass: String) -> String {
        var s = "<svg class=\"plot \(cssClass)\" viewBox=\"0 0 \(SVGPlot.f(width)) \(SVGPlot.f(height))\" role=\"img\" aria-label=\"\(htmlEscape(title))\" font-family=\"system-ui,-apple-system,'Segoe UI',Roboto,sans-serif\" font-size=\"12\">\n"
        s += "<title>\(htmlEscape(title))</title>\n"
        s += "<rect x=\"\(SVGPlot.f(plotLeft))\" y=\"\(SVGPlot.f(plotTop))\" width=\"\(SVGPlot.f(plotRight - plotLeft))\" height=\"\(SVGPlot.f(plotBottom - plotTop))\" fill=\"#fff\"/>\n"
        if bottomStrip > 0 {
            s += "<rect x=\"\(SVGPlot.f(plotLeft))\" y=\"\(SVGPlot.f(plotBottom))\" width=\"\(SVGPlot.f(plotRight - plotLeft))\" height=\"\(SVGPlot.f(bottomStrip))\" fill=\"#f4f4f4\" stroke=\"#ccc\"/>\n"
        }
        // Grid and y ticks.
        if showYAxis {
            for t in y.ticks {
                let yy = SVGPlot.f(py(t))
                s += "<line x1=\"\(SVGPlot.f(plotLeft))\" x2=\"\(SVGPlot.f(plotRight))\" y1=\"\(yy)\" y2=\"\(yy)\" stroke=\"\(t == 0 ? "#9a9a9a" : "#e3e3e3")\"/>"
                s += "<text x=\"\(SVGPlot.f(plotLeft - 6))\" y=\"\(yy)\" dy=\"4\" text-anchor=\"end\" fill=\"#333\">\(htmlEscape(yTickLabel(t)))</text>\n"
            }
            let cy = (plotTop + plotBottom) / 2
            s += "<text transform=\"translate(16 \(SVGPlot.f(cy))) rotate(-90)\" text-anchor=\"middle\" fill=\"#222\" font-weight=\"600\">\(htmlEscape(y.label))</text>\n"
        }
        // X ticks.
        for t in x.ticks {
            let xx = SVGPlot.f(px(t))
            s += "<line x1=\"\(xx)\" x2=\"\(xx)\" y1=\"\(SVGPlot.f(plotTop))\" y2=\"\(SVGPlot.f(plotBottom))\" stroke=\"#f0f0f0\"/>"
            s += "<line x1=\"\(xx)\" x2=\"\(xx)\" y1=\"\(SVGPlot.f(axisBottom))\" y2=\"\(SVGPlot.f(axisBottom + 5))\" stroke=\"#555\"/>"
            s += "<text x=\"\(xx)\" y=\"\(SVGPlot.f(axisBottom + 18))\" text-anchor=\"middle\" fill=\"#333\">\(htmlEscape(xTickLabel(t)))</text>"
            if let second = xSecondaryLabel {
                s += "<text x=\"\(xx)\" y=\"\(SVGPlot.f(axisBottom + 32))\" text-anchor=\"middle\" fill=\"#888\" font-size=\"11\">\(htmlEscape(second(t)))</text>"
            }
            s += "\n"
        }
        s += "<text x=\"\(SVGPlot.f((plotLeft + plotRight) / 2))\" y=\"\(SVGPlot.f(height - 4))\" text-anchor=\"middle\" fill=\"#222\" font-weight=\"600\">\(htmlEscape(x.label))</text>\n"
        // Data, clipped to the plot box.
        s += "<g>\n" + layers.joined(separator: "\n") + "\n</g>\n"
        s += "<rect x=\"\(SVGPlot.f(plotLeft))\" y=\"\(SVGPlot.f(plotTop))\" width=\"\(SVGPlot.f(plotRight - plotLeft))\" height=\"\(SVGPlot.f(plotBottom - plotTop))\" fill=\"none\" stroke=\"#888\"/>\n"
        // Legend above the plot box.
        let layout = SVGPlot.legendLayout(legend, width: plotRight - plotLeft)
        for (e, pos) in zip(legend, layout.positions) {
            let lx = plotLeft + pos.x, ly = 6 + pos.y
            let mid = SVGPlot.f(ly + 6)
            switch e.style {
            case .line:
                s += "<line x1=\"\(SVGPlot.f(lx))\" x2=\"\(SVGPlot.f(lx + 20))\" y1=\"\(mid)\" y2=\"\(mid)\" stroke=\"\(e.color)\" stroke-width=\"3\"/>"
            case .dashed:
                s += "<line x1=\"\(SVGPlot.f(lx))\" x2=\"\(SVGPlot.f(lx + 20))\" y1=\"\(mid)\" y2=\"\(mid)\" stroke=\"\(e.color)\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>"
            case .box:
                s += "<rect x=\"\(SVGPlot.f(lx + 3))\" y=\"\(SVGPlot.f(ly + 1))\" width=\"14\" height=\"10\" fill=\"\(e.color)\"/>"
            case .marker:
                s += "<path d=\"M\(SVGPlot.f(lx + 4)) \(SVGPlot.f(ly + 1))h12l-6 10z\" fill=\"\(e.color)\"/>"
            }
            s += "<text x=\"\(SVGPlot.f(lx + 26))\" y=\"\(SVGPlot.f(ly + 10))\" fill=\"#222\">\(htmlEscape(e.name))</text>\n"
        }
        s += "</svg>"
        return s
    }
}

/// Text safe inside HTML and SVG elements and attribute values.
func htmlEscape(_ s: String) -> String {
    var out = ""
    out.reserveCapacity(s.count)
    for ch in s {
        switch ch {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&#39;"
        default: out.append(ch)
        }
    }
    return out
}

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
                    .filter { $0.kind == "camera-slowed" && $0.node == cam.node && $0.camera == cam.camera }
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
        return .exact(0, high, count: 8, label: "group (frame period \(SVGPlot.number(Double(manifest.framePeriodMicroseconds) / 1000)) ms); below: time since t0")
    }

    static func seconds(_ s: Double) -> String {
        let a = abs(s)
        guard a < 1e9 else { return a.isFinite ? String(format: "%.3g s", s) : "–" }
        if a >= 3600 {
            let whole = Int(a.rounded())
            return (s < 0 ? "−" : "") + String(format: "%d:%02d:%02d", whole / 3600, whole / 60 % 60, whole % 60)
        }
        if a >= 600 {
            let whole = Int(a.rounded())
            return (s < 0 ? "−" : "") + String(format: "%d:%02d", whole / 60, whole % 60)
        }
        let text = a >= 100 ? String(format: "%.0f s", a) : a >= 10 ? String(format: "%.1f s", a) : String(format: "%.2f s", a)
        return (s < 0 ? "−" : "") + text
    }

    /// A take's length for the figures at the top.
    static func duration(_ s: Double) -> String {
        s < 600 ? seconds(s) : s < 7200 ? String(format: "%.1f min", s / 60) : String(format: "%.1f h", s / 3600)
    }

    private static func fixed(_ v: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", v) }

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
        plot.xSecondaryLabel = secondsLabel(manifest)
        if values.isEmpty { plot.emptyNote("no frames to plot") }
        for t in traces { plot.envelope(t.errors, color: t.color, buckets: maxBuckets) }
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
                           legend: [.init(name: "spread: max − min centre across cameras (dup rows left out)", color: "#1f3b73"),
                                    .init(name: "p50 (report)", color: "#2e7d32", style: .dashed),
                                    .init(name: "p99 (report)", color: "#c62828", style: .dashed)],
                           plotHeight: 220, left: margins.left, right: margins.right)
        plot.xSecondaryLabel = secondsLabel(manifest)
        if spreads.isEmpty { plot.emptyNote("no group has frames from two cameras") }
        plot.envelope(spreads.map { (Double($0.group), Double($0.spread)) }, color: "#1f3b73", buckets: maxBuckets)
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
            var plot = SVGPlot(title: "Clock uncertainty per node",
                               x: .time(min(xs.min() ?? 0, 0), max(xs.max() ?? 0, end, 0.001),
                                        label: "time since t0; each estimate holds until the next"),
                               y: logScale ? .logarithmic(max(smallest * 0.8, 0.1), top * 1.2, label: "clock error (µs, log)")
                                   : .nice(0, max(top, 1) * 1.08, label: "clock error (µs)"),
                               legend: legend, plotHeight: 200)
            // One style along the axis: m:ss (or h:mm:ss) throughout once the span is ten minutes or more.
            let long = plot.x.high - plot.x.low >= 600
            plot.xTickLabel = { t in long && t == 0 ? "0:00" : seconds(t) }
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
        for (_, e) in numbered where !kinds.contains(e.kind) { kinds.append(e.kind) }
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
        plot.xSecondaryLabel = secondsLabel(manifest)
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
            let c = kindColor(e.kind)
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

    static func secondsLabel(_ manifest: TakeManifest) -> (Double) -> String {
        let period = Double(max(manifest.framePeriodMicroseconds, 1))
        return { g in seconds(g * period / 1e6) }
    }

    static func clipped(_ s: String, _ chars: Int) -> String {
        s.count <= max(chars, 4) ? s : String(s.prefix(max(chars, 4) - 1)) + "…"
    }

    // MARK: verdict

    /// The take's problems, one clause each (empty when there are none).
    static func problems(manifest: TakeManifest, report: SyncReport, traces: [CameraTrace]) -> [String] {
        // Files first (the operator can act on them: `coord collect`), then what the rig did, then drops.
        var files: [String] = [], short: [String] = [], disabled: [String] = []
        // Collection's own account of a file that did not arrive intact starts with its path.
        let fileEvents = manifest.events.filter { $0.kind == "file-damaged" || $0.kind == "file-missing" }
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
                                    "camera-ended", "camera-error", "stop-undelivered", "take-aborted", "staging-lost"]
        let happenings = manifest.events.filter { serious.contains($0.kind) }.map(clause)
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

    // MARK: html

    /// The whole page. `rows` holds each camera's frames.csv rows keyed "node/camera"; a camera whose
    /// frames.csv is missing has no entry.
    public static func html(manifest: TakeManifest, report: SyncReport, rows: [String: [FrameRow]]) -> String {
        let traces = traces(manifest: manifest, rows: rows)
        let spreads = spreadPerGroup(manifest.cameras.compactMap { rows["\($0.node)/\($0.camera)"] })
        let numbered = manifest.events.filter { !summaryKinds.contains($0.kind) }.enumerated().map { ($0.offset + 1, $0.element) }
        let problems = problems(manifest: manifest, report: report, traces: traces)
        let period = Double(max(manifest.framePeriodMicroseconds, 1))
        let s = report.spreadMicroseconds
        let partial = manifest.status == .partial
        let tone = partial ? "bad" : problems.isEmpty ? "good" : "warn"
        let nodes = Set(manifest.cameras.map(\.node)).count

        var page = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>coord sync report: \(htmlEscape(manifest.takeID)) (\(manifest.status.rawValue))</title>
        <style>
        body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1120px;padding:0 16px;color:#1d1d1d;background:#fafafa}
        h1{font-size:22px;margin:0 0 8px;display:flex;align-items:center;gap:14px;flex-wrap:wrap}
        h2{font-size:18px;margin:30px 0 4px;border-bottom:2px solid #ddd;padding-bottom:3px}
        .badge{font-size:16px;font-weight:700;letter-spacing:.06em;text-transform:uppercase;color:#fff;padding:4px 12px;border-radius:6px}
        .badge.complete{background:#1b7f3b}.badge.partial{background:#c62828}
        .verdict{font-size:18px;padding:10px 14px;border-radius:6px;margin:8px 0 14px;border-left:8px solid}
        .verdict.good{background:#e8f5e9;border-color:#1b7f3b}.verdict.warn{background:#fff8e1;border-color:#f0a000}.verdict.bad{background:#ffebee;border-color:#c62828}
        .figures{display:flex;flex-wrap:wrap;gap:10px;margin:0 0 6px}
        .fig{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
        .fig .k{font-size:12px;color:#666;text-transform:uppercase;letter-spacing:.04em}.fig .v{font-size:22px;font-weight:700}
        .fig .v small{font-size:14px;font-weight:400;color:#444}
        .note{color:#555;font-size:13px;margin:2px 0 8px}
        svg.plot{display:block;width:100%;height:auto;background:#fff;border:1px solid #e0e0e0;border-radius:6px}
        svg .halo{paint-order:stroke;stroke:#fff;stroke-width:4px}
        table{border-collapse:collapse;background:#fff;margin:6px 0;font-size:14px}
        td,th{border:1px solid #d6d6d6;padding:4px 9px;text-align:right;vertical-align:top;white-space:nowrap}
        th{background:#f0f0f0;font-weight:600}
        td.l,th.l{text-align:left}
        tr.hot td.cost{background:#ffe0b2;font-weight:700}tr.over td.cost{background:#ffcdd2;font-weight:700}
        tr.off td{color:#9a9a9a}
        .chip{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
        td.detail{text-align:left;max-width:560px;white-space:normal}
        </style></head>
        <body>
        <h1><span class="badge \(manifest.status.rawValue)">\(manifest.status.rawValue)</span>Take \(htmlEscape(manifest.takeID))</h1>
        <p class="verdict \(tone)">\(htmlEscape(sentence(status: manifest.status, problems: problems, groups: manifest.groups)))</p>
        <div class="figures">
        <div class="fig"><div class="k">spread p50</div><div class="v">\(s.p50) <small>µs</small></div></div>
        <div class="fig"><div class="k">spread p99</div><div class="v">\(s.p99) <small>µs</small></div></div>
        <div class="fig"><div class="k">spread max</div><div class="v">\(s.max) <small>µs</small></div></div>

        """
        if let b = report.spreadBoundMicroseconds {
            page += "<div class=\"fig\"><div class=\"k\">bound p50 / p99 / max</div><div class=\"v\">\(b.p50) / \(b.p99) / \(b.max) <small>µs</small></div></div>\n"
        }
        page += "<div class=\"fig\"><div class=\"k\">groups</div><div class=\"v\">\(manifest.groups) <small>\(duration(Double(manifest.groups) * period / 1e6))</small></div></div>\n"
        page += "<div class=\"fig\"><div class=\"k\">cameras</div><div class=\"v\">\(manifest.cameras.count) <small>on \(nodes) node\(nodes == 1 ? "" : "s")</small></div></div>\n</div>\n"
        page += "<p class=\"note\">Spread: per group, the latest minus the earliest frame centre across cameras on the rig timebase (node estimates, dup rows left out), over \(report.groupsMeasured) groups."
        if report.spreadBoundMicroseconds != nil {
            page += " Bound: the same allowing two sigma of each camera's clock and centre error (the figure to trust)."
        }
        page += " Frame period \(SVGPlot.number(period / 1000)) ms; started \(htmlEscape(manifest.startWallclock)).</p>\n"

        page += "<h2>Frame-centre error per camera</h2>\n<p class=\"note\">centre_us − (t0 + group × frame period) for every delivered frame; long takes show each slice's min–max.</p>\n"
        page += errorPlot(manifest, traces: traces).render(cssClass: "error") + "\n"
        page += "<h2>Spread per group</h2>\n"
        page += spreadPlot(manifest, report: report, traces: traces, spreads: spreads).render(cssClass: "spread") + "\n"
        page += "<h2>Clock uncertainty per node</h2>\n"
        if !(manifest.clockTrack ?? []).isEmpty {
            page += "<p class=\"note\">Every clock estimate sent to a node during the take: solid, the one-sigma uncertainty of its rig-time mapping; dashed and lighter, the bound (the most it can be off, path asymmetry included).</p>\n"
        }
        page += clockPlot(manifest, traces: traces).render(cssClass: "clock") + "\n"
        page += "<h2>Drops and events</h2>\n<p class=\"note\">One lane per camera: a tick for every dup row (a repeat of the previous frame). Numbered markers are the events in the table below.</p>\n"
        page += timelinePlot(manifest, traces: traces, numbered: numbered).render(cssClass: "timeline") + "\n"

        // Events table.
        page += "<table class=\"events\"><tr><th>#</th><th>t from t0</th><th class=\"l\">node</th><th class=\"l\">camera</th><th class=\"l\">kind</th><th class=\"l\">detail</th></tr>\n"
        var number = 0
        for e in manifest.events {
            let isSummary = summaryKinds.contains(e.kind)
            if !isSummary { number += 1 }
            let t = (Double(e.tMicroseconds) - Double(manifest.t0Microseconds)) / 1e6
            page += "<tr><td>\(isSummary ? "" : String(number))</td><td>\(String(format: "%.3f", t)) s</td><td class=\"l\">\(htmlEscape(e.node))</td><td class=\"l\">\(htmlEscape(e.camera))</td>"
            page += "<td class=\"l\"><span class=\"chip\" style=\"background:\(kindColor(e.kind))\"></span>\(htmlEscape(e.kind))</td><td class=\"detail\">\(htmlEscape(e.detail))</td></tr>\n"
        }
        if manifest.events.isEmpty { page += "<tr><td colspan=\"6\" class=\"l\">no events</td></tr>\n" }
        page += "</table>\n"

        // Per-camera table.
        page += "<h2>Cameras</h2>\n<table class=\"cameras\"><tr><th class=\"l\">node</th><th class=\"l\">camera</th><th>frames</th><th>dropped</th><th>held</th><th>phase p50 µs</th><th>phase p99 µs</th><th>phase max µs</th><th>clock ± µs</th><th>centre ± µs</th><th class=\"l\">state</th></tr>\n"
        for (t, cam) in zip(traces, manifest.cameras) {
            let r = report.cameras.first { $0.node == cam.node && $0.camera == cam.camera }
            let p = r?.phaseErrorMicroseconds
            var state: [String] = []
            if t.rowCount == nil { state.append("frames.csv missing") }
            if cam.disabled == true { state.append("disabled") }
            if let every = cam.recordEvery, every > 1 { state.append("records 1 group in \(every)") }
            page += "<tr class=\"\(cam.disabled == true ? "off" : "")\"><td class=\"l\"><span class=\"chip\" style=\"background:\(t.color)\"></span>\(htmlEscape(cam.node))</td><td class=\"l\">\(htmlEscape(cam.camera))</td>"
            page += "<td>\(r?.frames ?? cam.frames)</td><td>\(r?.dropped ?? cam.dropped)</td><td>\(r?.held ?? cam.held ?? 0)</td>"
            page += "<td>\(p.map { String($0.p50) } ?? "-")</td><td>\(p.map { String($0.p99) } ?? "-")</td><td>\(p.map { String($0.max) } ?? "-")</td>"
            page += "<td>\(fixed(r?.clockUncertaintyMicroseconds ?? cam.clock.uncertaintyMicroseconds))</td>"
            page += "<td>\((r?.centerUncertaintyMicroseconds ?? cam.centerUncertaintyMicroseconds).map { fixed($0) } ?? "-")</td>"
            page += "<td class=\"l\">\(htmlEscape(state.joined(separator: ", ")))</td></tr>\n"
        }
        page += "</table>\n"

        // Budget.
        if let b = manifest.budget {
            page += "<h2>Budget</h2>\n<p>Hardware cost <b>\(fixed(b.cost, 2))</b> (the most loaded node's; must stay under 1.00)"
            if let longest = b.longestSeconds { page += " · longest take the nodes sustain: \(htmlEscape(Budget.duration(longest)))" }
            page += ". Rows at 0.80 or more are highlighted.</p>\n"
            page += "<table class=\"budget\"><tr><th class=\"l\">node</th><th class=\"l\">resource</th><th>demand</th><th>capacity</th><th>cost</th></tr>\n"
            for node in b.nodes {
                for load in node.loads {
                    let (unit, scale) = load.unit == "pixels/s" ? ("Mpx/s", 1e6) : load.unit == "bytes/s" ? ("MB/s", 1e6) : (load.unit, 1.0)
                    let cls = load.cost >= 1 ? "over" : load.cost >= 0.8 ? "hot" : ""
                    page += "<tr class=\"\(cls)\"><td class=\"l\">\(htmlEscape(node.node))</td><td class=\"l\">\(htmlEscape(load.resource))</td>"
                    page += "<td>\(fixed(load.demand / scale)) \(htmlEscape(unit))</td><td>\(fixed(load.capacity / scale)) \(htmlEscape(unit))</td><td class=\"cost\">\(fixed(load.cost, 2))</td></tr>\n"
                }
                for note in node.notes {
                    page += "<tr><td class=\"l\">\(htmlEscape(node.node))</td><td class=\"detail\" colspan=\"4\">\(htmlEscape(note))</td></tr>\n"
                }
            }
            page += "</table>\n"
            if !b.changes.isEmpty {
                page += "<p>Fit changes before the take:</p>\n<ul>\n" + b.changes.map { "<li>\(htmlEscape($0))</li>\n" }.joined() + "</ul>\n"
            }
        }
        page += "<p class=\"note\">Written by coord from manifest.json, sync-report.json and the cameras' frames.csv files; this page loads nothing from anywhere.</p>\n"
        page += "</body></html>\n"
        return page
    }

    /// The page for the take in `directory`, its rows read from each manifest camera's frames.csv.
    public static func html(takeDirectory directory: URL, manifest: TakeManifest, report: SyncReport) -> String {
        html(manifest: manifest, report: report, rows: TakeDirectoryWriter(directory: directory).framesRows(manifest))
    }
}
