import Foundation
import Testing
@testable import CoordCore

@Suite struct TimeOfDayFrameTests {
    let rates = ["24", "25", "30", "50", "60", "24000/1001", "30000/1001", "60000/1001", "15", "7"].map {
        try! FrameRate.parse($0, field: "rate").get()
    }

    /// Group 0 placed after any instant of the day lands within a µs of a frame of the time of day, less than a
    /// frame later, and its timecode label is that frame (not the one before).
    @Test func groupZeroLandsOnAFrameOfTheTimeOfDay() {
        var random = SeededRandom(seed: 7)
        let utc = TimeZone(identifier: "UTC")!
        let midnight = 1_773_273_600.0
        for rate in rates {
            for _ in 0..<300 {
                let ofDay = Int64(random.int(0...86_399_000_000))
                let delay = TimeOfDayFrame.delay(after: ofDay, rate: rate)
                #expect(delay >= 0 && Double(delay) < rate.exactPeriodMicroseconds + 1)
                let placed = ofDay + delay
                #expect(TimeOfDayFrame.distance(of: placed, rate: rate) < 1, "\(rate) \(ofDay)")
                // The label of the placed instant is the frame that begins there.
                let date = Date(timeIntervalSince1970: midnight + Double(placed) / 1e6)
                let label = Timecode(date: date, rate: rate, timeZone: utc)
                let frame = (Double(placed) * rate.value / 1e6).rounded()
                #expect(label == Timecode(frameOfDay: Int64(frame), rate: rate), "\(rate) \(placed)")
            }
        }
    }

    @Test func anInstantOnAFrameStaysPut() {
        #expect(TimeOfDayFrame.delay(after: 0, rate: FrameRate(30)) == 0)
        #expect(TimeOfDayFrame.delay(after: 1_000_000, rate: FrameRate(30)) == 0)
        // 1001/30000 s is 33 366.67 µs: the boundary is taken at the next whole µs.
        let ntsc = FrameRate(numerator: 30000, denominator: 1001)!
        #expect(TimeOfDayFrame.delay(after: 1, rate: ntsc) == 33_366)
        #expect(TimeOfDayFrame.delay(after: 33_367, rate: ntsc) == 0)
        #expect(TimeOfDayFrame.delay(after: 33_366, rate: ntsc) == 1)
        // Half a frame off is what the take used to risk.
        #expect(abs(TimeOfDayFrame.distance(of: 16_683, rate: ntsc) - 16_683) < 1)
    }

    @Test func chronyTrackingGivesTheOffsetAndItsBound() {
        let text = """
        Reference ID    : C0A80001 (192.168.0.1)
        Stratum         : 3
        System time     : 0.000012345 seconds slow of NTP time
        Last offset     : -0.000001234 seconds
        Root delay      : 0.001000000 seconds
        Root dispersion : 0.000250000 seconds
        Leap status     : Normal
        """
        let service = ChronyTracking.parse(text)
        #expect(service.source == "chrony")
        #expect(service.offsetMicroseconds == -12.3)
        #expect(service.boundMicroseconds == 762.3)
    }

    @Test(arguments: ["", "506 Cannot talk to daemon", "System time     : lots seconds fast of NTP time",
                      "System time : 0.1 seconds fast of NTP time\nLeap status : Not synchronised"])
    func anythingElseIsUnknownNeverAFailure(text: String) {
        let service = ChronyTracking.parse(text)
        #expect(service.source == "unknown" && service.offsetMicroseconds == nil && service.detail != nil)
    }
}
