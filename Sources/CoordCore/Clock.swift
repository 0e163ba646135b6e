/// How a node's local clock maps onto the rig timebase:
/// `rig = local + offset + ratePPM·1e-6·(local − referenceLocal)`.
public struct ClockMapping: Equatable, Sendable, Codable {
    public var offsetMicroseconds: Double
    public var ratePPM: Double
    public var referenceLocal: Int64
    /// One-sigma error of the mapping, µs (from the fit's scatter; see `ClockEstimator`).
    public var uncertaintyMicroseconds: Double
    /// The most the mapping can be off, µs: three sigma plus half the best round trip (path asymmetry).
    public var boundMicroseconds: Double = 0

    public init(offsetMicroseconds: Double, ratePPM: Double = 0, referenceLocal: Int64 = 0, uncertaintyMicroseconds: Double = 0) {
        self.offsetMicroseconds = offsetMicroseconds
        self.ratePPM = ratePPM
        self.referenceLocal = referenceLocal
        self.uncertaintyMicroseconds = uncertaintyMicroseconds
    }

    public static let identity = ClockMapping(offsetMicroseconds: 0)

    public func rig(fromLocal local: Double) -> Double {
        local + offsetMicroseconds + ratePPM * 1e-6 * (local - Double(referenceLocal))
    }

    public func local(fromRig rig: Double) -> Double {
        // Invert the affine map.
        let r = ratePPM * 1e-6
        return (rig - offsetMicroseconds + r * Double(referenceLocal)) / (1 + r)
    }
}

/// One NTP-style exchange: t1 and t4 on the rig timebase (coordinator), t2 and t3 on the node's local clock.
public struct ClockProbeSample: Equatable, Sendable {
    public var t1: Int64, t2: Int64, t3: Int64, t4: Int64
    public init(t1: Int64, t2: Int64, t3: Int64, t4: Int64) {
        self.t1 = t1; self.t2 = t2; self.t3 = t3; self.t4 = t4
    }

    /// Times a sample may hold (µs, either clock): ±10¹⁶, about 300 years either way; the edge refuses others,
    /// and the estimator drops them, so its arithmetic cannot overflow whatever a node sent.
    public static let timeRange: ClosedRange<Int64> = -10_000_000_000_000_000...10_000_000_000_000_000

    /// Whether every time is within `timeRange` and the node's send follows its receive.
    public var isPlausible: Bool {
        [t1, t2, t3, t4].allSatisfy(Self.timeRange.contains) && t3 >= t2 && t4 >= t1
    }

    /// Network round trip, excluding the node's turnaround (saturating: a sample from a lying node cannot trap).
    public var roundTrip: Int64 { Saturating.subtract(Saturating.subtract(t4, t1), Saturating.subtract(t3, t2)) }
    /// rig − local at the node's midpoint, assuming a symmetric path.
    public var offset: Double { (Double(t1 - t2) + Double(t4 - t3)) / 2 }
    /// The node's local time at the exchange's midpoint.
    public var localMidpoint: Double { (Double(t2) + Double(t3)) / 2 }
}

/// Estimates a node's clock mapping from probe exchanges, continuously through a take: keeps a sliding
/// window of exchanges, takes the fastest quarter of each second's exchanges (least queueing, so least
/// asymmetry), and fits offset and rate together by least squares.
///
/// It states two figures. `uncertaintyMicroseconds` is the fit's one-sigma error at the instant asked for
/// (it grows with extrapolation); `boundMicroseconds` adds half the best round trip, the most that an
/// undetectable path asymmetry could shift the offset: a guarantee, not an expectation.
public struct ClockEstimator: Sendable {
    public private(set) var samples: [ClockProbeSample] = []
    /// The newest exchange's t1 (kept, not searched for: `add` runs at every exchange).
    private var newestT1: Int64?
    /// Exchanges older than this (by t1, against the newest) leave the fit, so a wandering rate is followed.
    public let windowMicroseconds: Int64
    /// Each bin of this length contributes its fastest quarter.
    public let binMicroseconds: Int64

    /// One bin's exchanges, fastest first (equal round trips in arrival order): its kept quarter is a prefix.
    private struct Bin: Sendable {
        var index: Int64
        var byRoundTrip: [ClockProbeSample]
        var kept: ArraySlice<ClockProbeSample> { byRoundTrip.prefix(max(1, byRoundTrip.count / 4)) }
    }
    /// The window's bins, oldest first. Kept as exchanges arrive, so an exchange re-sorts only its own bin.
    private var bins: [Bin] = []

    /// The fit of the window as it stands, made once per exchange: every estimate (a take polls every clock
    /// every few milliseconds while it aligns) only evaluates it at an instant.
    private struct Fit: Sendable {
        var reference: Int64
        var meanX: Double, sxx: Double
        var slope: Double, intercept: Double
        var fitsRate: Bool
        var n: Double
        var sigma: Double
    }
    private var fit: Fit?
    /// The fastest round trip in the window, µs.
    public private(set) var bestRoundTrip: Int64?
    /// The newest exchange's t4 (rig µs), nil before the first.
    public private(set) var newestT4: Int64?

