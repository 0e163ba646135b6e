import CoordCore
import Foundation

// The page's sound (CONTRACT §9): a table of the microphones and a plot of two panels side by side, each on an axis of
// its own unit: the A/V offset in µs (p50 bar, p99 line) and the sample clock's rate error in ppm.
extension SyncReportPage {
    /// The microphones' table and their plot; nil for a take recorded without sound.
    static func soundSection(_ manifest: TakeManifest) -> PageContext.SoundSection? {
        let audio = manifest.audio ?? [], lost = manifest.audioLost ?? []
        guard !audio.isEmpty || !lost.isEmpty else { return nil }
        // A microphone lost before group 0 has no file and no figures: a row that says so.
        let lostRows = lost.map { PageContext.MicRow(node: $0.node, mic: $0.mic, seconds: "0.000", p50: "–", p99: "–", rate: "–",
                                                    path: "none", state: "no sound: ended before group 0: \($0.ended)") }
        guard !audio.isEmpty else { return .init(soundPlot: "", mics: lostRows) }
        let rows = audio.map { a in
            PageContext.MicRow(node: a.node, mic: a.mic, seconds: String(format: "%.3f", Double(a.frames) / Double(max(a.sampleRate, 1))),
                               p50: fixed(a.avOffsetMicroseconds.p50), p99: fixed(a.avOffsetMicroseconds.p99),
                               rate: String(format: "%+.2f", a.rateErrorPPM), path: a.path,
                               state: a.ended.map { "ended early: \($0)" } ?? (a.sha256.isEmpty ? "not collected" : "complete"))
        }
        return .init(soundPlot: soundPlot(audio), mics: rows + lostRows)
    }

    /// One horizontal panel of the sound plot: its pixel columns and the axis (in one unit) it maps onto them.
    struct SoundPanel {
        var left: Double
        var right: Double
        var axis: SVGPlot.Axis
        func px(_ v: Double) -> Double {
            let span = axis.high - axis.low
            guard span > 0, v.isFinite else { return left }
            return left + (min(max(v, axis.low), axis.high) - axis.low) / span * (right - left)
        }
    }

    /// The panels of the sound plot for these microphones: A/V offset in µs, rate error in ppm (its figure beside
    /// each bar, on the other side of zero).
    static func soundPanels(_ audio: [TakeManifest.Audio], names: Double, width: Double) -> (offset: SoundPanel, rate: SoundPanel) {
        let offsets = audio.flatMap { [$0.avOffsetMicroseconds.p50, $0.avOffsetMicroseconds.p99] }.filter(\.isFinite)
        let offsetAxis = SVGPlot.Axis.nice(min(offsets.min() ?? 0, 0), max(offsets.max() ?? 1, 1), count: 4,
                                           label: "A/V offset (µs): bar p50, line p99")
        let rates = audio.map(\.rateErrorPPM).filter(\.isFinite)
        let reach = max(rates.map(abs).max() ?? 1, 1)
        // Around zero both ways, so each bar's figure has room on the other side of zero.
        let rateAxis = SVGPlot.Axis.nice(-reach, reach, count: 4, label: "rate error (ppm)")
        let split = names + (width - names) * 0.6
        // Apart far enough that the one axis's last tick label and the other's first never meet.
        return (SoundPanel(left: names + 12, right: split - 40, axis: offsetAxis),
                SoundPanel(left: split + 40, right: width - 24, axis: rateAxis))
    }

