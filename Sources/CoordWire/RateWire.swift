import CoordCore

/// Rational frame rates on the wire (CONTRACT §13): `fps_num / fps_den` beside the whole `fps` or the rounded
/// `frame_period_us` an older peer reads; `fps_den` 0 or 1 (an older peer) means the integer rate.
extension Wire {
    /// The non-integer rate `num / den` a message carries, nil when it carries none (den 0 or 1); or why it cannot
    /// be one: a rate outside 1…1000 fps, or one whose rounded period is not the message's `period` (when given).
    public static func rationalRate(num: UInt32, den: UInt32, period: UInt64?, _ field: String) throws(NodeFailure) -> FrameRate? {
        guard den > 1 else { return nil }
        guard den <= 1_000_000, let rate = FrameRate(numerator: Int(num), denominator: Int(den)),
              rate.numerator >= rate.denominator, rate.numerator <= 1_000 * rate.denominator else {
            throw NodeFailure(.badConfig, "\(field) \(num)/\(den) is not a frame rate between 1 and 1000 fps.")
        }
        if let period, UInt64(rate.periodMicroseconds) != period {
            throw NodeFailure(.badConfig, "\(field) \(num)/\(den) does not run one frame every \(period) µs (it runs every \(rate.periodMicroseconds) µs).")
        }
        return rate.isInteger ? nil : rate
    }

    /// The grid a message's t0, period and rate give.
    static func grid(t0: Int64, period: UInt64, num: UInt32, den: UInt32, _ field: String) throws(NodeFailure) -> FrameGrid {
        var grid = FrameGrid(t0: t0, periodMicroseconds: Int64(period))
        grid.rationalRate = try rationalRate(num: num, den: den, period: period, field)
        return grid
    }

    /// `fps_num`/`fps_den` of a grid: its rational, else 0/0 (an older peer's message).
    public static func rateFields(_ rate: FrameRate?) -> (num: UInt32, den: UInt32) {
        guard let rate, !rate.isInteger else { return (0, 0) }
        return (UInt32(rate.numerator), UInt32(rate.denominator))
    }
}