    public init(windowMicroseconds: Int64 = 20_000_000, binMicroseconds: Int64 = 1_000_000) {
        self.windowMicroseconds = windowMicroseconds
        self.binMicroseconds = max(1, binMicroseconds)
    }

    public mutating func add(_ sample: ClockProbeSample) {
        // A sample that contradicts causality, or holds a time no clock reads, is dropped.
        guard sample.isPlausible, sample.roundTrip >= 0 else { return }
        samples.append(sample)
        insert(sample)
        newestT1 = max(newestT1 ?? sample.t1, sample.t1)
        newestT4 = max(newestT4 ?? sample.t4, sample.t4)
        let oldest = Saturating.subtract(newestT1 ?? sample.t1, windowMicroseconds)
        if let first = samples.first, first.t1 < oldest {
            samples.removeAll { $0.t1 < oldest }
            // Only bins starting before `oldest` can hold an exchange older than it: the first few.
            var i = 0
            while i < bins.count, Saturating.multiply(bins[i].index, binMicroseconds) < oldest {
                bins[i].byRoundTrip.removeAll { $0.t1 < oldest }
                if bins[i].byRoundTrip.isEmpty { bins.remove(at: i) } else { i += 1 }
            }
            newestT4 = samples.lazy.map(\.t4).max()
        }
        refit()
    }

    private func binIndex(_ t1: Int64) -> Int64 {
        t1 >= 0 ? t1 / binMicroseconds : (t1 + 1) / binMicroseconds - 1
    }

    /// Puts `sample` into its bin, after every exchange of that bin at least as fast.
    private mutating func insert(_ sample: ClockProbeSample) {
        let index = binIndex(sample.t1)
        // Exchanges arrive in t1 order: their bin is the newest, or a new one after it. Anything else is searched.
        var b = bins.count
        while b > 0, bins[b - 1].index > index { b -= 1 }
        if b == 0 || bins[b - 1].index != index {
            bins.insert(Bin(index: index, byRoundTrip: [sample]), at: b)
            return
        }
        let trip = sample.roundTrip
        var at = bins[b - 1].byRoundTrip.count
        while at > 0, bins[b - 1].byRoundTrip[at - 1].roundTrip > trip { at -= 1 }
        bins[b - 1].byRoundTrip.insert(sample, at: at)
    }

    /// The exchanges the fit uses: the fastest quarter (at least one) of each bin, without those much slower
    /// than the typical kept exchange.
    func selected() -> [ClockProbeSample] {
        var kept: [ClockProbeSample] = []
        for bin in bins { kept += bin.kept }
        guard !kept.isEmpty else { return [] }
        // A second in which every exchange was slow (a node busy hashing its files, a congested link) must
        // not pull the fit: its offsets may be off by up to half their round trip.
        var trips = [Int64](repeating: 0, count: kept.count)
        for i in 0..<kept.count { trips[i] = kept[i].roundTrip }
        let median = Self.select(&trips, rank: trips.count / 2)
        let limit = Saturating.add(Saturating.multiply(2, median), 20)
        return kept.filter { $0.roundTrip <= limit }
    }

    /// The value of rank `rank` (0-based) in ascending order, by quickselect; reorders `values`.
    static func select(_ values: inout [Int64], rank: Int) -> Int64 {
        values.withUnsafeMutableBufferPointer { v in
            var lo = 0, hi = v.count - 1
            while lo < hi {
                let pivot = v[lo + (hi - lo) / 2]
                var i = lo, j = hi
                while i <= j {
                    while v[i] < pivot { i += 1 }
                    while v[j] > pivot { j -= 1 }
                    if i <= j { v.swapAt(i, j); i += 1; j -= 1 }
                }
                if rank <= j { hi = j } else if rank >= i { lo = i } else { break }
            }
            return v[rank]
        }
    }

