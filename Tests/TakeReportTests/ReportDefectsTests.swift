import CoordCore
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
@testable import TakeReport
import Testing

/// Issue 35's four defects of the sync report of a lab take: a spread line across groups no set measured, a zero
/// hardware cost for uncalibrated nodes, no xxh128 for the microphones' files, ppm labels on bars measured in µs.
extension ReportPageTests {
    /// The take's rows as they are now (after a test changed them), reported afresh.
    static func reported(_ manifest: TakeManifest, _ rows: [String: [FrameRow]]) -> SyncReport {
        let inputs = manifest.cameras.map { c in
            SyncReport.Input(node: c.node, camera: c.camera, rows: rows["\(c.node)/\(c.camera)"] ?? [],
                             clockUncertaintyMicroseconds: c.clock.uncertaintyMicroseconds)
        }
        return SyncReport(groups: manifest.groups, grid: FrameGrid(t0: t0, periodMicroseconds: period), inputs: inputs)
    }

    /// Every camera's rows with `unmeasured` groups made dup rows (no set measured them).
    static func take(groups: Int64, unmeasured: (Int64) -> Bool) -> (TakeManifest, SyncReport, [String: [FrameRow]]) {
        var (manifest, _, rows) = take(groups: groups, cameras: 3)
        for key in rows.keys { rows[key] = rows[key]!.map { r in var r = r; r.isDup = unmeasured(r.group); return r } }
        return (manifest, reported(manifest, rows), rows)
    }

    /// The spread series' subpaths as lists of pixel x, and its isolated dots' count.
    static func spreadStrokes(_ page: ParsedPage) throws -> (runs: [[Double]], dots: Int) {
        let spread = try page.plot("spread")
        #expect(try page.elements(".//polyline", in: spread).isEmpty, "the spread is drawn as one path of runs")
        let d = try page.elements(".//path[@class='series']", in: spread).first?.attribute("d") ?? ""
        let runs = d.split(separator: "M").map { sub in
            sub.replacingOccurrences(of: "L", with: " ").split(separator: " ").compactMap { Double($0.split(separator: ",")[0]) }
        }
        let dots = try page.elements(".//path[@class='series-points']", in: spread).first?.attribute("d")?.filter { $0 == "M" }.count ?? 0
        return (runs, dots)
    }

    @Test func spreadDrawsNoLineAcrossGroupsNoSetMeasured() throws {
        // 200 groups in the middle that no camera delivered.
        let gap = Self.take(groups: 400, unmeasured: { (100..<300).contains($0) })
        #expect(gap.1.groupsMeasured == 200)
        let traces = SyncReportPage.traces(manifest: gap.0, rows: gap.2)
        let plot = SyncReportPage.spreadPlot(gap.0, report: gap.1, traces: traces, spreads: SyncReportPage.spreadPerGroup(Array(gap.2.values)))
        let (runs, dots) = try Self.spreadStrokes(Self.page(gap))
        #expect(runs.count == 2 && dots == 0, "one run each side of the gap: \(runs.map(\.count))")
        #expect(runs.first?.first == Double(SVGPlot.f(plot.px(0))) && runs.first?.last == Double(SVGPlot.f(plot.px(99))))
        #expect(runs.last?.first == Double(SVGPlot.f(plot.px(300))) && runs.last?.last == Double(SVGPlot.f(plot.px(399))))
        #expect(!runs.joined().contains { $0 > plot.px(99) + 0.1 && $0 < plot.px(300) - 0.1 }, "nothing drawn across groups 100–299")

        // Nodes throttled to one group in two: every other group measured, none joined to another.
        let throttled = Self.take(groups: 400, unmeasured: { $0 % 2 == 1 })
        #expect(throttled.1.groupsMeasured == 200)
        let alternate = try Self.spreadStrokes(Self.page(throttled))
        #expect(alternate.runs.isEmpty && alternate.dots == 200, "a dot per measured group, no line: \(alternate.runs.count) runs")
    }