    static func soundPlot(_ audio: [TakeManifest.Audio]) -> String {
        let width = 1000.0, rowHeight = 22.0, top = 8.0, axisRoom = 46.0
        let longest = audio.map { $0.node.count + 1 + $0.mic.count }.max() ?? 8
        let names = min(260, max(110, Double(longest) * SVGPlot.characterWidth + 12))
        let (offset, rate) = soundPanels(audio, names: names, width: width)
        let bottom = top + rowHeight * Double(audio.count)
        let height = bottom + axisRoom
        var svg = "<svg class=\"sound\" viewBox=\"0 0 \(SVGPlot.f(width)) \(SVGPlot.f(height))\" role=\"img\" aria-label=\"A/V offset and rate error per microphone\" font-family=\"system-ui,-apple-system,'Segoe UI',Roboto,sans-serif\" font-size=\"12\">"
        for (i, a) in audio.enumerated() {
            let y = top + Double(i) * rowHeight
            svg += "<text x=\"4\" y=\"\(SVGPlot.f(y + 15))\" fill=\"#222\">\(htmlEscape(clipped("\(a.node)/\(a.mic)", Int((names - 8) / SVGPlot.characterWidth))))</text>"
        }
        // Each panel: its grid and ticks in its unit, its marks, and the axis title naming that unit.
        func panel(_ p: SoundPanel, cssClass: String, marks: (Int, TakeManifest.Audio, Double) -> String) -> String {
            var s = "<g class=\"panel \(cssClass)\">"
            for t in p.axis.ticks {
                let x = SVGPlot.f(p.px(t))
                s += "<line x1=\"\(x)\" x2=\"\(x)\" y1=\"\(SVGPlot.f(top))\" y2=\"\(SVGPlot.f(bottom + 4))\" stroke=\"\(t == 0 ? "#9a9a9a" : "#e3e3e3")\"/>"
                s += "<text x=\"\(x)\" y=\"\(SVGPlot.f(bottom + 17))\" text-anchor=\"middle\" fill=\"#333\">\(htmlEscape(SVGPlot.number(t)))</text>"
            }
            for (i, a) in audio.enumerated() { s += marks(i, a, top + Double(i) * rowHeight) }
            s += "<text class=\"axis-label\" x=\"\(SVGPlot.f((p.left + p.right) / 2))\" y=\"\(SVGPlot.f(height - 6))\" text-anchor=\"middle\" fill=\"#222\" font-weight=\"600\">\(htmlEscape(p.axis.label))</text>"
            return s + "</g>"
        }
        svg += panel(offset, cssClass: "offset") { i, a, y in
            let zero = offset.px(0)
            let p50 = offset.px(a.avOffsetMicroseconds.p50), p99 = offset.px(a.avOffsetMicroseconds.p99)
            return "<rect x=\"\(SVGPlot.f(min(zero, p50)))\" y=\"\(SVGPlot.f(y + 5))\" width=\"\(SVGPlot.f(max(1, abs(p50 - zero))))\" height=\"12\" fill=\"\(color(i))\"><title>\(htmlEscape("\(a.node)/\(a.mic) p50 \(fixed(a.avOffsetMicroseconds.p50)) µs"))</title></rect>"
                + "<line x1=\"\(SVGPlot.f(zero))\" y1=\"\(SVGPlot.f(y + 11))\" x2=\"\(SVGPlot.f(p99 == zero ? zero + 1 : p99))\" y2=\"\(SVGPlot.f(y + 11))\" stroke=\"\(color(i))\" stroke-width=\"2\"><title>\(htmlEscape("\(a.node)/\(a.mic) p99 \(fixed(a.avOffsetMicroseconds.p99)) µs"))</title></line>"
        }
        svg += panel(rate, cssClass: "rate") { i, a, y in
            let zero = rate.px(0), end = rate.px(a.rateErrorPPM)
            let label = "<text x=\"\(SVGPlot.f(a.rateErrorPPM < 0 ? zero + 5 : zero - 5))\" y=\"\(SVGPlot.f(y + 15))\" text-anchor=\"\(a.rateErrorPPM < 0 ? "start" : "end")\" fill=\"#333\" class=\"halo\">\(htmlEscape(String(format: "%+.1f ppm", a.rateErrorPPM)))</text>"
            return label + "<rect x=\"\(SVGPlot.f(min(zero, end)))\" y=\"\(SVGPlot.f(y + 5))\" width=\"\(SVGPlot.f(max(1, abs(end - zero))))\" height=\"12\" fill=\"\(color(i))\" fill-opacity=\"0.6\"><title>\(htmlEscape("\(a.node)/\(a.mic) \(String(format: "%+.2f", a.rateErrorPPM)) ppm"))</title></rect>"
        }
        return svg + "</svg>"
    }
}
