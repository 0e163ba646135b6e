@testable import Coordinator
import CoordCore
import Foundation
import Testing

/// sync-report.html: the plots' geometry (pure) and the page built from a manifest, a report and frames rows.
@Suite("Sync report page")
struct ReportPageTests {
    static let period: Int64 = 33_333
    static let t0: Int64 = 5_000_000

    /// A take of `groups` groups on `cameras` cameras (two per node); `dups` are dup rows of camera 0.
    static func take(groups: Int64, cameras: Int, dups: Set<Int64> = [], events: [TakeManifest.Event] = [],
                     camera name: (Int) -> String = { "cam\($0 % 2)" }, seed: UInt64 = 1)
        -> (TakeManifest, SyncReport, [String: [FrameRow]]) {
        var rng = SeededRandom(seed: seed)
        var manifestCameras: [TakeManifest.Camera] = []
        var inputs: [SyncReport.Input] = []
        var rows: [String: [FrameRow]] = [:]
        for i in 0..<cameras {
            let node = "node-\(i / 2)", camera = name(i)
            var list: [FrameRow] = []
            list.reserveCapacity(Int(groups))
            let bias = Double(i) * 3
            for g in 0..<groups {
                let centre = t0 + g * period + Int64((bias + rng.gaussian(standardDeviation: 5)).rounded())
                list.append(FrameRow(frame: g, group: g, centerMicroseconds: centre, isDup: i == 0 && dups.contains(g)))
            }
            rows["\(node)/\(camera)"] = list
            let clock = TakeManifest.ClockFigures(offsetMicroseconds: 100, driftPPM: 3, uncertaintyMicroseconds: 2 + Double(i),
                                                  boundMicroseconds: 40)
            manifestCameras.append(TakeManifest.Camera(
                node: node, camera: camera, ordinal: i, width: 320, height: 240, fps: 30, codec: "mjpeg", frames: groups,
                dropped: i == 0 ? Int64(dups.count) : 0, clock: clock,
                files: [.init(path: "\(node)/\(camera).mkv", bytes: 1, sha256: ""), .init(path: "\(node)/\(camera).frames.csv", bytes: 1, sha256: "")]))
            inputs.append(SyncReport.Input(node: node, camera: camera, rows: list, clockUncertaintyMicroseconds: 2 + Double(i)))
        }
        let manifest = TakeManifest(takeID: "20260101-000000-test-abcdef", name: "test", status: .complete, t0Microseconds: t0,
                                    framePeriodMicroseconds: period, groups: groups, startWallclock: "2026-01-01T00:00:00.000000Z",
                                    cameras: manifestCameras, events: events)
        let report = SyncReport(groups: groups, grid: FrameGrid(t0: t0, periodMicroseconds: period), inputs: inputs)
        return (manifest, report, rows)
    }

    static func count(_ needle: String, in haystack: String) -> Int {
        haystack.components(separatedBy: needle).count - 1
    }

    /// The `<svg …>…</svg>` of the plot with this CSS class.
    static func svg(_ cssClass: String, in page: String) -> String {
        guard let start = page.range(of: "<svg class=\"plot \(cssClass)\""),
              let end = page.range(of: "</svg>", range: start.upperBound..<page.endIndex) else { return "" }
        return String(page[start.lowerBound..<end.upperBound])
    }

    // MARK: geometry

    @Test func niceAxesCoverTheirDataWithRoundTicks() {
        #expect(SVGPlot.niceStep(0.7) == 1)
        #expect(SVGPlot.niceStep(1.3) == 2)
        #expect(SVGPlot.niceStep(3) == 5)
        #expect(SVGPlot.niceStep(7_000) == 10_000)
        let a = SVGPlot.Axis.nice(-13, 42, label: "µs")
        #expect(a.low <= -13 && a.high >= 42)
        #expect(a.ticks.first == a.low && a.ticks.last == a.high)
        let zero = SVGPlot.Axis.nice(0, 14.7, label: "µs")
        #expect(zero.low == 0, "a range starting at 0 must not grow below it")
        let exact = SVGPlot.Axis.exact(0, 108_000, label: "group")
        #expect(exact.low == 0 && exact.high == 108_000)
        #expect(exact.ticks.allSatisfy { $0 >= 0 && $0 <= 108_000 } && exact.ticks.count >= 4)
        let log = SVGPlot.Axis.logarithmic(1.5, 48, label: "µs")
        #expect(log.low == 1 && log.high == 50 && log.ticks == [1, 2, 5, 10, 20, 50])
        let time = SVGPlot.Axis.time(-2, 3_600, label: "s")
        #expect(time.low == -2 && time.high == 3_600 && time.ticks == stride(from: 0.0, through: 3_600, by: 600).map { $0 })
        #expect(SyncReportPage.seconds(3_600) == "1:00:00" && SyncReportPage.seconds(660) == "11:00" && SyncReportPage.seconds(1.5) == "1.50 s")
    }

