/// SplitMix64: a small deterministic generator, so a demo's `--seed` reproduces its draws.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A normally distributed value (Box–Muller).
    public mutating func gaussian(standardDeviation: Double) -> Double {
        guard standardDeviation > 0 else { return 0 }
        let u1 = Double.random(in: Double.ulpOfOne..<1, using: &self)
        let u2 = Double.random(in: 0..<1, using: &self)
        return standardDeviation * (-2 * _log(u1)).squareRoot() * _cos(2 * Double.pi * u2)
    }
}

// Pure-Swift log/cos so the core needs no libc.
@inline(__always) private func _log(_ x: Double) -> Double {
    // log(x) = 2·atanh((x−1)/(x+1)), series converges for x in (0, 1].
    var m = x, e = 0.0
    while m < 0.5 { m *= 2; e -= 1 }
    while m > 1 { m /= 2; e += 1 }
    let y = (m - 1) / (m + 1), y2 = y * y
    var term = y, sum = 0.0, k = 1.0
    for _ in 0..<40 { sum += term / k; term *= y2; k += 2 }
    return 2 * sum + e * 0.693_147_180_559_945_3
}

@inline(__always) private func _cos(_ x: Double) -> Double {
    var r = x.truncatingRemainder(dividingBy: 2 * Double.pi)
    if r > Double.pi { r -= 2 * Double.pi }
    if r < -Double.pi { r += 2 * Double.pi }
    let r2 = r * r
    var term = 1.0, sum = 1.0
    for i in 1..<20 { term *= -r2 / Double((2 * i - 1) * (2 * i)); sum += term }
    return sum
}
