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

    /// `points` (any order) as the strokes that draw them, split wherever the data has a gap: two neighbours more than
    /// `maxGap` apart on x are never joined, so no line crosses x values nothing was measured at. Few enough points are
    /// kept as they are; more are downsampled like `envelope` (each slice's minimum and maximum), two neighbouring
    /// slices joined only when the last point of the one and the first of the next are within `maxGap`. A run of one
    /// point is an isolated measurement.
    static func gappedRuns(_ points: [(x: Double, y: Double)], over range: ClosedRange<Double>, buckets: Int,
                           maxGap: Double) -> [[(x: Double, y: Double)]] {
        var runs: [[(x: Double, y: Double)]] = []
        var lastX = -Double.infinity
        if points.count <= buckets {
            for p in points.sorted(by: { $0.x < $1.x }) {
                if runs.isEmpty || !(p.x - lastX <= maxGap) { runs.append([]) }
                runs[runs.count - 1].append(p)
                lastX = p.x
            }
            return runs
        }
        let span = max(range.upperBound - range.lowerBound, .leastNonzeroMagnitude)
        var low = [Double](repeating: .infinity, count: buckets), high = [Double](repeating: -.infinity, count: buckets)
        var first = [Double](repeating: .infinity, count: buckets), last = [Double](repeating: -.infinity, count: buckets)
        for p in points {
            let raw = (p.x - range.lowerBound) / span * Double(buckets)
            let i = raw.isFinite ? Int(min(max(raw, 0), Double(buckets - 1))) : 0
            low[i] = min(low[i], p.y)
            high[i] = max(high[i], p.y)
            first[i] = min(first[i], p.x)
            last[i] = max(last[i], p.x)
        }
        for i in 0..<buckets where low[i] <= high[i] {
            if runs.isEmpty || !(first[i] - lastX <= maxGap) { runs.append([]) }
            let x = range.lowerBound + (Double(i) + 0.5) * span / Double(buckets)
            if low[i] == high[i] {
                runs[runs.count - 1].append((x, low[i]))
            } else if i % 2 == 0 {
                runs[runs.count - 1] += [(x, low[i]), (x, high[i])]
            } else {
                runs[runs.count - 1] += [(x, high[i]), (x, low[i])]
            }
            lastX = last[i]
        }
        return runs
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

    /// A series with gaps (`gappedRuns`): one path whose subpaths are the runs of neighbouring points, and a dot for
    /// each point with no neighbour to join (class `cssClass`, the dots `cssClass-points`).
    mutating func gappedSeries(_ points: [(x: Double, y: Double)], color: String, cssClass: String, buckets: Int = 1000,
                               maxGap: Double, width: Double = 1.5) {
        var d = "", dots = ""
        for run in SVGPlot.gappedRuns(points, over: x.low...x.high, buckets: buckets, maxGap: maxGap) {
            if run.count == 1 {
                let cx = px(run[0].x), cy = py(run[0].y)
                dots += "M\(SVGPlot.f(cx - 2)) \(SVGPlot.f(cy))a2 2 0 1 0 4 0a2 2 0 1 0 -4 0"
                continue
            }
            for (i, p) in run.enumerated() {
                d += (i == 0 ? "M" : i == 1 ? "L" : " ") + SVGPlot.f(px(p.x)) + "," + SVGPlot.f(py(p.y))
            }
        }
        if !d.isEmpty {
            layers.append("<path class=\"\(cssClass)\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"\(SVGPlot.f(width))\" stroke-linejoin=\"round\" d=\"\(d)\"/>")
        }
        if !dots.isEmpty {
            layers.append("<path class=\"\(cssClass)-points\" fill=\"\(color)\" d=\"\(dots)\"/>")
        }
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