    @Test func mapsDataOntoThePlotBox() {
        let plot = SVGPlot(title: "t", x: .exact(0, 100, label: "x"), y: .nice(0, 10, label: "y"), legend: [])
        #expect(plot.px(0) == plot.plotLeft && plot.px(100) == plot.plotRight)
        #expect(plot.py(0) == plot.plotBottom && plot.py(10) == plot.plotTop)
        #expect(abs(plot.py(5) - (plot.plotTop + plot.plotBottom) / 2) < 1e-9)
    }

    @Test func envelopeKeepsSpikesAndBoundsThePoints() {
        var points = (0..<100_000).map { (x: Double($0), y: Double($0 % 7)) }
        points[54_321].y = 900
        points[77_777].y = -400
        let buckets = SVGPlot.envelope(points, over: 0...100_000, buckets: 1000)
        #expect(buckets.count == 1000)
        #expect(buckets.map(\.high).max() == 900)
        #expect(buckets.map(\.low).min() == -400)
        // Few points are kept as they are, in x order.
        let few = SVGPlot.envelope([(x: 3, y: 1), (x: 1, y: 2)], over: 0...10, buckets: 1000)
        #expect(few == [.init(x: 1, low: 2, high: 2), .init(x: 3, low: 1, high: 1)])
    }

    @Test func neighbouringTicksMergeIntoRuns() {
        #expect(SVGPlot.runs([10, 11, 12, 40], width: 2) == [9...13, 39...41])
        #expect(SVGPlot.runs([], width: 2).isEmpty)
    }

    @Test func spreadPerGroupIsTheReportsDefinition() {
        let (_, report, rows) = Self.take(groups: 500, cameras: 4, dups: [3, 4, 100])
        let spreads = SyncReportPage.spreadPerGroup(Array(rows.values))
        #expect(Int64(spreads.count) == report.groupsMeasured)
        #expect(Percentiles(of: spreads.map(\.spread)) == report.spreadMicroseconds)
        #expect(SyncReportPage.spreadPerGroupSparse(Array(rows.values)).map(\.spread) == spreads.map(\.spread))
    }

    // MARK: the page

    @Test func pageHasFourPlotsWithOneSeriesPerCamera() {
        let (manifest, report, rows) = Self.take(groups: 300, cameras: 4, dups: [10, 11, 200])
        let page = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
        #expect(Self.count("<svg", in: page) == 4)
        let error = Self.svg("error", in: page)
        #expect(Self.count("<polyline", in: error) == 4)
        for (i, c) in manifest.cameras.enumerated() {
            #expect(error.contains("stroke=\"\(SyncReportPage.palette[i])\""), "camera \(i)'s series")
            #expect(error.contains(">\(c.node)/\(c.camera)</text>"), "camera \(i) in the legend")
        }
        for title in ["Frame-centre error per camera", "Spread per group", "Clock uncertainty per node", "Drops and events"] {
            #expect(page.contains(title))
        }
        #expect(page.contains("class=\"badge complete\""))
        // The dups of camera 0 make a problem sentence and marks in its lane.
        #expect(page.contains("3 frames dropped (node-0/cam0 3)"))
        #expect(Self.svg("timeline", in: page).contains("<path fill=\"\(SyncReportPage.palette[0])\""))
    }

    @Test func paletteHasSixteenDistinctColours() {
        #expect(Set(SyncReportPage.palette).count >= 16)
    }

    @Test func escapesNamesAndEventDetails() {
        let events = [TakeManifest.Event(tMicroseconds: Self.t0 + 40 * Self.period, node: "node-<b>", camera: "cam0",
                                         kind: "pressure", detail: "<script>alert('x')</script> & more")]
        let (manifest, report, rows) = Self.take(groups: 60, cameras: 2, events: events,
                                                 camera: { $0 == 0 ? "<script>evil()</script>" : "cam1" })
        let page = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
        #expect(!page.lowercased().contains("<script"))
        #expect(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more"))
        #expect(page.contains("&lt;script&gt;evil()&lt;/script&gt;"))
        #expect(!page.contains("node-<b>"))
    }

    @Test func loadsNothingFromAnywhere() {
        let events = [TakeManifest.Event(tMicroseconds: Self.t0, node: "", camera: "", kind: "start", detail: "see http://example.com")]
        var (manifest, report, rows) = Self.take(groups: 120, cameras: 3, events: events)
        manifest.events = []  // an event's detail is the operator's text, not a reference; check the page's own markup
        let page = SyncReportPage.html(manifest: manifest, report: report, rows: rows).lowercased()
        for forbidden in ["http:", "https:", "//", "<script", "<link", "<img", "<iframe", "@import", "url(", " src=", " href=", "@font-face"] {
            #expect(!page.contains(forbidden), "the page contains \(forbidden)")
        }
        (manifest, report, rows) = Self.take(groups: 120, cameras: 3, events: events)
        let withEvent = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
        #expect(!withEvent.contains("href="))
    }