    @Test func frameCentreLinesDrawNothingAcrossAStretchNoFrameMeasured() throws {
        let gap = Self.take(groups: 400, unmeasured: { (100..<300).contains($0) })
        let page = try Self.page(gap)
        let plot = SyncReportPage.errorPlot(gap.0, traces: SyncReportPage.traces(manifest: gap.0, rows: gap.2))
        let lines = try page.elements(".//polyline", in: page.plot("error"))
        #expect(lines.count == 2 * 3, "each camera's line in two runs, one each side of the gap")
        let xs = lines.flatMap { ($0.attribute("points") ?? "").split(separator: " ").compactMap { Double($0.split(separator: ",")[0]) } }
        #expect(!xs.isEmpty && !xs.contains { $0 > plot.px(99) + 0.1 && $0 < plot.px(300) - 0.1 }, "nothing drawn across groups 100–299")
    }

    @Test func gappedRunsJoinNeighboursOnlyEvenWhenDownsampled() {
        // Few points: as they are, split at every gap.
        let few = SVGPlot.gappedRuns([(x: 5, y: 1), (x: 1, y: 2), (x: 2, y: 3), (x: 3, y: 1)], over: 0...10, buckets: 1000, maxGap: 1)
        #expect(few.map { $0.map(\.x) } == [[1, 2, 3], [5]])
        // Many: each slice's min–max, slices joined only across neighbouring groups.
        let dense = (0..<100_000).map { (x: Double($0), y: Double($0 % 7)) }
        #expect(SVGPlot.gappedRuns(dense, over: 0...100_000, buckets: 1000, maxGap: 1).count == 1)
        let holed = dense.filter { !(40_000..<40_200).contains($0.x) }
        let two = SVGPlot.gappedRuns(holed, over: 0...100_000, buckets: 1000, maxGap: 1)
        #expect(two.count == 2 && two[0].last!.x < 40_000 && two[1].first!.x > 40_200)
        let everyOther = dense.filter { Int($0.x) % 2 == 0 }
        let apart = SVGPlot.gappedRuns(everyOther, over: 0...100_000, buckets: 1000, maxGap: 1)
        #expect(apart.count == 1000 && apart.allSatisfy { run in run.allSatisfy { $0.x == run[0].x } },
                "each slice its own min–max stroke, never joined to the next")
        #expect(apart.flatMap { $0.map(\.y) }.max() == 6 && apart.flatMap { $0.map(\.y) }.min() == 0)
    }

    static func uncalibratedNote(_ node: String) -> String {
        "node \(node) is not calibrated: its encoding and disk write are not counted (run coord-node calibrate on it)."
    }

    @Test func uncalibratedNodesHaveNoCostButNotCalibrated() throws {
        typealias B = TakeManifest.BudgetSummary
        var (manifest, report, rows) = Self.take(groups: 30, cameras: 4)
        // Every node uncalibrated (the lab's throttled nodes): the budget counted nothing, its 0 is no figure.
        manifest.budget = B(cost: 0, longestSeconds: nil, nodes: ["node-0", "node-1"].map {
            B.Node(node: $0, cost: 0, loads: [], longestSeconds: nil, notes: [Self.uncalibratedNote($0)])
        }, changes: [])
        var page = try Self.page((manifest, report, rows))
        #expect(try page.only("//p/b").stringValue == "not calibrated")
        let headline = try page.only("//p[b]").stringValue ?? ""
        #expect(!headline.contains("0.00") && headline.contains("Nodes node-0 and node-1 are not calibrated"), "\(headline)")
        var budget = try page.rows(ofTable: "budget")
        #expect(budget.filter { $0.count == 5 }.map { [$0[0], $0[4]] } == [["node-0", "not calibrated"], ["node-1", "not calibrated"]])
        #expect(!budget.joined().contains("0.00"))

        // One calibrated, one not: the rig's figure is the calibrated node's, and the page says what it leaves out.
        manifest.budget = B(cost: 0.4, longestSeconds: 3_600, nodes: [
            B.Node(node: "node-0", cost: 0.4, loads: [B.Load(resource: "encoding", demand: 1.6e8, capacity: 4e8, unit: "pixels/s", cost: 0.4)],
                   longestSeconds: 3_600, notes: []),
            B.Node(node: "node-1", cost: 0.02, loads: [B.Load(resource: "bus usb1 (usb3)", demand: 1e7, capacity: 5e8, unit: "bytes/s", cost: 0.02)],
                   longestSeconds: nil, notes: [Self.uncalibratedNote("node-1")]),
        ], changes: [])
        page = try Self.page((manifest, report, rows))
        #expect(try page.only("//p/b").stringValue == "0.40")
        #expect(try page.only("//p/span[@class='uncounted']").stringValue?.hasPrefix("Node node-1 is not calibrated") == true)
        budget = try page.rows(ofTable: "budget")
        #expect(budget.filter { $0.count == 5 }.map { [$0[0], $0[1], $0[4]] } == [
            ["node-0", "encoding", "0.40"], ["node-1", "encoding and disk write", "not calibrated"], ["node-1", "bus usb1 (usb3)", "0.02"],
        ])
    }

    static let hashes = ["0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "00112233445566778899aabbccddeeff"]

    /// Two microphones, both collected with their checksums.
    static func withSound(_ take: (TakeManifest, SyncReport, [String: [FrameRow]]), rates: [Double] = [-20.19, 48.35])
        -> (TakeManifest, SyncReport, [String: [FrameRow]]) {
        var take = take
        take.0.audio = rates.enumerated().map { i, rate in
            var a = TakeManifest.Audio(node: "node-\(i)", mic: "mic0", sampleRate: 48_000, channels: 1, startMicroseconds: t0,
                                       frames: 48_000, avOffsetMicroseconds: .init(p50: 19.2 + Double(i), p99: 75.4 + Double(i)), rateErrorPPM: rate)
            a.sha256 = String(repeating: "a", count: 64)
            a.bytes = 97_351
            a.xxh128 = hashes[i]
            return a
        }
        return take
    }

    @Test func everyMicrophoneFileHasItsXXH128() throws {
        var take = Self.withSound(Self.take(groups: 30, cameras: 2))
        take.0.cameras[0].files[0].xxh128 = Self.hashes[2]
        // No checksums passed beside the manifest: the page takes the manifest's own.
        let files = try Self.page(take).rows(ofTable: "files")
        #expect(files.first { $0[0] == "node-0/mic0.mka" }?.last == Self.hashes[0])
        #expect(files.first { $0[0] == "node-1/mic0.mka" }?.last == Self.hashes[1])
        #expect(files.first { $0[0] == "node-0/cam0.mkv" }?.last == Self.hashes[2])
        #expect(files.first { $0[0] == "node-0/cam0.frames.csv" }?.last == "-", "a file without one")
        // The manifest's audio entry carries it beside sha256; an older manifest's has none.
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(take.0)) as? [String: Any]
        let audio = json?["audio"] as? [[String: Any]] ?? []
        #expect(audio.map { $0["xxh128"] as? String } == [Self.hashes[0], Self.hashes[1]] && audio.allSatisfy { $0["sha256"] is String })
        var older = take.0
        older.audio = older.audio?.map { var a = $0; a.xxh128 = nil; return a }
        let decoded = try JSONDecoder().decode(TakeManifest.self, from: JSONEncoder().encode(older))
        #expect(decoded.audio?.allSatisfy { $0.xxh128 == nil } == true)
        let olderJSON = try JSONSerialization.jsonObject(with: JSONEncoder().encode(older)) as? [String: Any]
        #expect((olderJSON?["audio"] as? [[String: Any]] ?? []).allSatisfy { $0["xxh128"] == nil && $0["sha256"] is String })
        #expect(try JSONDecoder().decode(TakeManifest.self, from: JSONEncoder().encode(take.0)) == take.0)
    }

    @Test func eachAxisIsLabelledInItsOwnUnit() throws {
        let page = try Self.page(Self.withSound(Self.take(groups: 30, cameras: 2)))
        let sound = try page.only("//svg[@class='sound']")
        // The A/V offset in µs and the rate error in ppm, each on a panel of its own with its own axis.
        let offset = try page.only(".//g[@class='panel offset']", in: sound), rate = try page.only(".//g[@class='panel rate']", in: sound)
        #expect(try page.only(".//text[@class='axis-label']", in: offset).stringValue?.contains("(µs)") == true)
        #expect(try page.only(".//text[@class='axis-label']", in: rate).stringValue?.contains("(ppm)") == true)
        #expect(try !page.texts(".//text", in: offset).joined().contains("ppm"), "no ppm on the µs axis")
        #expect(try !page.texts(".//text", in: rate).joined().contains("µs"), "no µs on the ppm axis")
        #expect(try page.texts(".//text", in: rate).filter { $0.hasSuffix(" ppm") } == ["-20.2 ppm", "+48.4 ppm"], "each figure on the ppm panel")
        #expect(try page.texts("text", in: sound).allSatisfy { !$0.contains("ppm") && !$0.contains("µs") }, "names only outside the panels")
        // Every bar lies on its own panel's axis, which holds the value it draws.
        let (offsetPanel, ratePanel) = SyncReportPage.soundPanels(Self.withSound(Self.take(groups: 1, cameras: 1)).0.audio!, names: 110, width: 1000)
        #expect(offsetPanel.right < ratePanel.left)
        #expect(offsetPanel.axis.high >= 76.4 && ratePanel.axis.low <= -20.19 && ratePanel.axis.high >= 48.35)
        func span(_ e: XMLElement) -> (Double, Double) {
            let x = Double(e.attribute("x") ?? "") ?? .nan
            return (x, x + (Double(e.attribute("width") ?? "") ?? .nan))
        }
        let offsetBars = try page.elements(".//rect", in: offset).map(span), rateBars = try page.elements(".//rect", in: rate).map(span)
        #expect(offsetBars.count == 2 && rateBars.count == 2)
        let ticks = { (g: XMLElement) in try page.elements(".//line", in: g).compactMap { Double($0.attribute("x1") ?? "") } }
        let (offsetTicks, rateTicks) = (try ticks(offset), try ticks(rate))
        #expect(offsetBars.allSatisfy { $0.0 >= offsetTicks.min()! - 0.1 && $0.1 <= rateTicks.min()! }, "µs bars on the µs panel")
        #expect(rateBars.allSatisfy { $0.0 >= offsetTicks.max()! && $0.0 >= rateTicks.min()! - 0.1 }, "ppm bars on the ppm panel")
    }

    @Test func timeAxesNameTheirUnitAndWriteItOneWay() throws {
        // 20 minutes of groups: every tick in m:ss, the axis titles saying so.
        var (manifest, report, rows) = Self.take(groups: 36_000, cameras: 2)
        manifest.clockTrack = (0..<1_210).map { k in
            TakeManifest.ClockTrackPoint(node: "node-0", tMicroseconds: Self.t0 + Int64(k) * 1_000_000, offsetMicroseconds: 0,
                                         driftPPM: 0, uncertaintyMicroseconds: 2, boundMicroseconds: 40)
        }
        let page = try Self.page((manifest, report, rows))
        let mss = /−?\d+:\d\d/
        for name in ["error", "spread", "timeline"] {
            let plot = try page.plot(name)
            #expect(try page.texts(".//text[@font-weight='600']", in: plot).contains { $0.hasSuffix("time since t0 (m:ss)") }, "\(name)")
            let seconds = try page.texts(".//text[@font-size='11'][@fill='#888']", in: plot)
            #expect(!seconds.isEmpty && seconds.allSatisfy { $0.wholeMatch(of: mss) != nil }, "\(name): \(seconds)")
        }
        let clock = try page.plot("clock")
        #expect(try page.texts(".//text[@font-weight='600']", in: clock).contains("time since t0 (m:ss); each estimate holds until the next"))
        let plot = SyncReportPage.clockPlot(manifest, traces: SyncReportPage.traces(manifest: manifest, rows: rows))
        #expect(plot.x.ticks.count >= 4 && plot.x.ticks.map(plot.xTickLabel).allSatisfy { $0.wholeMatch(of: mss) != nil },
                "\(plot.x.ticks.map(plot.xTickLabel))")
        // A short take: seconds.
        let short = try Self.page(Self.take(groups: 90, cameras: 2))
        #expect(try short.texts(".//text[@font-weight='600']", in: short.plot("spread")).contains { $0.hasSuffix("time since t0 (s)") })
        _ = report
    }
}
