import Testing
@testable import CoordCore

/// A camera file as the recorder would write it from a `StridedGroupAssigner`'s actions.
private struct StridedFile {
    var groups: [Int64] = []
    var written: [Int64] = []
    var held: [Int64] = []
    var dropped: [Int64] = []
    var finished = false
    var problems: [String] = []

    mutating func apply(_ actions: [StridedGroupAssigner.Action]) {
        for action in actions {
            if finished { problems.append("\(action) after finish") }
            switch action {
            case .write(let g):
                groups.append(g); written.append(g)
            case .repeatPrevious(let g, let isHeld):
                groups.append(g)
                if isHeld { held.append(g) } else { dropped.append(g) }
            case .holdAsPrevious:
                if !groups.isEmpty { problems.append("hold after \(groups.count) rows") }
            case .discard:
                break
            case .finish:
                finished = true
            }
        }
    }
}

private let grid = FrameGrid(t0: 1_000_000, periodMicroseconds: 10_000)

/// Feeds `assigner` one frame per sensor-grid group from `firstCoarse` on (centres a little off the instants),
/// skipping `missing`, ticking between frames, until it finishes or `limit` frames went by.
private func record(_ assigner: inout StridedGroupAssigner, into file: inout StridedFile, firstCoarse: Int64,
                    missing: Set<Int64> = [], limit: Int = 500,
                    beforeFrame: (Int64, inout StridedGroupAssigner, inout StridedFile) -> Void = { _, _, _ in }) {
    let sensor = assigner.sensorGrid
    var c = firstCoarse
    var rng = SeededRandom(seed: 42)
    for _ in 0..<limit where !file.finished {
        beforeFrame(c, &assigner, &file)
        if file.finished { break }
        let center = sensor.instant(ofGroup: c) + rng.int(-1_000...1_000)
        if !missing.contains(c) { file.apply(assigner.frame(center: center)) }
        file.apply(assigner.tick(now: center + sensor.periodMicroseconds / 2, lateness: 3 * sensor.periodMicroseconds))
        c += 1
    }
}

@Suite struct GroupStrideTests {
    @Test func recordedGroupsAndCoarseSpans() {
        let s = GroupStride(every: 3)
        #expect((-7...7).filter { s.isRecorded(Int64($0)) } == [-6, -3, 0, 3, 6])
        #expect(s.firstRecorded(atOrAfter: 4) == 6)
        #expect(s.firstRecorded(atOrAfter: 6) == 6)
        #expect(s.firstRecorded(atOrAfter: -4) == -3)
        #expect(s.coarseGroups(from: 4, to: 10) == 2..<4)   // fine 6 and 9
        #expect(s.coarseGroups(from: 3, to: 9) == 1..<3)    // fine 3 and 6; 9 is the stop
        #expect(s.coarseGroups(from: 4, to: 6).isEmpty)
        #expect(s.held(from: 4, to: 10) == 4)
        #expect(s.held(from: 0, to: 0) == 0)
        #expect(s.coarseGrid(of: grid) == FrameGrid(t0: grid.t0, periodMicroseconds: 30_000))

        let anchored = GroupStride(every: 4, anchor: 7)
        #expect(anchored.isRecorded(7) && anchored.isRecorded(11) && anchored.isRecorded(3) && !anchored.isRecorded(8))
        #expect(anchored.group(ofCoarse: 2) == 15)
        #expect(anchored.coarseGrid(of: grid).t0 == grid.instant(ofGroup: 7))
    }

    @Test func heldAndRecordedAlwaysAddUpToTheSpan() {
        var rng = SeededRandom(seed: 7)
        for _ in 0..<2_000 {
            let s = GroupStride(every: rng.int(1...9), anchor: rng.int(-20...20))
            let start: Int64 = rng.int(-50...50), stop: Int64 = start + rng.int(0...60)
            let recorded = (start..<stop).filter { s.isRecorded($0) }
            #expect(Int64(recorded.count) + s.held(from: start, to: stop) == stop - start)
            #expect(s.coarseGroups(from: start, to: stop).map { s.group(ofCoarse: $0) } == recorded)
            #expect(s.isRecorded(s.firstRecorded(atOrAfter: start)) && s.firstRecorded(atOrAfter: start) - start < s.every)
        }
    }