    @Test func longTakeIsDownsampledToASmallPage() {
        let groups: Int64 = 100_000
        let dups = Set(stride(from: Int64(500), to: groups, by: 997))
        let (manifest, report, rows) = Self.take(groups: groups, cameras: 16, dups: dups)
        let page = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
        #expect(page.utf8.count < 3_000_000, "the page is \(page.utf8.count) bytes")
        let error = Self.svg("error", in: page)
        #expect(Self.count("<polyline", in: error) == 16)
        // No series has more than two points per bucket.
        for line in error.components(separatedBy: "<polyline").dropFirst() {
            let points = line.components(separatedBy: "points=\"")[1].prefix { $0 != "\"" }
            #expect(points.split(separator: " ").count <= 2 * SyncReportPage.maxBuckets)
        }
    }

    @Test func p99LineIsWhereTheReportSays() throws {
        let (manifest, report, rows) = Self.take(groups: 400, cameras: 6)
        let traces = SyncReportPage.traces(manifest: manifest, rows: rows)
        let spreads = SyncReportPage.spreadPerGroup(Array(rows.values))
        let plot = SyncReportPage.spreadPlot(manifest, report: report, traces: traces, spreads: spreads)
        let y = SVGPlot.f(plot.py(Double(report.spreadMicroseconds.p99)))
        let page = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
        let spread = Self.svg("spread", in: page)
        #expect(spread.contains("<line class=\"p99\" x1=\"\(SVGPlot.f(plot.plotLeft))\" x2=\"\(SVGPlot.f(plot.plotRight))\" y1=\"\(y)\" y2=\"\(y)\""))
        #expect(spread.contains("p99 \(report.spreadMicroseconds.p99) µs"))
        // And the value it marks sits inside the plot box, above p50.
        #expect(plot.py(Double(report.spreadMicroseconds.p99)) >= plot.plotTop)
        #expect(plot.py(Double(report.spreadMicroseconds.p99)) <= plot.py(Double(report.spreadMicroseconds.p50)))
    }

    @Test func emptyTakeDoesNotCrash() {
        let (manifest, report, _) = Self.take(groups: 0, cameras: 3)
        for rows in [[:], ["node-0/cam0": []]] as [[String: [FrameRow]]] {
            let page = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
            #expect(Self.count("<svg", in: page) == 4)
            #expect(page.contains("frames.csv is missing"))
            for bad in ["\"nan", "\"inf", "\"-nan", "\"-inf", ",nan", ",inf", " nan", " inf"] {
                #expect(!page.contains(bad), "the page holds \(bad)")
            }
        }
        let (none, noReport, _) = Self.take(groups: 0, cameras: 0)
        let page = SyncReportPage.html(manifest: none, report: noReport, rows: [:])
        #expect(Self.count("<svg", in: page) == 4)
    }

    /// A frames.csv is parsed, not trusted: absurd figures must not stop the page (or `coord report`).
    @Test func absurdRowsDoNotCrash() {
        var (manifest, report, rows) = Self.take(groups: 20, cameras: 2)
        rows["node-0/cam0"]! += [FrameRow(frame: 20, group: .max, centerMicroseconds: .min, isDup: false),
                                 FrameRow(frame: 21, group: .min, centerMicroseconds: .max, isDup: true),
                                 FrameRow(frame: 22, group: -5, centerMicroseconds: 0, isDup: false)]
        manifest.events.append(.init(tMicroseconds: .min, node: "node-0", camera: "cam0", kind: "pressure", detail: "x"))
        manifest.clockTrack = [.init(node: "node-0", tMicroseconds: .max, offsetMicroseconds: 0, driftPPM: 0,
                                     uncertaintyMicroseconds: 0, boundMicroseconds: 0)]
        let page = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
        #expect(Self.count("<svg", in: page) == 4)
    }

    @Test func partialTakeSaysWhatIsWrongFirst() {
        var (manifest, report, rows) = Self.take(groups: 90, cameras: 3)
        manifest.status = .partial
        manifest.cameras[2].disabled = true
        rows["node-0/cam1"] = nil
        manifest.events.append(.init(tMicroseconds: Self.t0 + 90 * Self.period, node: "node-1", camera: "cam0", kind: "file-damaged",
                                     detail: "node-1/cam0.mkv did not match its checksum twice."))
        let page = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
        #expect(page.contains("class=\"badge partial\""))
        let verdict = page.components(separatedBy: "<p class=\"verdict bad\">")[1].components(separatedBy: "</p>")[0]
        #expect(verdict.hasPrefix("Partial take: "))
        #expect(verdict.contains("node-0/cam1.frames.csv is missing"))
        #expect(verdict.contains("node-1/cam0 was disabled by the pressure policy"))
        #expect(verdict.contains("node-1/cam0 file-damaged: node-1/cam0.mkv did not match its checksum twice"))
        #expect(verdict.hasSuffix("."))
        // Files first: the operator can act on them.
        #expect(verdict.range(of: "frames.csv is missing")!.lowerBound < verdict.range(of: "disabled")!.lowerBound)
    }

