import Foundation
import Testing
@testable import CoordCore

@Suite struct PercentilesTests {
    @Test func emptyIsAllZero() {
        #expect(Percentiles(of: []) == Percentiles(p50: 0, p99: 0, max: 0))
    }

    @Test func oneValueIsEveryPercentile() {
        #expect(Percentiles(of: [42]) == Percentiles(p50: 42, p99: 42, max: 42))
        #expect(Percentiles(of: [-7]) == Percentiles(p50: -7, p99: -7, max: -7))
    }

    @Test func nearestRankOnSmallSets() {
        #expect(Percentiles(of: [30, 10, 20]) == Percentiles(p50: 20, p99: 30, max: 30))
        #expect(Percentiles(of: [4, 1]) == Percentiles(p50: 1, p99: 4, max: 4))
        #expect(Percentiles(of: Array(1...10).map(Int64.init).reversed()) == Percentiles(p50: 5, p99: 10, max: 10))
        #expect(Percentiles(of: Array(1...100).map(Int64.init).shuffled()) == Percentiles(p50: 50, p99: 99, max: 100))
        #expect(Percentiles(of: Array(1...200).map(Int64.init)) == Percentiles(p50: 100, p99: 198, max: 200))
        #expect(Percentiles(of: [5, 5, 5, 9]) == Percentiles(p50: 5, p99: 9, max: 9))
    }

    /// Nearest rank: the p-th percentile is the smallest value v with at least p % of the values ≤ v.
    @Test func matchesTheNearestRankDefinition() {
        var rng = SeededRandom(seed: 5)
        for n in 1...1_000 {
            let values = (0..<n).map { _ in rng.int(Int64(-50)...50) }
            let result = Percentiles(of: values)
            let sorted = values.sorted()
            func byDefinition(_ percent: Int) -> Int64 {
                // Walk distinct values upward; count(≤ v) is the index past v's last copy.
                for i in sorted.indices where i == n - 1 || sorted[i + 1] != sorted[i] {
                    if (i + 1) * 100 >= percent * n { return sorted[i] }
                }
                return sorted[n - 1]
            }
            #expect(result.p50 == byDefinition(50), "n \(n)")
            #expect(result.p99 == byDefinition(99), "n \(n)")
            #expect(result.max == values.max()!, "n \(n)")
        }
    }
}

@Suite struct SyncReportTests {
    // Group g at 1000 + 1000·g.
    let grid = FrameGrid(t0: 1_000, periodMicroseconds: 1_000)

    func row(_ group: Int64, _ center: Int64, dup: Bool = false) -> FrameRow {
        FrameRow(frame: group, group: group, centerMicroseconds: center, isDup: dup)
    }

    var inputs: [SyncReport.Input] {
        [
            SyncReport.Input(node: "n1", camera: "a", rows: [row(0, 1_000), row(1, 2_000), row(2, 3_000), row(3, 4_005)],
                             clockUncertaintyMicroseconds: 12.5),
            SyncReport.Input(node: "n2", camera: "b", rows: [row(0, 1_010), row(1, 9_999, dup: true), row(2, 8_888, dup: true), row(3, 3_995)],
                             clockUncertaintyMicroseconds: 40),
            SyncReport.Input(node: "n3", camera: "c", rows: [row(0, 990), row(1, 2_030), row(2, 7_777, dup: true), row(3, 4_000)],
                             clockUncertaintyMicroseconds: 3),
        ]
    }

    @Test func spreadLeavesOutDupsAndGroupsWithFewerThanTwoRealFrames() {
        let r = SyncReport(groups: 4, grid: grid, inputs: inputs)
        // Per group, real frames only: g0 {1000, 1010, 990} → 20; g1 {2000, 2030} → 30; g2 {3000} → not measured;
        // g3 {4005, 3995, 4000} → 10.  Spreads {10, 20, 30}.
        #expect(r.groupsMeasured == 3)
        #expect(r.spreadMicroseconds == Percentiles(p50: 20, p99: 30, max: 30))
        #expect(r.groups == 4)
    }

