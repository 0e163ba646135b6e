import Foundation

/// SMPTE non-drop timecode `HH:MM:SS:FF` of a time of day at an integer frame rate: what an editor lines clips up by.
///
/// Above 30 fps SMPTE 12M still counts the frames field 0…29 and marks the field pair; like ffmpeg we write the real
/// frame number instead (0…59 at 60 fps), so the field always counts `0..<fps`. At 100 fps and above the frames field
/// has as many digits as `fps - 1` (ffmpeg's `%02d`).
public struct Timecode: Equatable, Hashable, Sendable, CustomStringConvertible {
    public let hours: Int
    public let minutes: Int
    public let seconds: Int
    public let frames: Int
    public let fps: Int

    /// The timecode for these fields, or nil if a field is out of range (hours 0…23, frames `0..<fps`).
    public init?(hours: Int, minutes: Int, seconds: Int, frames: Int, fps: Int) {
        guard fps >= 1, (0..<24).contains(hours), (0..<60).contains(minutes), (0..<60).contains(seconds),
              (0..<fps).contains(frames) else { return nil }
        self.hours = hours; self.minutes = minutes; self.seconds = seconds; self.frames = frames; self.fps = fps
    }

    /// The time of day of `date` in `timeZone`, its frame the whole frames elapsed in that second (rounded down).
    /// The instant is first rounded to the microsecond, the resolution of the manifest's `start_wallclock`.
    public init(date: Date, fps: Int, timeZone: TimeZone) {
        precondition(fps >= 1, "a timecode needs a positive frame rate")
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
            + Int64(timeZone.secondsFromGMT(for: date)) * 1_000_000
        let day: Int64 = 86_400 * 1_000_000
        let ofDay = ((micros % day) + day) % day
        let second = Int(ofDay / 1_000_000)
        hours = second / 3600
        minutes = second / 60 % 60
        seconds = second % 60
        frames = Int(ofDay % 1_000_000 * Int64(fps) / 1_000_000)
        self.fps = fps
    }

    /// Parses `HH:MM:SS:FF` (non-drop, `:` separators, two digits each but the frames field, which has the digits of
    /// `fps - 1` but at least two); nil for anything else or a field out of range at `fps`.
    public init?(_ text: String, fps: Int) {
        guard fps >= 1 else { return nil }
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        let widths = [2, 2, 2, Self.framesDigits(fps)]
        guard fields.count == 4 else { return nil }
        var values: [Int] = []
        for (field, width) in zip(fields, widths) {
            guard field.count == width, field.allSatisfy({ $0.isASCII && $0.isNumber }), let v = Int(field) else { return nil }
            values.append(v)
        }
        self.init(hours: values[0], minutes: values[1], seconds: values[2], frames: values[3], fps: fps)
    }

    /// Frames since midnight at `fps`: OpenTimelineIO's start time for this timecode.
    public var frameOfDay: Int64 { (Int64(hours) * 3600 + Int64(minutes) * 60 + Int64(seconds)) * Int64(fps) + Int64(frames) }

    /// `HH:MM:SS:FF`.
    public var description: String {
        func pad(_ v: Int, _ w: Int) -> String { let s = String(v); return String(repeating: "0", count: max(0, w - s.count)) + s }
        return "\(pad(hours, 2)):\(pad(minutes, 2)):\(pad(seconds, 2)):\(pad(frames, Self.framesDigits(fps)))"
    }

    /// The integer frame rate of a grid period (`FrameGrid.period(fps:)` rounds it to whole microseconds).
    public static func fps(framePeriodMicroseconds period: Int64) -> Int {
        period > 0 ? max(1, Int((1_000_000 / Double(period)).rounded())) : 1
    }

    private static func framesDigits(_ fps: Int) -> Int { max(2, String(max(fps - 1, 0)).count) }
}