    @Test func clockTrackPlotsOneSeriesPerNodeElseBarsPerCamera() {
        var (manifest, report, rows) = Self.take(groups: 120, cameras: 4)
        let bars = Self.svg("clock", in: SyncReportPage.html(manifest: manifest, report: report, rows: rows))
        #expect(bars.contains("no clock track"))
        #expect(Self.count("<rect", in: bars) >= 4 + 4)
        manifest.clockTrack = (0..<6).flatMap { k in
            ["node-0", "node-1"].map { n in
                TakeManifest.ClockTrackPoint(node: n, tMicroseconds: Self.t0 + Int64(k) * 500_000 - 1_000_000, offsetMicroseconds: 0,
                                             driftPPM: 0, uncertaintyMicroseconds: 5 - Double(k) * 0.5, boundMicroseconds: 45)
            }
        }
        let track = Self.svg("clock", in: SyncReportPage.html(manifest: manifest, report: report, rows: rows))
        #expect(Self.count("<polyline", in: track) == 4, "uncertainty and bound per node")
        #expect(track.contains(">node-0</text>") && track.contains(">node-1</text>"), "one legend entry per node")
        // An estimate every second of an hour's take is downsampled like the frames.
        manifest.clockTrack = (0..<3_600).flatMap { k in
            ["node-0", "node-1"].map { n in
                TakeManifest.ClockTrackPoint(node: n, tMicroseconds: Self.t0 + Int64(k) * 1_000_000, offsetMicroseconds: 0,
                                             driftPPM: 0, uncertaintyMicroseconds: 2 + Double(k % 7) * 0.1, boundMicroseconds: 45)
            }
        }
        let long = Self.svg("clock", in: SyncReportPage.html(manifest: manifest, report: report, rows: rows))
        #expect(Self.count("<polyline", in: long) == 4)
        #expect(long.utf8.count < 120_000, "the clock plot is \(long.utf8.count) bytes")
    }

    @Test func heldDupsAreToldApartFromDroppedOnes() {
        var (manifest, _, rows) = Self.take(groups: 40, cameras: 2)
        // Camera 0 records one group in 2 (a cap) and also lost group 10.
        rows["node-0/cam0"] = (0..<40).map { g in FrameRow(frame: g, group: g, centerMicroseconds: Self.t0 + g * Self.period, isDup: g % 2 == 1 || g == 10) }
        manifest.cameras[0].recordEvery = 2
        manifest.cameras[0].held = 20
        let traces = SyncReportPage.traces(manifest: manifest, rows: rows)
        #expect(traces[0].heldGroups == (0..<20).map { 2 * $0 + 1 })
        #expect(traces[0].droppedGroups == [10])
        #expect(traces[1].heldGroups.isEmpty && traces[1].droppedGroups.isEmpty)
    }

    @Test func writerRendersThePageFromTheCollectedFramesTables() throws {
        let dir = try E2E.makeScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (manifest, report, rows) = Self.take(groups: 30, cameras: 2)
        let (node, camera) = (manifest.cameras[0].node, manifest.cameras[0].camera)
        try FileManager.default.createDirectory(at: dir.appendingPathComponent(node), withIntermediateDirectories: true)
        let csv = ([FramesTable.header] + rows["\(node)/\(camera)"]!.map(FramesTable.line)).joined(separator: "\n") + "\n"
        try csv.write(to: dir.appendingPathComponent("\(node)/\(camera).frames.csv"), atomically: true, encoding: .utf8)
        let writer = TakeDirectoryWriter(directory: dir)
        let read = writer.framesRows(manifest)
        #expect(read.keys.sorted() == ["\(node)/\(camera)"], "the second camera has no frames.csv, so no entry")
        #expect(read["\(node)/\(camera)"] == rows["\(node)/\(camera)"])
        try writer.write(manifest: manifest, report: report)
        let page = try String(contentsOf: dir.appendingPathComponent("sync-report.html"), encoding: .utf8)
        #expect(page == SyncReportPage.html(manifest: manifest, report: report, rows: read))
        #expect(page.contains("\(manifest.cameras[1].node)/\(manifest.cameras[1].camera).frames.csv is missing"))
    }
}