    @Test func phaseErrorIsPerCameraFromRealFramesOnly() {
        let r = SyncReport(groups: 4, grid: grid, inputs: inputs)
        #expect(r.cameras.map(\.node) == ["n1", "n2", "n3"])
        #expect(r.cameras.map(\.camera) == ["a", "b", "c"])
        // a: |0|, |0|, |0|, |5|       b: |10|, |−5|        c: |−10|, |30|, |0|
        #expect(r.cameras[0].phaseErrorMicroseconds == Percentiles(p50: 0, p99: 5, max: 5))
        #expect(r.cameras[1].phaseErrorMicroseconds == Percentiles(p50: 5, p99: 10, max: 10))
        #expect(r.cameras[2].phaseErrorMicroseconds == Percentiles(p50: 10, p99: 30, max: 30))
        #expect(r.cameras.map(\.frames) == [4, 4, 4])
        #expect(r.cameras.map(\.dropped) == [0, 2, 1])
        #expect(r.cameras.map(\.clockUncertaintyMicroseconds) == [12.5, 40, 3])
    }

    @Test func oneCameraMeasuresNoSpread() {
        let r = SyncReport(groups: 4, grid: grid, inputs: [inputs[0]])
        #expect(r.groupsMeasured == 0)
        #expect(r.spreadMicroseconds == Percentiles(p50: 0, p99: 0, max: 0))
        #expect(r.cameras.count == 1)
    }

    @Test func allDupCameraHasNoPhaseFigures() {
        let allDup = SyncReport.Input(node: "n", camera: "x", rows: (0..<4).map { row($0, 5_000, dup: true) }, clockUncertaintyMicroseconds: 0)
        let r = SyncReport(groups: 4, grid: grid, inputs: [allDup])
        #expect(r.cameras[0].dropped == 4)
        #expect(r.cameras[0].phaseErrorMicroseconds == Percentiles(p50: 0, p99: 0, max: 0))
    }

    /// Random cameras with known per-frame offsets from the grid: the spread and phase figures follow from them.
    @Test func randomTakesAgreeWithDirectComputation() {
        var rng = SeededRandom(seed: 8)
        for _ in 0..<50 {
            let groups = rng.int(Int64(1)...200)
            let cameraCount = rng.int(1...6)
            var inputs: [SyncReport.Input] = []
            var real: [[Int64: Int64]] = []
            for c in 0..<cameraCount {
                var rows: [FrameRow] = []
                var mine: [Int64: Int64] = [:]
                for g in 0..<groups {
                    let dup = rng.chance(0.15)
                    let center = grid.instant(ofGroup: g) + rng.int(Int64(-400)...400)
                    rows.append(FrameRow(frame: g, group: g, centerMicroseconds: center, isDup: dup))
                    if !dup { mine[g] = center }
                }
                real.append(mine)
                inputs.append(.init(node: "n\(c)", camera: "cam", rows: rows, clockUncertaintyMicroseconds: 1))
            }
            let r = SyncReport(groups: groups, grid: grid, inputs: inputs)
            var spreads: [Int64] = []
            for g in 0..<groups {
                let centers = real.compactMap { $0[g] }
                if centers.count >= 2 { spreads.append(centers.max()! - centers.min()!) }
            }
            #expect(r.groupsMeasured == Int64(spreads.count))
            #expect(r.spreadMicroseconds == Percentiles(of: spreads))
            for c in 0..<cameraCount {
                let phases = real[c].map { abs($0.value - grid.instant(ofGroup: $0.key)) }
                #expect(r.cameras[c].phaseErrorMicroseconds == Percentiles(of: phases))
                #expect(r.cameras[c].dropped == groups - Int64(real[c].count))
            }
        }
    }

    @Test func jsonHasTheContractsKeys() throws {
        let report = SyncReport(groups: 4, grid: grid, inputs: inputs)
        let data = try JSONEncoder().encode(report)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(Set(object.keys).isSuperset(of: ["groups", "spread_us", "cameras"]))
        #expect(object["groups"] as? Int == 4)
        let spread = try #require(object["spread_us"] as? [String: Any])
        #expect(Set(spread.keys) == ["p50", "p99", "max"])
        #expect(spread["p50"] as? Int == 20)
        let cameras = try #require(object["cameras"] as? [[String: Any]])
        #expect(cameras.count == 3)
        for camera in cameras {
            #expect(Set(camera.keys) == ["node", "camera", "frames", "dropped", "phase_error_us", "clock_uncertainty_us"])
            let phase = try #require(camera["phase_error_us"] as? [String: Any])
            #expect(Set(phase.keys) == ["p50", "p99", "max"])
        }
        #expect(cameras[1]["dropped"] as? Int == 2)
        #expect(cameras[1]["node"] as? String == "n2")
    }