    @Test func withoutACapItDecidesLikeTheGroupAssigner() {
        var rng = SeededRandom(seed: 11)
        for _ in 0..<200 {
            let start: Int64 = rng.int(0...20), stop: Int64 = start + rng.int(1...40)
            var plain = GroupAssigner(grid: grid, startGroup: start, stopGroup: stop)
            var strided = StridedGroupAssigner(grid: grid, cap: 1, startGroup: start, stopGroup: stop)
            #expect(strided.sensorGrid == grid)
            var now = grid.instant(ofGroup: start - 3)
            while !plain.isFinished {
                now += rng.int(1_000...25_000)
                let pair: ([GroupAssigner.Action], [StridedGroupAssigner.Action])
                if rng.chance(0.2) {
                    pair = (plain.tick(now: now, lateness: 30_000), strided.tick(now: now, lateness: 30_000))
                } else {
                    pair = (plain.frame(center: now), strided.frame(center: now))
                }
                let mapped: [StridedGroupAssigner.Action] = pair.0.map {
                    switch $0 {
                    case .holdAsPrevious: .holdAsPrevious
                    case .write(let g): .write(group: g)
                    case .repeatPrevious(let g): .repeatPrevious(group: g, held: false)
                    case .discard: .discard
                    case .finish: .finish
                    }
                }
                #expect(mapped == pair.1)
            }
        }
    }

    @Test(arguments: [(2, Int64(0), Int64(30)), (3, 1, 23), (4, 5, 6), (5, 2, 4), (30, 10, 95)])
    func aCapWritesEveryKthGroupAndHoldsTheRest(cap: Int, start: Int64, stop: Int64) {
        var assigner = StridedGroupAssigner(grid: grid, cap: cap, startGroup: start, stopGroup: stop)
        let stride = GroupStride(every: cap)
        #expect(assigner.sensorGrid.periodMicroseconds == grid.periodMicroseconds * Int64(cap))
        var file = StridedFile()
        record(&assigner, into: &file, firstCoarse: stride.coarseGroups(from: start, to: start).lowerBound - 3)
        #expect(file.problems.isEmpty)
        #expect(file.finished)
        #expect(file.groups == Array(start..<stop))
        #expect(file.written == (start..<stop).filter { stride.isRecorded($0) })
        #expect(Int64(file.held.count) == stride.held(from: start, to: stop))
        #expect(file.dropped.isEmpty)
        #expect(assigner.recordEvery(atGroup: start) == cap)
    }

    @Test func aMissingCoarseFrameIsDroppedAndItsFillsHeld() {
        var assigner = StridedGroupAssigner(grid: grid, cap: 3, startGroup: 0, stopGroup: 12)
        var file = StridedFile()
        record(&assigner, into: &file, firstCoarse: -2, missing: [2])
        #expect(file.problems.isEmpty)
        #expect(file.groups == Array(0..<12))
        #expect(file.written == [0, 3, 9])
        #expect(file.dropped == [6])
        #expect(file.held == [1, 2, 4, 5, 7, 8, 10, 11])
    }

    @Test(arguments: [Int64(13), 14, 15, 16])
    func aLiveStopBetweenCoarseGroupsEndsExactlyThere(stop: Int64) {
        var assigner = StridedGroupAssigner(grid: grid, cap: 3, startGroup: 2, stopGroup: nil)
        var file = StridedFile()
        record(&assigner, into: &file, firstCoarse: -1) { c, a, f in
            // Sent while coarse group 3 (fine 9) is the newest written: the stop is ahead of every written row.
            if c == 4 { f.apply(a.stop(at: stop)) }
        }
        #expect(file.problems.isEmpty)
        #expect(file.groups == Array(2..<stop))
        #expect(file.groups.count == Int(stop - 2))
        #expect(file.written == (2..<stop).filter { $0 % 3 == 0 })
    }

