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

    /// The fit as it stands, for mapping many times at once: frame = `frame0 + (t − time0) / microsecondsPerFrame`.
    public var line: (frame0: Double, time0: Double, microsecondsPerFrame: Double)? {
        guard let origin, count > 0 else { return nil }
        let b = microsecondsPerFrame
        let a = sumT / count - b * sumN / count
        return (origin.frame, origin.time + a, b)
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
    /// A uniform sample of them (at most `offsetSample` entries, reservoir sampling), so the percentiles of an
    /// hours-long take cost the same as a minute's.
    public private(set) var offsets: [Double] = []
    public static let offsetSample = 20_000
    private var offsetCount = 0
    private var reservoirState: UInt64 = 0x9E37_79B9_7F4A_7C15

    public init(rate: Int, startMicroseconds: Int64) {
        self.rate = rate
        self.startMicroseconds = startMicroseconds
        fit = SampleClockFit(nominalRate: rate)
    }

    /// The rig time of output frame `k`.
    public func rigTime(ofOutput k: Int64) -> Double { Double(startMicroseconds) + Double(k) * 1e6 / Double(rate) }

    /// Times the fit started over because the device's stamps moved for good (see `add`).
    public private(set) var restarts = 0
    /// Stamps far off the fit, in a row: a late read is skipped, a lasting shift restarts the fit.
    private var strays: [(frame: Int64, time: Double)] = []
    /// How far off the fit a stamp may be before it is not believed (µs): at least this, and at least five times
    /// the stamps' own scatter about the fit (a sound server's delivery wanders by milliseconds); and how many in a
    /// row make a new regime.
    public static let strayMicroseconds = 2_000.0
    public static let straysForRestart = 20
    /// Mean squared residual of the stamps the fit took (µs²), for the stray threshold.
    private var scatter = SampleStats()
    public var strayThreshold: Double { max(Self.strayMicroseconds, 5 * scatter.rms) }

    /// Takes one device buffer (its first frame's index and measured rig time).
    ///
    /// A stamp more than 2 ms off the fit is not used: a read that returned late (the thread was not scheduled)
    /// would otherwise bend the line. When 20 in a row (200 ms) agree with each other but not with the fit, the
    /// device's stamps have moved for good (ALSA's pulse plugin reports a half-second delay at start, then none): the
    /// fit starts over from them, but only before the first sample is written; after that the samples are one
    /// continuous stream and the mapping must not jump, so stamps that moved are skipped.
    public mutating func add(samples: [Int16], firstFrame: Int64, rigTime: Double) {
        if let placed = fit.rigTime(ofFrame: Double(firstFrame)), fit.points >= 20, abs(rigTime - placed) > strayThreshold {
            strays.append((firstFrame, rigTime))
            // Once sound is written the stream is continuous: its mapping may not jump, so strays are only skipped.
            if produced > 0 { strays.removeAll(keepingCapacity: true) }
            if strays.count >= Self.straysForRestart {
                fit = SampleClockFit(nominalRate: rate)
                for p in strays { fit.add(frame: p.frame, rigTime: p.time) }
                strays = []
                offsets = []
                offsetCount = 0
                scatter = SampleStats()
                restarts += 1
            }
        } else {
            if let placed = fit.rigTime(ofFrame: Double(firstFrame)), fit.points >= 50 {
                keepOffset(abs(rigTime - placed))
                scatter.add(rigTime - placed)
            }
            fit.add(frame: firstFrame, rigTime: rigTime)
            strays = []
        }
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
        // One line for the whole call: the fit only changes when a buffer arrives.
        guard let line = fit.line else { return out }
        // Every microphone runs this 48 000 times a second: no call per sample beyond the arithmetic (at -Onone a
        // generic clamp or an array subscript is one), the held samples read through a pointer.
        let start = Double(startMicroseconds), rate = Double(self.rate), first = base
        var produced = self.produced, filled = self.filled
        held.withUnsafeBufferPointer { h in
            while produced < limit {
                let t = start + Double(produced) * 1e6 / rate  // as rigTime(ofOutput:)
                guard t < until else { break }
                let x = line.frame0 + (t - line.time0) / line.microsecondsPerFrame
                // Wait for the sample after x, unless x is already past everything (then the device is behind).
                if x + 1 > Double(lastHeld) { break }
                let i = Int64(x.rounded(.down))
                if i < first {
                    out.append(0)
                    filled += 1
                } else {
                    let f = x - Double(i)
                    let a = Double(h[Int(i - first)]), b = Double(h[Int(i - first + 1)])
                    let v = (a + (b - a) * f).rounded()
                    out.append(v >= 32767 ? .max : v <= -32768 ? .min : Int16(v))
                }
                produced += 1
            }
        }
        self.produced = produced
        self.filled = filled
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

    /// Algorithm R: the n-th offset replaces a random kept one with probability sample / n.
    private mutating func keepOffset(_ x: Double) {
        offsetCount += 1
        if offsets.count < Self.offsetSample {
            offsets.append(x)
            return
        }
        reservoirState ^= reservoirState << 13; reservoirState ^= reservoirState >> 7; reservoirState ^= reservoirState << 17
        let slot = Int(reservoirState % UInt64(offsetCount))
        if slot < Self.offsetSample { offsets[slot] = x }
    }

    /// p50 and p99 of the per-buffer offsets, µs (0 when none).
    public var offsetPercentiles: (p50: Double, p99: Double) {
        guard !offsets.isEmpty else { return (0, 0) }
        let s = offsets.sorted()
        func q(_ p: Double) -> Double { s[min(s.count - 1, Int((p * Double(s.count - 1)).rounded()))] }
        return (q(0.5), q(0.99))
    }
}

/// A running root-mean-square.
struct SampleStats: Sendable {
    private var count = 0.0, sumSquares = 0.0
    mutating func add(_ x: Double) { count += 1; sumSquares += x * x }
    var rms: Double { count > 0 ? (sumSquares / count).squareRoot() : 0 }
}
