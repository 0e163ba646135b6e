import Foundation
import Testing
@testable import CoordCore

@Suite struct FrameRateTests {
    func rate(_ text: String) -> FrameRate? { try? FrameRate.parse(text, field: "--fps").get() }

    @Test(arguments: [("30", 30, 1), ("1", 1, 1), ("240", 240, 1), ("30000/1001", 30000, 1001), ("24000/1001", 24000, 1001),
                      ("60000/1001", 60000, 1001), ("29.97", 30000, 1001), ("23.976", 24000, 1001), ("59.94", 60000, 1001),
                      ("30/1", 30, 1), ("30000/1000", 30, 1), ("50/2", 25, 1), ("48000/1001", 48000, 1001)])
    func goodRatesParse(text: String, numerator: Int, denominator: Int) throws {
        let parsed = try #require(rate(text))
        #expect(parsed.numerator == numerator && parsed.denominator == denominator)
    }

    @Test(arguments: ["", "0", "-30", "241", "30.0", "29.970", "29,97", "30000/0", "0/1001", "1/2", "30000/1001/1",
                      "/1001", "30000/", " 30", "30 ", "+30", "3e1", "nan", "inf", "١٢", "99999999999999999999",
                      "240001/1000", "30000\u{0}/1001", "29.97.1", String(repeating: "9", count: 500)])
    func hostileRatesAreOneSentence(text: String) {
        guard case .failure(let problem) = FrameRate.parse(text, field: "take.fps") else {
            Issue.record("\(text.debugDescription) was taken as a frame rate"); return
        }
        #expect(problem.sentence.hasPrefix("take.fps must be a whole number between 1 and 240, N/D such as 30000/1001"))
        #expect(problem.sentence.count < 220)
    }

    @Test func figuresOfNTSCRates() throws {
        let ntsc = try #require(rate("29.97"))
        #expect(ntsc.description == "30000/1001" && ntsc.nominal == 30 && ntsc.isDropFrame && !ntsc.isInteger)
        #expect(ntsc.periodMicroseconds == 33_367)
        #expect(try #require(rate("59.94")).periodMicroseconds == 16_683)
        #expect(try #require(rate("23.976")).periodMicroseconds == 41_708)
        #expect(try #require(rate("23.976")).isDropFrame == false)
        #expect(FrameRate(30).periodMicroseconds == FrameGrid.period(fps: 30))
        #expect(FrameRate(30).description == "30")
    }

