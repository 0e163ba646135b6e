// Helpers shared by the core tests: an independent nearest-group oracle and small random draws.
import Foundation
@testable import CoordCore

/// The group whose instant is nearest to `time`, found by comparing candidates directly (not by the
/// grid's own arithmetic). A time exactly half a period from two instants belongs to the later group.
func nearestGroupByComparison(_ time: Int64, on grid: FrameGrid) -> Int64 {
    let p = grid.periodMicroseconds
    let guess = Int64((Double(time - grid.t0) / Double(p)).rounded(.down))
    var best = guess - 2
    for candidate in (guess - 2)...(guess + 2) {
        let d = abs(time - grid.instant(ofGroup: candidate))
        let bestD = abs(time - grid.instant(ofGroup: best))
        if d < bestD || (d == bestD && candidate > best) { best = candidate }
    }
    return best
}

extension SeededRandom {
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }
    mutating func int(_ range: ClosedRange<Int64>) -> Int64 { Int64.random(in: range, using: &self) }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    mutating func double(_ range: ClosedRange<Double>) -> Double { Double.random(in: range, using: &self) }
    /// Exponentially distributed, for queueing delays.
    mutating func exponential(mean: Double) -> Double {
        let u = Double.random(in: Double.ulpOfOne..<1, using: &self)
        return -mean * Foundation.log(u)
    }
}

