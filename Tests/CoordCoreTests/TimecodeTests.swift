import Foundation
import Testing
@testable import CoordCore

@Suite struct TimecodeTests {
    let utc = TimeZone(identifier: "UTC")!
    /// 2026-03-12T00:00:00Z.
    let midnight: Int64 = 1_773_273_600

    /// The instant `seconds + micros` after 2026-03-12T00:00:00Z.
    func date(_ seconds: Int64, micros: Int64 = 0) -> Date {
        Date(timeIntervalSince1970: Double(midnight + seconds) + Double(micros) / 1e6)
    }

    @Test func midnightIsAllZeros() {
        let tc = Timecode(date: date(0), fps: 30, timeZone: utc)
        #expect(tc.description == "00:00:00:00")
        #expect(tc.frameOfDay == 0)
    }

    @Test func theLastFrameOfTheDay() {
        let tc = Timecode(date: date(86_399, micros: 999_999), fps: 30, timeZone: utc)
        #expect(tc.description == "23:59:59:29")
        #expect(tc.frameOfDay == 86_400 * 30 - 1)
        // One microsecond later is the next day's first frame.
        #expect(Timecode(date: date(86_400), fps: 30, timeZone: utc).description == "00:00:00:00")
    }

    @Test(arguments: [(25, "13:45:07:12"), (30, "13:45:07:15"), (60, "13:45:07:30")])
    func halfASecondIsHalfTheFrames(fps: Int, expected: String) {
        let tc = Timecode(date: date(13 * 3600 + 45 * 60 + 7, micros: 500_000), fps: fps, timeZone: utc)
        #expect(tc.description == expected)
        #expect(tc.frameOfDay == Int64(13 * 3600 + 45 * 60 + 7) * Int64(fps) + Int64(fps / 2))
    }

    @Test func above30FpsTheFramesFieldCountsEveryFrame() {
        // SMPTE would write 29 and a field flag; we write the real frame number, as ffmpeg does.
        #expect(Timecode(date: date(1, micros: 999_999), fps: 60, timeZone: utc).description == "00:00:01:59")
        #expect(Timecode(date: date(1, micros: 999_999), fps: 50, timeZone: utc).description == "00:00:01:49")
        // At 100 fps and more the field has three digits (ffmpeg's %02d).
        let fast = Timecode(date: date(1, micros: 999_999), fps: 120, timeZone: utc)
        #expect(fast.description == "00:00:01:119")
        #expect(Timecode("00:00:01:119", fps: 120) == fast)
        #expect(Timecode(date: date(1), fps: 120, timeZone: utc).description == "00:00:01:000")
    }

    @Test func theFractionRoundsDownToTheFrameInProgress() {
        // 1/30 s = 33 333.3 µs: frame 1 begins after 33 334 µs.
        #expect(Timecode(date: date(10, micros: 33_333), fps: 30, timeZone: utc).frames == 0)
        #expect(Timecode(date: date(10, micros: 33_334), fps: 30, timeZone: utc).frames == 1)
        // 0.1 s at 30 fps is exactly frame 3, despite the binary fraction of a Date.
        #expect(Timecode(date: date(10, micros: 100_000), fps: 30, timeZone: utc).frames == 3)
        #expect(Timecode(date: date(10, micros: 99_999), fps: 30, timeZone: utc).frames == 2)
        #expect(Timecode(date: date(10, micros: 39_999), fps: 25, timeZone: utc).frames == 0)
        #expect(Timecode(date: date(10, micros: 40_000), fps: 25, timeZone: utc).frames == 1)
    }

    @Test func theTimeOfDayIsTheZonesLocalTime() throws {
        let tokyo = try #require(TimeZone(identifier: "Asia/Tokyo"))   // UTC+9, no daylight saving
        #expect(Timecode(date: date(20 * 3600), fps: 25, timeZone: tokyo).description == "05:00:00:00")
        let newYork = try #require(TimeZone(identifier: "America/New_York"))   // UTC−4 on 2026-03-12 (EDT)
        #expect(Timecode(date: date(3600 + 30 * 60, micros: 500_000), fps: 30, timeZone: newYork).description == "21:30:00:15")
        let fixed = try #require(TimeZone(secondsFromGMT: 5 * 3600 + 30 * 60))
        #expect(Timecode(date: date(0), fps: 30, timeZone: fixed).description == "05:30:00:00")
    }

    @Test(arguments: [(24, 0), (25, 1), (30, 2), (50, 3), (60, 4), (120, 5), (240, 6)])
    func parsingGivesBackWhatWasWritten(fps: Int, seed: Int) {
        var random = SeededRandom(seed: UInt64(seed))
        for _ in 0..<200 {
            let tc = Timecode(date: date(random.int(0...86_399), micros: random.int(0...999_999)), fps: fps, timeZone: utc)
            let parsed = Timecode(tc.description, fps: fps)
            #expect(parsed == tc)
            #expect(parsed?.frameOfDay == tc.frameOfDay)
        }
    }

    @Test(arguments: ["", "1:02:03:04", "01:02:03", "01:02:03:04:05", "24:00:00:00", "00:60:00:00", "00:00:60:00",
                      "00:00:00:30", "00:00:00:99", "01;02;03;04", "01:02:03;04", "01:02:03.04", "aa:bb:cc:dd",
                      "+1:02:03:04", "01:02:03:004", " 01:02:03:04", "01:02:03:04\n", "01:02:03:٤٤"])
    func badStringsAreRejected(text: String) {
        #expect(Timecode(text, fps: 30) == nil)
    }

    @Test func framesMustBeBelowTheRate() {
        #expect(Timecode("10:00:00:24", fps: 25) != nil)
        #expect(Timecode("10:00:00:25", fps: 25) == nil)
        #expect(Timecode("10:00:00:59", fps: 60) != nil)
        #expect(Timecode("10:00:00:60", fps: 60) == nil)
        #expect(Timecode("10:00:00:00", fps: 0) == nil)
        #expect(Timecode(hours: 1, minutes: 2, seconds: 3, frames: 4, fps: 30)?.frameOfDay == Int64((3600 + 120 + 3) * 30 + 4))
    }

    @Test func theGridPeriodGivesBackItsRate() {
        for fps in 1...240 {
            #expect(Timecode.fps(framePeriodMicroseconds: FrameGrid.period(fps: fps)) == fps)
        }
    }
}
