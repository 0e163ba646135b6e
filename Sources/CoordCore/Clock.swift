/// How a node's local clock maps onto the rig timebase:
/// `rig = local + offset + ratePPM·1e-6·(local − referenceLocal)`.
public struct ClockMapping: Equatable, Sendable, Codable {
    public var offsetMicroseconds: Double
    public var ratePPM: Double
    public var referenceLocal: Int64
    /// One-sigma-ish bound on the mapping's error at the reference, in µs.
    public var uncertaintyMicroseconds: Double

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

    /// Network round trip, excluding the node's turnaround.
    public var roundTrip: Int64 { (t4 - t1) - (t3 - t2) }
    /// rig − local at the node's midpoint, assuming a symmetric path.
    public var offset: Double { (Double(t1 - t2) + Double(t4 - t3)) / 2 }
    /// The node's local time at the exchange's midpoint.
    public var localMidpoint: Double { (Double(t2) + Double(t3)) / 2 }
}

/// Estimates a node's clock mapping from probe exchanges: keeps the fastest exchanges (least queueing),
/// fits offset and rate together, and states an honest uncertainty (half the best round trip bounds
/// path asymmetry; the fit residuals and the rate's error over the span add to it).
public struct ClockEstimator: Sendable {
    public private(set) var samples: [ClockProbeSample] = []

    public init() {}

    public mutating func add(_ sample: ClockProbeSample) {
        guard sample.roundTrip >= 0 else { return }  // a sample that contradicts causality is dropped
        samples.append(sample)
    }

    public func estimate() -> ClockMapping? {
        guard let best = samples.min(by: { $0.roundTrip < $1.roundTrip }) else { return nil }
        // Keep exchanges whose round trip is within the fastest quartile's bound (at least the best 4).
        let sorted = samples.sorted { $0.roundTrip < $1.roundTrip }
        let keepCount = max(min(4, sorted.count), sorted.count / 4)
        let kept = Array(sorted.prefix(keepCount))
        let reference = Int64(kept.map(\.localMidpoint).reduce(0, +) / Double(kept.count))
        let xs = kept.map { $0.localMidpoint - Double(reference) }
        let ys = kept.map(\.offset)
        let n = Double(kept.count)
        let meanX = xs.reduce(0, +) / n
        let meanY = ys.reduce(0, +) / n
        let sxx = xs.reduce(0) { $0 + ($1 - meanX) * ($1 - meanX) }
        var slope = 0.0
        // Fit a rate only when the samples span enough time for it to mean something (≥ 200 ms).
        let span = (xs.max() ?? 0) - (xs.min() ?? 0)
        if sxx > 0 && span >= 200_000 {
            var sxy = 0.0
            for i in xs.indices { sxy += (xs[i] - meanX) * (ys[i] - meanY) }
            slope = sxy / sxx
        }
        let intercept = meanY - slope * meanX
        var residual = 0.0
        for i in xs.indices { residual = max(residual, abs(ys[i] - (intercept + slope * xs[i]))) }
        let uncertainty = Double(best.roundTrip) / 2 + residual
        return ClockMapping(offsetMicroseconds: intercept, ratePPM: slope * 1e6, referenceLocal: reference,
                            uncertaintyMicroseconds: uncertainty)
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
        host + offsetMicroseconds + Int64((driftPPM * 1e-6 * Double(host - hostReference)).rounded())
    }

    public func host(fromLocal local: Int64) -> Int64 {
        let r = driftPPM * 1e-6
        return Int64(((Double(local - offsetMicroseconds) + r * Double(hostReference)) / (1 + r)).rounded())
    }
}
