/// Group 0 on a frame of the time of day (CONTRACT §13): a separate sound recorder jam-synced to timecode labels
/// the same instants, so group 0's label is its start, not a fraction of a frame before it.
public enum TimeOfDayFrame {
    /// How long after an instant whose local time of day is `microsecondsOfDay` the next frame boundary of the time
    /// of day at `rate` comes (frame k at k × D / N s after midnight, rounded up to the µs); 0 on a boundary.
    public static func delay(after microsecondsOfDay: Int64, rate: FrameRate) -> Int64 {
        let n = Int128(rate.numerator), d = Int128(rate.denominator) * 1_000_000
        let t = Int128(microsecondsOfDay)
        guard t > 0 else { return 0 }
        // The first frame k whose boundary, ceil(k × 10⁶ D / N), is at or after t: k > (t − 1) × N / (10⁶ D).
        let frame = (t - 1) * n / d + 1
        let boundary = (frame * d + n - 1) / n
        return Int64(boundary - t)
    }

    /// How far `microsecondsOfDay` is from its nearest frame boundary of the time of day at `rate` (µs, ≥ 0).
    public static func distance(of microsecondsOfDay: Int64, rate: FrameRate) -> Double {
        let frames = Double(microsecondsOfDay) * Double(rate.numerator) / (1e6 * Double(rate.denominator))
        return abs(frames - frames.rounded()) * rate.exactPeriodMicroseconds
    }
}

/// The coordinator's wall clock against its time service, read from `chronyc tracking`'s text.
public enum ChronyTracking {
    /// The figures of `chronyc tracking` output ("System time : 0.000012 seconds fast of NTP time", "Root delay",
    /// "Root dispersion"), or why there are none.
    public static func parse(_ text: String) -> TakeManifest.WallclockService {
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let key = line[..<colon].trimmingSpaces, value = line[line.index(after: colon)...].trimmingSpaces
            fields[key] = value
        }
        func seconds(_ key: String) -> Double? {
            guard let value = fields[key], let first = value.split(separator: " ").first, let s = Double(first), s.isFinite else { return nil }
            return s
        }
        guard let system = seconds("System time"), let words = fields["System time"] else {
            return .init(source: "unknown", detail: "chronyc tracking gave no system time")
        }
        // "fast of NTP time": the wall clock is ahead; "slow": behind.
        let offset = words.contains("slow") ? -system : system
        let leap = fields["Leap status"]
        if let leap, leap.lowercased().contains("not synchronised") {
            return .init(source: "unknown", detail: "chrony is not synchronised")
        }
        let bound = seconds("Root delay").flatMap { delay in seconds("Root dispersion").map { delay / 2 + $0 } }
        func micros(_ s: Double) -> Double { (s * 1e7).rounded() / 10 }
        return .init(source: "chrony", offsetMicroseconds: micros(offset), boundMicroseconds: bound.map { micros($0 + abs(offset)) })
    }
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
    }
}
