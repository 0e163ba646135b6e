/// Where a microphone's samples lie on the rig timebase: a least-squares line through (sample frame, rig time of
/// its capture) for every buffer, so the device's rate error against the rig clock is measured, not assumed.
public struct SampleClockFit: Sendable {
    /// The first point: sums are kept relative to it so that hours of samples keep full precision.
    private var origin: (frame: Double, time: Double)?
    private var count = 0.0
    private var sumN = 0.0, sumT = 0.0, sumNN = 0.0, sumNT = 0.0
    public let nominalRate: Double

    public init(nominalRate: Int) { self.nominalRate = Double(nominalRate) }

    public var points: Int { Int(count) }

    public mutating func add(frame: Int64, rigTime: Double) {
        if origin == nil { origin = (Double(frame), rigTime) }
        let n = Double(frame) - origin!.frame, t = rigTime - origin!.time
        count += 1; sumN += n; sumT += t; sumNN += n * n; sumNT += n * t
    }

    /// µs per sample frame on the rig clock: measured once the buffers span enough frames to tell, else nominal.
    public var microsecondsPerFrame: Double {
        let spread = count * sumNN - sumN * sumN
        // Under ~half a second of sound the timestamps' noise outweighs any real rate error: keep the nominal rate.
        guard count >= 3, spread > 0, sumNN / count - (sumN / count) * (sumN / count) > pow2(0.15 * nominalRate) else {
            return 1e6 / nominalRate
        }
        return (count * sumNT - sumN * sumT) / spread
    }

    /// The device's rate against the rig clock, ppm: positive when it makes more samples than nominal a second.
    public var rateErrorPPM: Double { (1e6 / (nominalRate * microsecondsPerFrame) - 1) * 1e6 }

    /// The rig time of sample frame `frame` (fractional), nil before the first buffer.
    public func rigTime(ofFrame frame: Double) -> Double? {
        guard let origin, count > 0 else { return nil }
        let b = microsecondsPerFrame
        let a = sumT / count - b * sumN / count
        return origin.time + a + b * (frame - origin.frame)
    }

    /// The (fractional) sample frame captured at rig time `t`, nil before the first buffer.
    public func frame(atRigTime t: Double) -> Double? {
        guard let origin, count > 0 else { return nil }
        let b = microsecondsPerFrame
        let a = sumT / count - b * sumN / count
        return origin.frame + (t - origin.time - a) / b
    }

    private func pow2(_ x: Double) -> Double { x * x }
}

/// Puts a microphone's samples on the rig's sample grid: output frame k is the sound at rig time
/// `start + k / rate`, read from the device's samples through the fit (linear interpolation between the two
/// nearest), so a device whose clock runs fast or slow against the rig still gives a file whose every sample is
/// where its nominal rate says; the file never drifts against the pictures. Mono; pure.
public struct AudioRetimer: Sendable {
    public let rate: Int
    public let startMicroseconds: Int64
    public private(set) var fit: SampleClockFit
    /// Device samples kept for interpolation, the first being device frame `base`.
    private var held: [Int16] = []
    private var base: Int64 = 0
    /// Output frames made so far.
    public private(set) var produced: Int64 = 0
    /// Output frames that fell before the device's first sample or in a gap it reported (silence put there).
    public private(set) var filled: Int64 = 0
    /// |measured − placed| per buffer, µs: the node's own figure of how far the file's sound sits from where its
    /// buffers were stamped (timestamp noise included).
    public private(set) var offsets: [Double] = []

    public init(rate: Int, startMicroseconds: Int64) {
        self.rate = rate
        self.startMicroseconds = startMicroseconds
        fit = SampleClockFit(nominalRate: rate)
    }

    /// The rig time of output frame `k`.
    public func rigTime(ofOutput k: Int64) -> Double { Double(startMicroseconds) + Double(k) * 1e6 / Double(rate) }

    /// Takes one device buffer (its first frame's index and measured rig time).
    public mutating func add(samples: [Int16], firstFrame: Int64, rigTime: Double) {
        if let placed = fit.rigTime(ofFrame: Double(firstFrame)), fit.points >= 50 {
            offsets.append(abs(rigTime - placed))
        }
        fit.add(frame: firstFrame, rigTime: rigTime)
        if held.isEmpty { base = firstFrame }
        let expected = base + Int64(held.count)
        if firstFrame > expected {
            // A gap the device reported (an overrun): silence, so later samples keep their frame numbers.
            held.append(contentsOf: repeatElement(0, count: Int(min(firstFrame - expected, Int64(rate) * 10))))
        }
        if firstFrame >= base + Int64(held.count) || held.isEmpty {
            held.append(contentsOf: samples)
        }
    }

    /// Output frames up to (not including) rig time `until`, as far as the device's samples reach, at most `limit`.
    public mutating func produce(until: Double, limit: Int64 = .max) -> [Int16] {
        var out: [Int16] = []
        let lastHeld = base + Int64(held.count) - 1
        while produced < limit {
            let t = rigTime(ofOutput: produced)
            guard t < until, let x = fit.frame(atRigTime: t) else { break }
            // Wait for the sample after x, unless x is already past everything (then the device is behind).
            if x + 1 > Double(lastHeld) { break }
            let i = Int64(x.rounded(.down))
            if i < base {
                out.append(0)
                filled += 1
            } else {
                let f = x - Double(i)
                let a = Double(held[Int(i - base)]), b = Double(held[Int(i - base + 1)])
                out.append(Int16(clamping: Int((a + (b - a) * f).rounded())))
            }
            produced += 1
        }
        // Keep one sample before the next read point.
        if let t = Optional(rigTime(ofOutput: produced)), let x = fit.frame(atRigTime: t) {
            let keepFrom = Int64(x.rounded(.down)) - 1
            if keepFrom > base {
                let drop = Int(min(keepFrom - base, Int64(held.count)))
                held.removeFirst(drop)
                base += Int64(drop)
            }
        }
        return out
    }

    /// p50 and p99 of the per-buffer offsets, µs (0 when none).
    public var offsetPercentiles: (p50: Double, p99: Double) {
        guard !offsets.isEmpty else { return (0, 0) }
        let s = offsets.sorted()
        func q(_ p: Double) -> Double { s[min(s.count - 1, Int((p * Double(s.count - 1)).rounded()))] }
        return (q(0.5), q(0.99))
    }
}