    /// Fits offset and rate to the selected exchanges by least squares (x: the node's midpoint, y: the offset).
    /// One pass for the sums, one for the residuals, in plain loops: a take makes this fit at every exchange of
    /// every node.
    private mutating func refit() {
        var best: Int64?
        for bin in bins { let t = bin.byRoundTrip[0].roundTrip; if best == nil || t < best! { best = t } }
        bestRoundTrip = best
        let kept = selected()
        guard let best, !kept.isEmpty else { fit = nil; return }
        let count = kept.count
        var xs = [Double](repeating: 0, count: count), ys = [Double](repeating: 0, count: count)
        var midpoints = 0.0
        for i in 0..<count { midpoints += kept[i].localMidpoint }
        let reference = Saturating.int64(midpoints / Double(count), .towardZero)
        var sumX = 0.0, sumY = 0.0, minX = Double.infinity, maxX = -Double.infinity
        for i in 0..<count {
            let x = kept[i].localMidpoint - Double(reference), y = kept[i].offset
            xs[i] = x; ys[i] = y
            sumX += x; sumY += y
            minX = Swift.min(minX, x); maxX = Swift.max(maxX, x)
        }
        let n = Double(count)
        let meanX = sumX / n, meanY = sumY / n
        var sxx = 0.0, sxy = 0.0
        for i in 0..<count {
            let dx = xs[i] - meanX
            sxx += dx * dx
            sxy += dx * (ys[i] - meanY)
        }
        // Fit a rate only when the samples span enough time for it to mean something (≥ 200 ms).
        let fitsRate = sxx > 0 && maxX - minX >= 200_000
        let slope = fitsRate ? sxy / sxx : 0
        let intercept = meanY - slope * meanX
        var squares = 0.0
        for i in 0..<count {
            let r = ys[i] - (intercept + slope * xs[i])
            squares += r * r
        }
        let parameters = fitsRate ? 2.0 : 1.0
        // With too few exchanges to measure the scatter, half the best round trip stands in for it.
        let sigma = n > parameters + 1 ? (squares / (n - parameters)).squareRoot() : Double(best) / 2
        fit = Fit(reference: reference, meanX: meanX, sxx: sxx, slope: slope, intercept: intercept, fitsRate: fitsRate,
                  n: n, sigma: sigma)
    }

    /// The mapping, with its uncertainty evaluated at `atRig` (default: the newest exchange).
    public func estimate(atRig: Int64? = nil) -> ClockMapping? {
        guard let fit, let best = bestRoundTrip, let newest = newestT4 else { return nil }
        let at = Double(atRig ?? newest)
        let mapping = ClockMapping(offsetMicroseconds: fit.intercept, ratePPM: fit.slope * 1e6, referenceLocal: fit.reference)
        let dx = mapping.local(fromRig: at) - Double(fit.reference) - fit.meanX
        // An unfitted rate may be off by the spread of clock rates a node can have (±100 ppm) times the distance.
        let sigma = fit.sigma
        let rateTerm = fit.fitsRate ? dx * dx / fit.sxx : (100e-6 * dx / max(sigma, 1)) * (100e-6 * dx / max(sigma, 1))
        var result = mapping
        result.uncertaintyMicroseconds = sigma * (1 / fit.n + rateTerm).squareRoot()
        result.boundMicroseconds = result.uncertaintyMicroseconds * 3 + Double(best) / 2
        // Samples in range can still fit a degenerate line (a rate of −10⁶ ppm divides by zero): no estimate then.
        guard [result.offsetMicroseconds, result.ratePPM, result.uncertaintyMicroseconds, result.boundMicroseconds].allSatisfy(\.isFinite) else {
            return nil
        }
        return result
    }
}

/// A simulated node clock for the demo: `local = host + offset + drift·1e-6·(host − hostReference)`.
public struct SimulatedClock: Equatable, Sendable {
    public var offsetMicroseconds: Int64
    public var driftPPM: Double
    public var hostReference: Int64

    public init(offsetMicroseconds: Int64, driftPPM: Double, hostReference: Int64) {
        self.offsetMicroseconds = offsetMicroseconds
        self.driftPPM = driftPPM
        self.hostReference = hostReference
    }

    public func local(fromHost host: Int64) -> Int64 {
        Saturating.add(Saturating.add(host, offsetMicroseconds), Saturating.int64(driftPPM * 1e-6 * Double(Saturating.subtract(host, hostReference))))
    }

    public func host(fromLocal local: Int64) -> Int64 {
        let r = driftPPM * 1e-6
        return Saturating.int64((Double(Saturating.subtract(local, offsetMicroseconds)) + r * Double(hostReference)) / (1 + r))
    }
}

/// Integer arithmetic on figures a peer sent: the result saturates at the type's ends instead of trapping, and
/// a Double that is no number (NaN) becomes 0. Used where a value crossed the wire or was derived from one.
public enum Saturating {
    public static func add(_ a: Int64, _ b: Int64) -> Int64 {
        let (r, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? .max : .min) : r
    }

    public static func subtract(_ a: Int64, _ b: Int64) -> Int64 {
        let (r, overflow) = a.subtractingReportingOverflow(b)
        return overflow ? (b < 0 ? .max : .min) : r
    }

    public static func multiply(_ a: Int64, _ b: Int64) -> Int64 {
        let (r, overflow) = a.multipliedReportingOverflow(by: b)
        return overflow ? ((a < 0) == (b < 0) ? .max : .min) : r
    }

    public static func add(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (r, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : r
    }

    /// `x` rounded (to the nearest by default) to an Int64, clamped to its range; NaN is 0.
    public static func int64(_ x: Double, _ rule: FloatingPointRoundingRule = .toNearestOrAwayFromZero) -> Int64 {
        guard !x.isNaN else { return 0 }
        let r = x.rounded(rule)
        // 2^63 is exactly representable; anything at or beyond it does not fit.
        if r >= 9_223_372_036_854_775_808.0 { return .max }
        if r < -9_223_372_036_854_775_808.0 { return .min }
        return Int64(r)
    }
}