    @Test func jsonRoundTripsAndToleratesUnknownKeys() throws {
        let report = SyncReport(groups: 4, grid: grid, inputs: inputs)
        let data = try JSONEncoder().encode(report)
        #expect(try JSONDecoder().decode(SyncReport.self, from: data) == report)
        var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        object["future_key"] = ["nested": [1, 2, 3]]
        var cameras = try #require(object["cameras"] as? [[String: Any]])
        cameras[0]["another_key"] = "x"
        object["cameras"] = cameras
        let extended = try JSONSerialization.data(withJSONObject: object)
        #expect(try JSONDecoder().decode(SyncReport.self, from: extended) == report)
    }

    @Test func manyRepeatsAreSaidAndAFewAreNot() {
        let grid = FrameGrid(t0: 0, periodMicroseconds: 1000)
        func rows(dups: Set<Int64>) -> [FrameRow] {
            (0..<100).map { FrameRow(frame: $0, group: $0, centerMicroseconds: $0 * 1000, isDup: dups.contains($0)) }
        }
        let calm = SyncReport(groups: 100, grid: grid, inputs: [
            SyncReport.Input(node: "n1", camera: "a", rows: rows(dups: [3]), clockUncertaintyMicroseconds: 1),
            SyncReport.Input(node: "n2", camera: "b", rows: rows(dups: []), clockUncertaintyMicroseconds: 1)])
        #expect(calm.repeatsNote == nil && calm.repeatedFraction == 0.005)
        let stalled = SyncReport(groups: 100, grid: grid, inputs: [
            SyncReport.Input(node: "n1", camera: "a", rows: rows(dups: Set(10..<40)), clockUncertaintyMicroseconds: 1, held: 20),
            SyncReport.Input(node: "n2", camera: "b", rows: rows(dups: []), clockUncertaintyMicroseconds: 1)])
        #expect(stalled.repeatsNote == "15.0 % of the frames are repeats, held on purpose or filled (n1/a 30 of 100)", "\(stalled.repeatsNote ?? "-")")
    }

    @Test func aBoundWidensWithTheTimeSinceTheLastClockUpdateAndSaysSo() {
        // 60 s at 30 fps, two cameras 1 µs apart; the coordinator's updates stopped 0.5 s in for n2.
        let grid = FrameGrid(t0: 0, periodMicroseconds: 33_333)
        let groups: Int64 = 1800
        func rows(_ offset: Int64) -> [FrameRow] {
            (0..<groups).map { FrameRow(frame: $0, group: $0, centerMicroseconds: grid.instant(ofGroup: $0) + offset, isDup: false) }
        }
        let tracked = SyncReport(groups: groups, grid: grid, inputs: [
            .init(node: "n1", camera: "a", rows: rows(0), clockUncertaintyMicroseconds: 2, clockUpdatedUntil: grid.instant(ofGroup: groups) - 400_000),
            .init(node: "n2", camera: "b", rows: rows(1), clockUncertaintyMicroseconds: 2, clockUpdatedUntil: grid.instant(ofGroup: groups) - 300_000)])
        #expect(tracked.clockNote == nil)
        #expect((tracked.spreadBoundMicroseconds?.p99 ?? 0) < 20, "\(String(describing: tracked.spreadBoundMicroseconds))")
        let stopped = SyncReport(groups: groups, grid: grid, inputs: [
            .init(node: "n1", camera: "a", rows: rows(0), clockUncertaintyMicroseconds: 2, clockUpdatedUntil: grid.instant(ofGroup: groups) - 400_000),
            .init(node: "n2", camera: "b", rows: rows(1), clockUncertaintyMicroseconds: 2, clockUpdatedUntil: 500_000)])
        // ±2 sigma of 2 ppm over the time since n2's last update: the p99 group is ~58.6 s past it.
        let p99 = stopped.spreadBoundMicroseconds?.p99 ?? 0
        #expect(p99 > 4 * 2 * 58 && p99 < 4 * 2 * 60 + 20, "\(p99)")
        #expect(stopped.spreadMicroseconds.p99 == 1)
        #expect(stopped.clockNote?.contains("n2 59.5 s") == true && stopped.clockNote?.contains("2.0 ppm") == true, "\(stopped.clockNote ?? "-")")
    }
}