    @Test func jsonKeepsIntegersNumbers() throws {
        let encoded = try JSONEncoder().encode([FrameRate(25), try #require(rate("29.97"))])
        #expect(String(decoding: encoded, as: UTF8.self) == #"[25,"30000\/1001"]"#)
        #expect(try JSONDecoder().decode([FrameRate].self, from: encoded) == [FrameRate(25), try #require(rate("29.97"))])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([FrameRate].self, from: Data(#"["30/0"]"#.utf8)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([FrameRate].self, from: Data("[0]".utf8)) }
    }

    /// 24 h of groups at 29.97: every instant is the exact rational rounded, so the grid never drifts, and the
    /// nearest group of every instant is its own group.
    @Test func theExactGridDoesNotDriftOverADay() throws {
        let ntsc = try #require(rate("30000/1001"))
        let grid = FrameGrid(t0: 5_000_000, rate: ntsc)
        let day = Int64(86_400) * 30_000 / 1001
        var g: Int64 = 0
        while g <= day {
            let exact = Double(g) * 1_000_000 * 1001 / 30_000
            let instant = grid.instant(ofGroup: g) - 5_000_000
            #expect(abs(Double(instant) - exact) <= 0.5)
            #expect(grid.nearestGroup(to: grid.instant(ofGroup: g)) == g)
            g += g < 1_000 ? 1 : 997
        }
        // A day of groups is 86 400 s minus nothing: 2 589 410 groups take 86 399.99 s, where the rounded period would be 0.86 s late.
        #expect(abs(grid.instant(ofGroup: day) - 5_000_000 - Int64(Double(day) * 1_001_000_000 / 30_000)) <= 1)
        #expect(day * 33_367 - (grid.instant(ofGroup: day) - 5_000_000) > 800_000)
        // Half way between groups goes to the later; just before it, the earlier; before t0 too.
        let mid = (grid.instant(ofGroup: 10) + grid.instant(ofGroup: 11) + 1) / 2
        #expect(grid.nearestGroup(to: mid + 1) == 11)
        #expect(grid.nearestGroup(to: mid - 1) == 10)
        #expect(grid.nearestGroup(to: grid.instant(ofGroup: -7) + 3) == -7)
        #expect(grid.phaseError(of: grid.instant(ofGroup: 1_000_000) - 12) == -12)
    }

    /// A camera recording one group in 3 at 29.97 runs a coarse grid that stays on the fine grid's groups all day,
    /// and a source starts aligned at the unrounded period.
    @Test func aCappedCameraAndASourceAnchorFollowTheExactGrid() throws {
        let fine = FrameGrid(t0: 1_000_000, rate: try #require(rate("30000/1001")))
        let coarse = GroupStride(every: 3, anchor: 7).coarseGrid(of: fine)
        for n in stride(from: Int64(0), through: 900_000, by: 1_003) {
            #expect(abs(coarse.instant(ofGroup: n) - fine.instant(ofGroup: 7 + 3 * n)) <= 1)
        }
        let anchor = FrameCentres.anchor(of: fine, group: 0, mapping: ClockMapping(offsetMicroseconds: 0))
        #expect(abs(anchor.periodMicroseconds - 1_001_000.0 / 30) < 1e-6)
    }

    @Test func aManifestGivesBackItsGrid() throws {
        var manifest = TakeManifest(takeID: "t", name: "t", status: .complete, t0Microseconds: 5_000, framePeriodMicroseconds: 33_367,
                                    groups: 90, startWallclock: "", cameras: [], events: [])
        #expect(manifest.grid == FrameGrid(t0: 5_000, periodMicroseconds: 33_367) && manifest.rate == FrameRate(30))
        var camera = TakeManifest.Camera(node: "n", camera: "c", ordinal: 0, width: 64, height: 64, fps: 30, codec: "mjpeg", frames: 90,
                                         dropped: 0, clock: .init(offsetMicroseconds: 0, driftPPM: 0, uncertaintyMicroseconds: 0), files: [])
        camera.rate = try #require(rate("29.97"))
        manifest.cameras = [camera]
        #expect(manifest.grid == FrameGrid(t0: 5_000, rate: try #require(rate("30000/1001"))))
        let json = try JSONEncoder().encode(manifest)
        #expect(try JSONDecoder().decode(TakeManifest.self, from: json).cameras[0].rate.description == "30000/1001")
    }

    @Test func anIntegerRateKeepsThePeriodGrid() {
        let grid = FrameGrid(t0: 0, rate: FrameRate(30))
        #expect(grid == FrameGrid(t0: 0, periodMicroseconds: 33_333))
        #expect(grid.instant(ofGroup: 3) == 99_999)
        #expect(grid.rate == FrameRate(30))
        #expect(FrameGrid(t0: 0, rate: FrameRate(numerator: 60000, denominator: 1001)!).rate.description == "60000/1001")
    }
}

@Suite struct DropFrameTimecodeTests {
    let ntsc = FrameRate(numerator: 30000, denominator: 1001)!
    let ntsc60 = FrameRate(numerator: 60000, denominator: 1001)!

    func label(_ frame: Int64, _ rate: FrameRate) -> String { Timecode(frameOfDay: frame, rate: rate).description }

    @Test func theMinuteSkipsTwoLabels() {
        #expect(label(1799, ntsc) == "00:00:59;29")
        #expect(label(1800, ntsc) == "00:01:00;02")
        #expect(label(0, ntsc) == "00:00:00;00")
        #expect(label(1, ntsc) == "00:00:00;01")
        #expect(label(1800 + 1798 - 1, ntsc) == "00:01:59;29")
        #expect(label(1800 + 1798, ntsc) == "00:02:00;02")
    }

    @Test func everyTenthMinuteKeepsItsLabels() {
        #expect(label(17_981, ntsc) == "00:09:59;29")
        #expect(label(17_982, ntsc) == "00:10:00;00")
        #expect(label(17_983, ntsc) == "00:10:00;01")
        #expect(label(17_982 + 1798 + 2, ntsc) == "00:11:00;02")
        #expect(label(6 * 17_982, ntsc) == "01:00:00;00")
        // The last label of the day, then the day's first again.
        #expect(label(144 * 17_982 - 1, ntsc) == "23:59:59;29")
        #expect(label(144 * 17_982, ntsc) == "00:00:00;00")
    }

    @Test func at5994FourLabelsAreSkipped() {
        #expect(label(3599, ntsc60) == "00:00:59;59")
        #expect(label(3600, ntsc60) == "00:01:00;04")
        #expect(label(35_964, ntsc60) == "00:10:00;00")
    }

    @Test func labelsReadBackToTheirFrame() {
        var random = SeededRandom(seed: 40)
        for rate in [ntsc, ntsc60, FrameRate(numerator: 24000, denominator: 1001)!, FrameRate(25)] {
            for _ in 0..<500 {
                let frame = Int64(random.int(0...2_000_000))
                let tc = Timecode(frameOfDay: frame, rate: rate)
                let parsed = Timecode(tc.description, rate: rate)
                #expect(parsed == tc)
                #expect(parsed?.frameOfDay == frame)
            }
        }
    }

    @Test(arguments: ["00:01:00;00", "00:01:00;01", "00:01:00:02", "00;01;00;02", "00:01;00:02", "00:00:00;30", "00:00:00;0"])
    func labelsDropFrameSkipsOrMisspellsAreRefused(text: String) {
        #expect(Timecode(text, rate: ntsc) == nil)
    }

    @Test func at23976TheLabelsCount24NonDrop() {
        let film = FrameRate(numerator: 24000, denominator: 1001)!
        #expect(label(24 * 60, film) == "00:01:00:00")
        #expect(Timecode("00:01:00;00", rate: film) == nil)
    }

    @Test func theTimeOfDayIsCountedInFramesOfTheRate() {
        let utc = TimeZone(identifier: "UTC")!
        // 2026-03-12T00:01:00Z: 60 s is 1798.2 frames at 29.97, so frame 1798 is in progress: 00:00:59;28 + 1... label of frame 1798.
        let date = Date(timeIntervalSince1970: 1_773_273_600 + 60)
        #expect(Timecode(date: date, rate: ntsc, timeZone: utc) == Timecode(frameOfDay: 1798, rate: ntsc))
        // Frame 3 begins at 100.1 ms: 100 099 µs is still frame 2.
        #expect(Timecode(date: Date(timeIntervalSince1970: 1_773_273_600.100_099), rate: ntsc, timeZone: utc).frames == 2)
        #expect(Timecode(date: Date(timeIntervalSince1970: 1_773_273_600.100_101), rate: ntsc, timeZone: utc).frames == 3)
        #expect(Timecode(date: date, rate: FrameRate(30), timeZone: utc).description == "00:01:00:00")
    }
}
