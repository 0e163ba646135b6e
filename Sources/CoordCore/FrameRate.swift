/// A frame rate as the rational `numerator / denominator` frames a second (CONTRACT §13): `30` is 30/1, NTSC's
/// 29.97 is 30000/1001. Always in lowest terms, so 30000/1000 is the integer rate 30.
public struct FrameRate: Hashable, Sendable, CustomStringConvertible, Codable {
    public let numerator: Int
    public let denominator: Int

    /// The highest rate the rig accepts anywhere (`take.fps`, `--fps`, a camera's rate).
    public static let highest = 240
    /// The NTSC decimals an operator may write for their rationals.
    public static let decimals: [String: FrameRate] = [
        "23.976": FrameRate(checked: 24000, 1001), "29.97": FrameRate(checked: 30000, 1001), "59.94": FrameRate(checked: 60000, 1001),
    ]

    /// An integer rate.
    public init(_ fps: Int) {
        precondition(fps >= 1, "a frame rate must be positive")
        numerator = fps; denominator = 1
    }

    /// `numerator / denominator` reduced to lowest terms; nil unless both are positive.
    public init?(numerator: Int, denominator: Int) {
        guard numerator >= 1, denominator >= 1 else { return nil }
        self.init(checked: numerator, denominator)
    }

    private init(checked numerator: Int, _ denominator: Int) {
        var a = numerator, b = denominator
        while b != 0 { (a, b) = (b, a % b) }
        self.numerator = numerator / a; self.denominator = denominator / a
    }

    /// Reads an integer (`30`), a rational (`30000/1001`) or an NTSC decimal (`29.97`, `23.976`, `59.94`) between
    /// 1 and 240 fps; otherwise one sentence naming `field` and what it got.
    public static func parse(_ text: String, field: String) -> Result<FrameRate, FrameRateProblem> {
        let shown = text.count > 32 ? String(text.prefix(32)) + "…" : text
        let fail = FrameRateProblem("\(field) must be a whole number between 1 and \(highest), N/D such as 30000/1001, or one of 23.976, 29.97, 59.94 (got \"\(shown)\").")
        let trimmed = text
        if let decimal = decimals[trimmed] { return .success(decimal) }
        let parts = trimmed.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count),
              parts.allSatisfy({ (1...9).contains($0.count) && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let n = Int(parts[0]), let d = parts.count == 2 ? Int(parts[1]) : 1,
              let rate = FrameRate(numerator: n, denominator: d), rate.isWithinRigLimits else { return .failure(fail) }
        return .success(rate)
    }

    /// 1 … 240 frames a second.
    public var isWithinRigLimits: Bool { numerator >= denominator && numerator <= Self.highest * denominator }

    public var isInteger: Bool { denominator == 1 }

    /// The rate as a Double (29.97002997…).
    public var value: Double { Double(numerator) / Double(denominator) }

    /// The whole rate nearest to it (30 for 29.97): the timecode's frame count a second, the budget's whole rate.
    public var nominal: Int { max(1, (numerator + denominator / 2) / denominator) }

    /// One frame, rounded to whole microseconds (the manifest's `frame_period_us`).
    public var periodMicroseconds: Int64 {
        (1_000_000 * Int64(denominator) + Int64(numerator) / 2) / Int64(numerator)
    }

    /// One frame in microseconds, unrounded (33 366.67 at 29.97): a sensor's period.
    public var exactPeriodMicroseconds: Double { 1_000_000 * Double(denominator) / Double(numerator) }

    /// SMPTE drop-frame timecode is counted at 29.97 and 59.94 (CONTRACT §13).
    public var isDropFrame: Bool { denominator == 1001 && (numerator == 30000 || numerator == 60000) }

    /// The instant of frame `k` after an origin, in µs: round(k × 10⁶ × D / N), exact over any length of take.
    public func microseconds(ofFrame k: Int64) -> Int64 {
        let num = Int128(k) * 1_000_000 * Int128(denominator)
        let n = Int128(numerator)
        // Round half up, for negative k too.
        let twice = 2 * num + n
        let q = twice >= 0 ? twice / (2 * n) : -((-twice + 2 * n - 1) / (2 * n))
        return Int64(q)
    }

    /// The frames whose instants (`microseconds(ofFrame:)`) are at or before `micros`: floor(micros × N / (10⁶ × D)),
    /// corrected for the rounding of the instants.
    public func framesElapsed(atMicroseconds micros: Int64) -> Int64 {
        let num = Int128(micros) * Int128(numerator)
        let den = Int128(1_000_000) * Int128(denominator)
        var k = Int64(num >= 0 ? num / den : -((-num + den - 1) / den))
        while microseconds(ofFrame: k + 1) <= micros { k += 1 }
        while microseconds(ofFrame: k) > micros { k -= 1 }
        return k
    }

    /// `30` or `30000/1001`.
    public var description: String { isInteger ? String(numerator) : "\(numerator)/\(denominator)" }

    /// A rational frame rate's JSON: an integer rate stays a number, any other is the string `"N/D"` (CONTRACT §13).
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let whole = try? c.decode(Int.self) {
            guard let rate = FrameRate(numerator: whole, denominator: 1) else {
                throw DecodingError.dataCorruptedError(in: c, debugDescription: "a frame rate must be positive (got \(whole))")
            }
            self = rate
            return
        }
        let text = try c.decode(String.self)
        switch Self.parse(text, field: "fps") {
        case .success(let rate): self = rate
        case .failure(let problem): throw DecodingError.dataCorruptedError(in: c, debugDescription: problem.sentence)
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        if isInteger { try c.encode(numerator) } else { try c.encode(description) }
    }
}

/// What is wrong with a frame rate, as one sentence naming its flag or key.
public struct FrameRateProblem: Error, Equatable, Sendable, CustomStringConvertible {
    public let sentence: String
    public init(_ sentence: String) { self.sentence = sentence }
    public var description: String { sentence }
}
