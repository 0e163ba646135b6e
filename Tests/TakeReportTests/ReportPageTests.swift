import CoordCore
import Foundation
@testable import TakeReport
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

    static let titles = ["Frame-centre error per camera", "Spread per group", "Clock uncertainty per node", "Drops and events"]

    static func page(_ take: (TakeManifest, SyncReport, [String: [FrameRow]])) throws -> ParsedPage {
        try ParsedPage(SyncReportPage.html(manifest: take.0, report: take.1, rows: take.2))
    }

    @Test func pageHasFourPlotsWithOneSeriesPerCamera() throws {
        let (manifest, report, rows) = Self.take(groups: 300, cameras: 4, dups: [10, 11, 200])
        let page = try Self.page((manifest, report, rows))
        #expect(try page.plots.map { $0.attribute("class") } == ["plot error", "plot spread", "plot clock", "plot timeline"])
        let error = try page.plot("error")
        let series = try page.elements(".//polyline", in: error)
        #expect(series.count == 4)
        for (i, c) in manifest.cameras.enumerated() {
            #expect(series.filter { $0.attribute("stroke") == SyncReportPage.palette[i] }.count == 1, "camera \(i)'s series")
            #expect(try page.texts(".//text", in: error).contains("\(c.node)/\(c.camera)"), "camera \(i) in the legend")
        }
        #expect(try Array(page.texts("//h2").prefix(4)) == Self.titles)
        let badge = try page.only("//h1/span[starts-with(@class, 'badge ')]")
        #expect(badge.attribute("class") == "badge complete" && badge.stringValue == "complete")
        // The dups of camera 0 make a problem sentence and marks in its lane.
        #expect(try page.verdict.contains("3 frames dropped (node-0/cam0 3)"))
        #expect(try page.elements(".//path[@fill='\(SyncReportPage.palette[0])']", in: page.plot("timeline")).count >= 1)
        // One table row per camera, in the manifest's order, with the camera's series colour on its chip.
        let cameraRows = try page.elements("//table[@class='cameras']/tr[td]")
        #expect(cameraRows.count == manifest.cameras.count)
        for (i, (row, c)) in zip(cameraRows, manifest.cameras).enumerated() {
            #expect(try page.texts("td", in: row).prefix(2) == [c.node, c.camera])
            #expect(try page.only("td/span[@class='chip']", in: row).attribute("style") == "background:\(SyncReportPage.palette[i])")
        }
        #expect(try page.rows(ofTable: "events") == [["no events"]])
    }

    @Test func eventsAreListedAndMarkedOneEach() throws {
        let events = [
            TakeManifest.Event(tMicroseconds: Self.t0, node: "", camera: "", kind: "start", detail: "all 4 camera(s) start at group 0"),
            TakeManifest.Event(tMicroseconds: Self.t0, node: "node-0", camera: "cam0", kind: "dup", detail: "3 dup rows"),
            TakeManifest.Event(tMicroseconds: Self.t0 + 50 * Self.period, node: "node-1", camera: "", kind: "pressure", detail: "thermal"),
            TakeManifest.Event(tMicroseconds: Self.t0 + 90 * Self.period, node: "", camera: "", kind: "stop", detail: "all stop"),
        ]
        let page = try Self.page(Self.take(groups: 90, cameras: 4, events: events))
        let rows = try page.rows(ofTable: "events")
        #expect(rows.count == events.count)
        // Summary kinds (dup, held) are listed but not numbered, nor marked on the timeline.
        #expect(rows.map { $0[0] } == ["1", "", "2", "3"])
        #expect(rows.map { $0[4] } == events.map(\.kind.rawValue))
        #expect(rows.map { $0[5] } == events.map(\.detail))
        #expect(rows[2][1] == "1.667 s" && rows[2][2] == "node-1")
        let markers = try page.texts(".//g/title", in: page.plot("timeline"))
        #expect(markers.count == 3)
        #expect(markers.map { $0.components(separatedBy: " ")[0] } == ["#1", "#2", "#3"])
        #expect(markers[1].hasSuffix("node-1 pressure: thermal"))
    }

    @Test func paletteHasSixteenDistinctColours() {
        #expect(Set(SyncReportPage.palette).count >= 16)
    }

    @Test func escapesNamesAndEventDetails() throws {
        let events = [TakeManifest.Event(tMicroseconds: Self.t0 + 40 * Self.period, node: "node-<b>", camera: "cam0",
                                         kind: "pressure", detail: "<script>alert('x')</script> & more")]
        let (manifest, report, rows) = Self.take(groups: 60, cameras: 2, events: events,
                                                 camera: { $0 == 0 ? "<script>evil()</script>" : "cam1" })
        let html = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
        #expect(!html.lowercased().contains("<script"))
        #expect(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more"))
        #expect(html.contains("&lt;script&gt;evil()&lt;/script&gt;"))
        #expect(!html.contains("node-<b>"))
        let page = try ParsedPage(html)
        #expect(try page.elements("//script | //b").isEmpty, "no element made from the names or the detail")
        #expect(try page.rows(ofTable: "events").map { Array($0[2...]) } == [["node-<b>", "cam0", "pressure", "<script>alert('x')</script> & more"]])
        #expect(try page.rows(ofTable: "cameras").map { $0[1] } == ["<script>evil()</script>", "cam1"])
        #expect(try page.texts(".//text", in: page.plot("error")).contains("node-0/<script>evil()</script>"), "the legend")
    }

    /// A camera name or event detail holding markup or `&` is text wherever the page shows it: in the tables,
    /// the plots' legends and lanes, the markers' tooltips and the verdict.
    @Test func markupInNamesAndDetailsStaysText() throws {
        let camera = "<script>&</script>"  // short enough that its lane label is not clipped
        let detail = "node-0/a&b.mkv <i>did not</i> match & \"its\" checksum"
        let events = [TakeManifest.Event(tMicroseconds: Self.t0 + 10 * Self.period, node: "node-0", camera: camera,
                                         kind: "file-damaged", detail: detail)]
        var (manifest, report, rows) = Self.take(groups: 30, cameras: 2, events: events, camera: { $0 == 0 ? camera : "cam1" })
        manifest.status = .partial
        manifest.takeID = "take-<&>"
        let page = try Self.page((manifest, report, rows))
        #expect(try page.elements("//script | //i").isEmpty)
        #expect(try page.only("/html/head/title").stringValue == "coord sync report: take-<&> (partial)")
        #expect(try page.only("//h1").stringValue == "partialTake take-<&>")
        #expect(try page.rows(ofTable: "cameras")[0][1] == camera)
        #expect(try page.rows(ofTable: "events")[0][3] == camera)
        #expect(try page.rows(ofTable: "events")[0][5] == detail)
        #expect(try page.verdict.contains("node-0/\(camera) file-damaged: \(detail)"))
        let key = "node-0/\(camera)"
        #expect(try page.texts(".//text", in: page.plot("error")).contains(key))
        #expect(try page.texts(".//text", in: page.plot("timeline")).contains(key), "the camera's lane")
        #expect(try page.texts(".//g/title", in: page.plot("timeline")).first?.hasSuffix("\(key) file-damaged: \(detail)") == true)
    }

    @Test func loadsNothingFromAnywhere() throws {
        let events = [TakeManifest.Event(tMicroseconds: Self.t0, node: "", camera: "", kind: "start", detail: "see http://example.com")]
        var (manifest, report, rows) = Self.take(groups: 120, cameras: 3, events: events)
        manifest.events = []  // an event's detail is the operator's text, not a reference; check the page's own markup
        let html = SyncReportPage.html(manifest: manifest, report: report, rows: rows)
        for forbidden in ["http:", "https:", "//", "<script", "<link", "<img", "<iframe", "@import", "url(", " src=", " href=", "@font-face"] {
            #expect(!html.lowercased().contains(forbidden), "the page contains \(forbidden)")
        }
        (manifest, report, rows) = Self.take(groups: 120, cameras: 3, events: events)
        let withEvent = try Self.page((manifest, report, rows))
        #expect(!withEvent.source.contains("href="))
        let plain = try ParsedPage(html)
        for page in [plain, withEvent] {
            let foreign = ["script", "link", "img", "iframe", "object", "embed", "image", "use", "foreignObject"]
            #expect(try page.elements(foreign.map { "//\($0)" }.joined(separator: " | ")).isEmpty)
            #expect(try page.document.nodes(forXPath: "//@src | //@href").isEmpty)
            // The only style is the inline one, which refers to nothing.
            let style = try page.texts("//style")
            #expect(style.count == 1 && !style[0].contains("url(") && !style[0].contains("@import"))
        }
    }

    @Test func longTakeIsDownsampledToASmallPage() throws {
        let groups: Int64 = 100_000
        let dups = Set(stride(from: Int64(500), to: groups, by: 997))
        let page = try Self.page(Self.take(groups: groups, cameras: 16, dups: dups))
        #expect(page.source.utf8.count < 3_000_000, "the page is \(page.source.utf8.count) bytes")
        let series = try page.elements(".//polyline", in: page.plot("error"))
        #expect(series.count == 16)
        #expect(Set(series.compactMap { $0.attribute("stroke") }) == Set(SyncReportPage.palette))
        // No series has more than two points per bucket.
        for line in series {
            #expect((line.attribute("points") ?? "").split(separator: " ").count <= 2 * SyncReportPage.maxBuckets)
        }
    }

    @Test func p99LineIsWhereTheReportSays() throws {
        let (manifest, report, rows) = Self.take(groups: 400, cameras: 6)
        let traces = SyncReportPage.traces(manifest: manifest, rows: rows)
        let spreads = SyncReportPage.spreadPerGroup(Array(rows.values))
        let plot = SyncReportPage.spreadPlot(manifest, report: report, traces: traces, spreads: spreads)
        let y = SVGPlot.f(plot.py(Double(report.spreadMicroseconds.p99)))
        let page = try Self.page((manifest, report, rows))
        let spread = try page.plot("spread")
        let line = try page.only(".//line[@class='p99']", in: spread)
        #expect(["x1", "x2", "y1", "y2"].map { line.attribute($0) } == [SVGPlot.f(plot.plotLeft), SVGPlot.f(plot.plotRight), y, y])
        #expect(try page.texts(".//text", in: spread).contains("p99 \(report.spreadMicroseconds.p99) µs"))
        // And the value it marks sits inside the plot box, above p50.
        #expect(plot.py(Double(report.spreadMicroseconds.p99)) >= plot.plotTop)
        #expect(plot.py(Double(report.spreadMicroseconds.p99)) <= plot.py(Double(report.spreadMicroseconds.p50)))
    }

    /// Every coordinate attribute in the page's plots is a finite number.
    static func coordinatesAreFinite(_ page: ParsedPage) throws -> Bool {
        let geometry: Set<String> = ["x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "width", "height", "points", "d", "viewBox", "transform"]
        let values = try page.plots.flatMap { svg in
            try page.elements("descendant-or-self::*", in: svg).flatMap { ($0.attributes ?? []).filter { geometry.contains($0.name ?? "") } }
        }.map { ($0.stringValue ?? "").lowercased() }
        return !values.isEmpty && values.allSatisfy { !$0.contains("nan") && !$0.contains("inf") }
    }

    @Test func emptyTakeDoesNotCrash() throws {
        let (manifest, report, _) = Self.take(groups: 0, cameras: 3)
        for rows in [[:], ["node-0/cam0": []]] as [[String: [FrameRow]]] {
            let page = try Self.page((manifest, report, rows))
            #expect(try page.plots.count == 4)
            #expect(try page.verdict.contains("frames.csv is missing"))
            for bad in ["\"nan", "\"inf", "\"-nan", "\"-inf", ",nan", ",inf", " nan", " inf"] {
                #expect(!page.source.contains(bad), "the page holds \(bad)")
            }
            #expect(try Self.coordinatesAreFinite(page))
        }
        let (none, noReport, _) = Self.take(groups: 0, cameras: 0)
        let page = try Self.page((none, noReport, [:]))
        #expect(try page.plots.count == 4)
        #expect(try page.rows(ofTable: "cameras").isEmpty)
    }

    /// A frames.csv is parsed, not trusted: absurd figures must not stop the page (or `coord report`).
    @Test func absurdRowsDoNotCrash() throws {
        var (manifest, report, rows) = Self.take(groups: 20, cameras: 2)
        rows["node-0/cam0"]! += [FrameRow(frame: 20, group: .max, centerMicroseconds: .min, isDup: false),
                                 FrameRow(frame: 21, group: .min, centerMicroseconds: .max, isDup: true),
                                 FrameRow(frame: 22, group: -5, centerMicroseconds: 0, isDup: false)]
        manifest.events.append(.init(tMicroseconds: .min, node: "node-0", camera: "cam0", kind: "pressure", detail: "x"))
        manifest.clockTrack = [.init(node: "node-0", tMicroseconds: .max, offsetMicroseconds: 0, driftPPM: 0,
                                     uncertaintyMicroseconds: 0, boundMicroseconds: 0)]
        let page = try Self.page((manifest, report, rows))
        #expect(try page.plots.count == 4)
    }

    @Test func partialTakeSaysWhatIsWrongFirst() throws {
        var (manifest, report, rows) = Self.take(groups: 90, cameras: 3)
        manifest.status = .partial
        manifest.cameras[2].disabled = true
        rows["node-0/cam1"] = nil
        manifest.events.append(.init(tMicroseconds: Self.t0 + 90 * Self.period, node: "node-1", camera: "cam0", kind: "file-damaged",
                                     detail: "node-1/cam0.mkv did not match its checksum twice."))
        let page = try Self.page((manifest, report, rows))
        #expect(try page.only("//h1/span").attribute("class") == "badge partial")
        #expect(try page.only("//p[starts-with(@class, 'verdict ')]").attribute("class") == "verdict bad")
        let verdict = try page.verdict
        #expect(verdict.hasPrefix("Partial take: "))
        #expect(verdict.contains("node-0/cam1.frames.csv is missing"))
        #expect(verdict.contains("node-1/cam0 was disabled by the pressure policy"))
        #expect(verdict.contains("node-1/cam0 file-damaged: node-1/cam0.mkv did not match its checksum twice"))
        #expect(verdict.hasSuffix("."))
        // Files first: the operator can act on them.
        #expect(verdict.range(of: "frames.csv is missing")!.lowerBound < verdict.range(of: "disabled")!.lowerBound)
        // The tables say the same per camera: the missing file, the disabled camera greyed.
        let cameraRows = try page.elements("//table[@class='cameras']/tr[td]")
        #expect(try cameraRows.map { try page.texts("td", in: $0).last ?? "" } == ["", "frames.csv missing", "disabled"])
        #expect(cameraRows.map { $0.attribute("class") } == ["", "", "off"])
    }

    @Test func clockTrackPlotsOneSeriesPerNodeElseBarsPerCamera() throws {
        var (manifest, report, rows) = Self.take(groups: 120, cameras: 4)
        var page = try Self.page((manifest, report, rows))
        let bars = try page.plot("clock")
        #expect(try page.only("title", in: bars).stringValue?.contains("no clock track") == true)
        #expect(try page.elements(".//rect", in: bars).count >= 4 + 4)
        #expect(try page.elements("//p[@class='note'][contains(., 'Every clock estimate')]").isEmpty)
        manifest.clockTrack = (0..<6).flatMap { k in
            ["node-0", "node-1"].map { n in
                TakeManifest.ClockTrackPoint(node: n, tMicroseconds: Self.t0 + Int64(k) * 500_000 - 1_000_000, offsetMicroseconds: 0,
                                             driftPPM: 0, uncertaintyMicroseconds: 5 - Double(k) * 0.5, boundMicroseconds: 45)
            }
        }
        page = try Self.page((manifest, report, rows))
        let track = try page.plot("clock")
        #expect(try page.elements(".//polyline", in: track).count == 4, "uncertainty and bound per node")
        let labels = try page.texts(".//text", in: track)
        #expect(labels.contains("node-0") && labels.contains("node-1"), "one legend entry per node")
        #expect(try page.elements("//p[@class='note'][contains(., 'Every clock estimate')]").count == 1)
        // An estimate every second of an hour's take is downsampled like the frames.
        manifest.clockTrack = (0..<3_600).flatMap { k in
            ["node-0", "node-1"].map { n in
                TakeManifest.ClockTrackPoint(node: n, tMicroseconds: Self.t0 + Int64(k) * 1_000_000, offsetMicroseconds: 0,
                                             driftPPM: 0, uncertaintyMicroseconds: 2 + Double(k % 7) * 0.1, boundMicroseconds: 45)
            }
        }
        page = try Self.page((manifest, report, rows))
        let long = try page.plot("clock")
        #expect(try page.elements(".//polyline", in: long).count == 4)
        #expect(long.xmlString.utf8.count < 120_000, "the clock plot is \(long.xmlString.utf8.count) bytes")
    }

    @Test func aWidenedBoundIsSaidBesideTheClockPlot() throws {
        var take = Self.take(groups: 30, cameras: 2)
        #expect(try Self.page(take).elements("//p[@class='note clock-note']").isEmpty)
        take.1.clockNote = "clock updates stopped before the end of the take (n1 9.5 s before it, the coordinator gone or the node unreachable): the bound allows 2.0 ppm of unseen drift since each node's last update"
        let note = try Self.page(take).only("//p[@class='note clock-note']").stringValue ?? ""
        #expect(note.hasPrefix("Clock updates stopped before the end") && note.contains("n1 9.5 s"), "\(note)")
    }

    @Test func budgetTableHighlightsLoadedRows() throws {
        var (manifest, report, rows) = Self.take(groups: 30, cameras: 2)
        typealias B = TakeManifest.BudgetSummary
        manifest.budget = B(cost: 0.86, longestSeconds: 5_400, nodes: [
            B.Node(node: "node-0", cost: 0.86, loads: [B.Load(resource: "encoding", demand: 3.4e8, capacity: 4e8, unit: "pixels/s", cost: 0.85),
                                                       B.Load(resource: "disk <write>", demand: 5e8, capacity: 4e8, unit: "bytes/s", cost: 1.25)],
                   longestSeconds: nil, notes: ["calibration is 3 days old & stale"]),
        ], changes: ["node-0/cam1 capped to 15 fps", "<none> & more"])
        let page = try Self.page((manifest, report, rows))
        #expect(try page.only("//p[b]").stringValue?.contains("longest take the nodes sustain: \(Budget.duration(5_400))") == true)
        #expect(try page.only("//p/b").stringValue == "0.86")
        let budget = try page.elements("//table[@class='budget']/tr[td]")
        #expect(budget.map { $0.attribute("class") } == ["hot", "over", nil])
        #expect(try page.texts("td", in: budget[0]) == ["node-0", "encoding", "340.0 Mpx/s", "400.0 Mpx/s", "0.85"])
        #expect(try page.texts("td", in: budget[1])[1] == "disk <write>")
        #expect(try page.texts("td", in: budget[2]) == ["node-0", "calibration is 3 days old & stale"])
        #expect(try page.texts("//ul/li") == ["node-0/cam1 capped to 15 fps", "<none> & more"])
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
}