    @Test func aTakeShorterThanTheCapIsAllFills() {
        var assigner = StridedGroupAssigner(grid: grid, cap: 5, startGroup: 6, stopGroup: 9)
        var file = StridedFile()
        record(&assigner, into: &file, firstCoarse: -1)
        #expect(file.problems.isEmpty)
        #expect(file.groups == [6, 7, 8])
        #expect(file.held == [6, 7, 8])
        #expect(file.written.isEmpty)
    }

    @Test func aLateStopFinishesAtOnceWithoutFills() {
        var assigner = StridedGroupAssigner(grid: grid, cap: 2, startGroup: 0, stopGroup: nil)
        var file = StridedFile()
        record(&assigner, into: &file, firstCoarse: 0, limit: 6)   // coarse 0…5: fine 0…10 written
        #expect(assigner.nextGroup == 11)
        file.apply(assigner.stop(at: 7))
        #expect(file.finished)
        #expect(file.groups == Array(0..<11))
    }

    @Test func aSlowDownRecordsEveryKthGroupFromItsGroupOn() {
        var assigner = StridedGroupAssigner(grid: grid, cap: 1, startGroup: 0, stopGroup: 40)
        var file = StridedFile()
        var strides: [Int] = []
        record(&assigner, into: &file, firstCoarse: -2) { c, a, _ in
            if c == 5 { a.slow(every: 3, from: 10) }
            if c == 20 {
                strides = [a.recordEvery(atGroup: 9), a.recordEvery(atGroup: 10)]
                a.slow(every: 1, from: 31)
            }
        }
        #expect(strides == [1, 3])
        #expect(file.problems.isEmpty)
        #expect(file.groups == Array(0..<40))
        let expectedWritten = (0..<40).filter { $0 < 10 || $0 >= 31 || ($0 - 10) % 3 == 0 }.map(Int64.init)
        #expect(file.written == expectedWritten)
        #expect(file.held == (0..<40).map(Int64.init).filter { !expectedWritten.contains($0) })
        #expect(file.dropped.isEmpty)
        #expect(assigner.recordEvery(atGroup: 39) == 1)
    }

    @Test func aSlowDownMissingFrameOnAKeptGroupIsDropped() {
        var assigner = StridedGroupAssigner(grid: grid, cap: 1, startGroup: 0, stopGroup: 12)
        assigner.slow(every: 2, from: 4)
        var file = StridedFile()
        record(&assigner, into: &file, firstCoarse: -1, missing: [5, 6])
        #expect(file.groups == Array(0..<12))
        #expect(file.dropped == [6])
        #expect(file.held == [5, 7, 9, 11])
    }

    @Test func onACappedCameraASlowDownIsTheTotalStride() {
        var assigner = StridedGroupAssigner(grid: grid, cap: 2, startGroup: 0, stopGroup: 40)
        // 3 rounds up to 4 (a multiple of the cap), anchored at the first capped group from 11 on: 12.
        assigner.slow(every: 3, from: 11)
        #expect(assigner.recordEvery(atGroup: 10) == 2)
        #expect(assigner.recordEvery(atGroup: 11) == 4)
        var file = StridedFile()
        record(&assigner, into: &file, firstCoarse: -2) { c, a, _ in
            // Back at (never below) the cap from group 30.
            if c == 10 { a.slow(every: 1, from: 30) }
        }
        #expect(file.problems.isEmpty)
        #expect(file.groups == Array(0..<40))
        let expected = (0..<40).filter { $0 % 2 == 0 && ($0 < 11 || $0 >= 30 || ($0 - 12) % 4 == 0) }.map(Int64.init)
        #expect(file.written == expected)
        #expect(file.dropped.isEmpty)
        #expect(assigner.recordEvery(atGroup: 35) == 2)
    }

    @Test func aLaterSlowDownReplacesOnePendingFromALaterGroup() {
        var assigner = StridedGroupAssigner(grid: grid, cap: 1, startGroup: 0, stopGroup: nil)
        assigner.slow(every: 4, from: 20)
        assigner.slow(every: 2, from: 10)
        #expect(assigner.recordEvery(atGroup: 25) == 2)
        #expect(assigner.isRecorded(12) && !assigner.isRecorded(13) && assigner.isRecorded(9))
    }
}
