import Foundation

/// SMPTE timecode `HH:MM:SS:FF` of a time of day: what an editor lines clips up by. At 29.97 and 59.94 it is
/// drop-frame, `HH:MM:SS;FF`: labels 00 and 01 (00…03 at 59.94) are skipped at the start of every minute but each
/// tenth, so the labels keep up with the clock (CONTRACT §13); at 23.976 it counts 24 a second, non-drop.
///
/// Above 30 fps SMPTE 12M still counts the frames field 0…29 and marks the field pair; like ffmpeg we write the real
/// frame number instead (0…59 at 60 fps), so the field always counts `0..<fps`. At 100 fps and above the frames field
/// has as many digits as `fps - 1` (ffmpeg's `%02d`).
public struct Timecode: Equatable, Hashable, Sendable, CustomStringConvertible {
    public let hours: Int
    public let minutes: Int
    public let seconds: Int
    public let frames: Int
    /// The frames counted a second (30 at 29.97).
    public let fps: Int
    /// Drop-frame counting (29.97, 59.94).
    public let dropFrame: Bool

    /// The timecode for these fields, or nil if a field is out of range (hours 0…23, frames `0..<fps`, no label
    /// drop-frame skips).
    public init?(hours: Int, minutes: Int, seconds: Int, frames: Int, fps: Int, dropFrame: Bool = false) {
        guard fps >= 1, (0..<24).contains(hours), (0..<60).contains(minutes), (0..<60).contains(seconds),
              (0..<fps).contains(frames) else { return nil }
        if dropFrame {
            guard fps % 30 == 0, !(seconds == 0 && minutes % 10 != 0 && frames < Self.dropped(fps)) else { return nil }
        }
        self.hours = hours; self.minutes = minutes; self.seconds = seconds; self.frames = frames; self.fps = fps
        self.dropFrame = dropFrame
    }

    /// The label of frame `frame` since midnight at `rate` (drop-frame at 29.97 and 59.94); a day's worth of labels
    /// wraps to 00:00:00:00.
    public init(frameOfDay frame: Int64, rate: FrameRate) {
        let base = Int64(rate.nominal)
        var n = frame
        if rate.isDropFrame {
            let drop = Int64(Self.dropped(Int(base)))
            let perTenMinutes = 600 * base - 9 * drop, perMinute = 60 * base - drop
            n = ((n % (144 * perTenMinutes)) + 144 * perTenMinutes) % (144 * perTenMinutes)
            let tens = n / perTenMinutes, rest = n % perTenMinutes
            n += 9 * drop * tens + (rest >= drop ? drop * ((rest - drop) / perMinute) : 0)
        } else {
            n = ((n % (86_400 * base)) + 86_400 * base) % (86_400 * base)
        }
        let second = Int(n / base)
        hours = second / 3600; minutes = second / 60 % 60; seconds = second % 60
        frames = Int(n % base); fps = Int(base); dropFrame = rate.isDropFrame
    }

    /// The time of day of `date` in `timeZone` at `rate`: the frames begun since midnight (frame k at k × D / N s),
    /// labelled as `init(frameOfDay:rate:)` does. The instant is first rounded to the microsecond.
    public init(date: Date, rate: FrameRate, timeZone: TimeZone) {
        if rate.isInteger { self.init(date: date, fps: rate.numerator, timeZone: timeZone); return }
        let ofDay = Self.microsecondsOfDay(date, timeZone: timeZone)
        self.init(frameOfDay: Int64(Int128(ofDay) * Int128(rate.numerator) / (1_000_000 * Int128(rate.denominator))), rate: rate)
    }

    /// Microseconds since midnight of `date` in `timeZone` (the instant rounded to the microsecond).
    public static func microsecondsOfDay(_ date: Date, timeZone: TimeZone) -> Int64 {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
            + Int64(timeZone.secondsFromGMT(for: date)) * 1_000_000
        let day: Int64 = 86_400 * 1_000_000
        return ((micros % day) + day) % day
    }

    /// Labels skipped at each minute but every tenth in drop-frame: 2 at 29.97, 4 at 59.94.
    static func dropped(_ fps: Int) -> Int { fps / 15 }

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
        dropFrame = false
    }

    /// Parses `HH:MM:SS:FF` (non-drop, `:` separators, two digits each but the frames field, which has the digits of
    /// `fps - 1` but at least two); nil for anything else or a field out of range at `fps`.
    public init?(_ text: String, fps: Int) {
        guard fps >= 1 else { return nil }
        self.init(text, fps: fps, dropFrame: false)
    }

    /// Parses the timecode of `rate`: `HH:MM:SS;FF` at 29.97 and 59.94, `HH:MM:SS:FF` at any other.
    public init?(_ text: String, rate: FrameRate) {
        self.init(text, fps: rate.nominal, dropFrame: rate.isDropFrame)
    }

    private init?(_ text: String, fps: Int, dropFrame: Bool) {
        guard fps >= 1 else { return nil }
        let fields = text.split(separator: ":", omittingEmptySubsequences: false).flatMap { field -> [Substring] in
            guard dropFrame else { return [field] }
            return field.split(separator: ";", omittingEmptySubsequences: false)
        }
        // Drop-frame has its one `;` before the frames and nowhere else.
        guard !dropFrame || (text.filter { $0 == ";" }.count == 1 && text.split(separator: ";").last?.contains(":") == false) else { return nil }
        let widths = [2, 2, 2, Self.framesDigits(fps)]
        guard fields.count == 4 else { return nil }
        var values: [Int] = []
        for (field, width) in zip(fields, widths) {
            guard field.count == width, field.allSatisfy({ $0.isASCII && $0.isNumber }), let v = Int(field) else { return nil }
            values.append(v)
        }
        self.init(hours: values[0], minutes: values[1], seconds: values[2], frames: values[3], fps: fps, dropFrame: dropFrame)
    }

    /// Frames since midnight: OpenTimelineIO's start time for this timecode (drop-frame's skipped labels not counted).
    public var frameOfDay: Int64 {
        let labels = (Int64(hours) * 3600 + Int64(minutes) * 60 + Int64(seconds)) * Int64(fps) + Int64(frames)
        guard dropFrame else { return labels }
        let totalMinutes = Int64(hours) * 60 + Int64(minutes)
        return labels - Int64(Self.dropped(fps)) * (totalMinutes - totalMinutes / 10)
    }

    /// `HH:MM:SS:FF`, or `HH:MM:SS;FF` in drop-frame.
    public var description: String {
        func pad(_ v: Int, _ w: Int) -> String { let s = String(v); return String(repeating: "0", count: max(0, w - s.count)) + s }
        return "\(pad(hours, 2)):\(pad(minutes, 2)):\(pad(seconds, 2))\(dropFrame ? ";" : ":")\(pad(frames, Self.framesDigits(fps)))"
    }

    /// The integer frame rate of a grid period (`FrameGrid.period(fps:)` rounds it to whole microseconds).
    public static func fps(framePeriodMicroseconds period: Int64) -> Int {
        period > 0 ? max(1, Int((1_000_000 / Double(period)).rounded())) : 1
    }

    private static func framesDigits(_ fps: Int) -> Int { max(2, String(max(fps - 1, 0)).count) }
}
