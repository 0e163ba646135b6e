import Testing
@testable import CoordCore

/// A camera file as the node would write it from the assigner's actions.
private struct ModelFile {
    typealias Action = GroupAssigner.Action

    var groups: [Int64] = []
    var dupGroups: Set<Int64> = []
    var writtenGroups: Set<Int64> = []
    var finishes = 0
    var discardsBeforeFinish = 0
    var problems: [String] = []

    var isFinished: Bool { finishes > 0 }

    mutating func apply(_ actions: [Action], from call: String) {
        for action in actions {
            switch action {
            case .write(let g):
                if isFinished { problems.append("\(call): write \(g) after finish") }
                groups.append(g)
                writtenGroups.insert(g)
            case .repeatPrevious(let g):
                if isFinished { problems.append("\(call): repeat \(g) after finish") }
                groups.append(g)
                dupGroups.insert(g)
            case .holdAsPrevious:
                if !groups.isEmpty { problems.append("\(call): hold after \(groups.count) rows were written") }
            case .discard:
                if !isFinished { discardsBeforeFinish += 1 }
            case .finish:
                finishes += 1
                if finishes > 1 { problems.append("\(call): finish #\(finishes)") }
            }
        }
    }
}

/// Checks the shape of one call's answer: frame → [hold] | [discard] | repeat* (write finish? | finish);
/// tick → repeat* finish?; stop → [] | [finish].
private func shapeProblem(_ actions: [GroupAssigner.Action], call: String) -> String? {
    var rest = actions[...]
    if call == "frame", rest == [.holdAsPrevious] || rest == [.discard] { return nil }
    while case .repeatPrevious = rest.first { rest = rest.dropFirst() }
    if call == "frame", case .write = rest.first { rest = rest.dropFirst() }
    if rest.first == .finish { rest = rest.dropFirst() }
    if call == "frame" && actions.allSatisfy({ if case .repeatPrevious = $0 { return true } else { return false } }) {
        return "frame answered only repeats: \(actions)"
    }
    if call == "stop" && actions.contains(where: { $0 != .finish }) { return "stop answered \(actions)" }
    return rest.isEmpty ? nil : "\(call) answered \(actions)"
}

private struct Delivery {
    var at: Int64       // rig time the node sees the frame
    var center: Int64   // its estimated exposure centre
    var order: Int      // tie-break so sorting is stable (a duplicate right after its original)
}

private struct StreamConfig {
    var driftPPM: ClosedRange<Double>
    var jitterMicroseconds: Double
    var lossRate: Double
    var duplicateRate: Double
    var burstRate: Double
    var lateRate: Double
    /// Lateness passed to tick(), in periods; nil means never tick.
    var tickLatenessPeriods: ClosedRange<Double>?
    var openEnded: Bool
}

private func makeStream(_ rng: inout SeededRandom, grid: FrameGrid, startGroup: Int64, endGroup: Int64,
                        config: StreamConfig) -> [Delivery] {
    let p = Double(grid.periodMicroseconds)
    let sensorPeriod = p * (1 + rng.double(config.driftPPM) * 1e-6)
    var trueCenter = Double(grid.instant(ofGroup: startGroup - Int64(rng.int(0...5)))) + rng.double(0...p)
    let latency = rng.double(0.1 * p...0.6 * p)
    var deliveries: [Delivery] = []
    var burstLeft = 0
    var burstIndices: [Int] = []
    func closeBurst() {
        guard let last = burstIndices.last else { return }
        for i in burstIndices { deliveries[i].at = deliveries[last].at }
        burstIndices = []
    }
    while trueCenter < Double(grid.instant(ofGroup: endGroup + 3)) {
        defer { trueCenter += sensorPeriod }
        if rng.chance(config.lossRate) { continue }
        let center = Int64((trueCenter + rng.gaussian(standardDeviation: config.jitterMicroseconds)).rounded())
        var at = Int64((trueCenter + latency + rng.double(0...0.1 * p)).rounded())
        if rng.chance(config.lateRate) { at += Int64(Double(rng.int(2...5)) * p) }
        deliveries.append(Delivery(at: at, center: center, order: 2 * deliveries.count))
        if burstLeft == 0 && rng.chance(config.burstRate) { burstLeft = rng.int(2...6) }
        if burstLeft > 0 {
            burstIndices.append(deliveries.count - 1)
            burstLeft -= 1
            if burstLeft == 0 { closeBurst() }
        }
    }
    closeBurst()
    // A duplicate arrives just after its original (after the burst it belongs to, if any).
    for original in deliveries where rng.chance(config.duplicateRate) {
        deliveries.append(Delivery(at: original.at, center: original.center, order: original.order + 1))
    }
    return deliveries.sorted { ($0.at, $0.order) < ($1.at, $1.order) }
}

private struct RunResult {
    var file: ModelFile
    var startGroup: Int64
    var stopGroup: Int64
    var deliveredGroups: [Int64]
    var assigner: GroupAssigner
}

/// Drives one assigner with a random stream, applying every answer to a model file; keeps feeding frames,
/// ticks and stops after the finish to prove nothing more is written.
private func run(seed: UInt64, config: StreamConfig) -> RunResult {
    var rng = SeededRandom(seed: seed)
    let period = [Int64(33_333), 40_000, 16_667, 41_667, 20_000, 100_000][rng.int(0...5)]
    let grid = FrameGrid(t0: rng.int(Int64(1_000_000)...5_000_000_000_000), periodMicroseconds: period)
    let startGroup = rng.int(Int64(0)...30)
    let plannedStop = startGroup + rng.int(Int64(1)...150)
    var assigner = GroupAssigner(grid: grid, startGroup: startGroup, stopGroup: config.openEnded ? nil : plannedStop)
    let stream = makeStream(&rng, grid: grid, startGroup: startGroup, endGroup: plannedStop, config: config)
    let lateness = config.tickLatenessPeriods.map { Int64(rng.double($0) * Double(period)) }
    // For an open-ended take, the stop is decided partway through the stream.
    let stopDecisionAt = config.openEnded && !stream.isEmpty ? stream[rng.int(0...(stream.count - 1))].at : Int64.max
    var stopGroup: Int64? = config.openEnded ? nil : plannedStop
    var file = ModelFile()
    var delivered: [Int64] = []

    func decideStop() {
        let target = max(assigner.nextGroup + rng.int(Int64(0)...40), startGroup + 1)
        stopGroup = target
        let actions = assigner.stop(at: target)
        if let p = shapeProblem(actions, call: "stop") { file.problems.append(p) }
        file.apply(actions, from: "stop(at: \(target))")
    }

    for d in stream {
        if let lateness {
            let actions = assigner.tick(now: d.at, lateness: lateness)
            if let p = shapeProblem(actions, call: "tick") { file.problems.append(p) }
            file.apply(actions, from: "tick(now: \(d.at))")
        }
        if stopGroup == nil && d.at >= stopDecisionAt { decideStop() }
        let wasFinished = file.isFinished
        let actions = assigner.frame(center: d.center)
        if let p = shapeProblem(actions, call: "frame") { file.problems.append(p) }
        let expectedGroup = nearestGroupByComparison(d.center, on: grid)
        for case .write(let g) in actions where g != expectedGroup {
            file.problems.append("frame at \(d.center) written as group \(g), its nearest group is \(expectedGroup)")
        }
        if !wasFinished { delivered.append(expectedGroup) }
        file.apply(actions, from: "frame(center: \(d.center))")
    }
    if stopGroup == nil { decideStop() }
    let end = grid.instant(ofGroup: stopGroup!) + (lateness ?? 0) + 10 * period
    file.apply(assigner.tick(now: end, lateness: lateness ?? 0), from: "final tick")

    // After the finish: nothing may be appended and no second finish.
    let rowsAtFinish = file.groups.count
    for k in Int64(0)..<5 {
        let center = grid.instant(ofGroup: stopGroup! + k - 3)
        let actions = assigner.frame(center: center)
        if actions != [.discard] { file.problems.append("frame after finish answered \(actions)") }
        file.apply(actions, from: "frame after finish")
        file.apply(assigner.tick(now: end + k * period, lateness: 0), from: "tick after finish")
        file.apply(assigner.stop(at: stopGroup! + k), from: "stop after finish")
    }
    if file.groups.count != rowsAtFinish { file.problems.append("rows appended after finish") }
    return RunResult(file: file, startGroup: startGroup, stopGroup: stopGroup!, deliveredGroups: delivered, assigner: assigner)
}

/// The properties every run must have, whatever the stream did.
private func checkInvariants(_ r: RunResult, seed: UInt64) {
    let f = r.file
    #expect(f.problems.isEmpty, "seed \(seed): \(f.problems.prefix(5))")
    #expect(f.finishes == 1, "seed \(seed)")
    #expect(r.assigner.isFinished, "seed \(seed)")
    #expect(f.groups == Array(r.startGroup..<r.stopGroup), "seed \(seed): rows \(f.groups.count), expected \(r.stopGroup - r.startGroup)")
    #expect(Int64(f.dupGroups.count) + Int64(f.writtenGroups.count) == r.stopGroup - r.startGroup, "seed \(seed)")
    #expect(r.assigner.repeated == Int64(f.dupGroups.count), "seed \(seed)")
    #expect(r.assigner.written == Int64(f.writtenGroups.count), "seed \(seed)")
    #expect(r.assigner.discarded == Int64(f.discardsBeforeFinish), "seed \(seed)")
    // A group is written only from a frame whose nearest group it is (checked per call above), so a group
    // no frame landed in must be a repeat.
    let delivered = Set(r.deliveredGroups)
    for g in r.startGroup..<r.stopGroup where !delivered.contains(g) {
        #expect(f.dupGroups.contains(g), "seed \(seed): group \(g) had no frame but is not a repeat")
    }
}

@Suite struct GroupAssignerPropertyTests {
    /// Drift, jitter, losses, duplicates and bursts, delivered in order; ticks only with a generous lateness.
    /// Here the repeats are exactly the groups no frame landed in.
    @Test func inOrderStreamsFillExactlyTheEmptyGroups() {
        let config = StreamConfig(driftPPM: -3_000...3_000, jitterMicroseconds: 30, lossRate: 0.08, duplicateRate: 0.05,
                                  burstRate: 0.03, lateRate: 0, tickLatenessPeriods: 10...12, openEnded: false)
        for seed in UInt64(1)...300 {
            let r = run(seed: seed, config: config)
            checkInvariants(r, seed: seed)
            let groupsInOrder = zip(r.deliveredGroups, r.deliveredGroups.dropFirst()).allSatisfy { $0 <= $1 }
            #expect(groupsInOrder, "seed \(seed): generator produced out-of-order groups")
            let landed = Set(r.deliveredGroups.filter { (r.startGroup..<r.stopGroup).contains($0) })
            #expect(r.file.writtenGroups == landed, "seed \(seed)")
            #expect(r.assigner.repeated == (r.stopGroup - r.startGroup) - Int64(landed.count), "seed \(seed)")
        }
    }

    /// Large jitter, drift of ±1 %, heavy loss, duplicates, bursts, late (out-of-order) frames, tight ticks,
    /// and open-ended takes whose stop is set partway through.
    @Test func harshStreamsStillGiveEveryGroupExactlyOnce() {
        let config = StreamConfig(driftPPM: -10_000...10_000, jitterMicroseconds: 5_000, lossRate: 0.25, duplicateRate: 0.1,
                                  burstRate: 0.08, lateRate: 0.08, tickLatenessPeriods: 0.2...2, openEnded: true)
        for seed in UInt64(1_000)...1_300 {
            checkInvariants(run(seed: seed, config: config), seed: seed)
        }
    }

    @Test func fixedStopWithoutTicksAndLateFrames() {
        let config = StreamConfig(driftPPM: -50_000...50_000, jitterMicroseconds: 8_000, lossRate: 0.3, duplicateRate: 0.2,
                                  burstRate: 0.1, lateRate: 0.1, tickLatenessPeriods: nil, openEnded: false)
        for seed in UInt64(5_000)...5_300 {
            checkInvariants(run(seed: seed, config: config), seed: seed)
        }
    }

    @Test func openEndedInOrderStreams() {
        let config = StreamConfig(driftPPM: -500...500, jitterMicroseconds: 100, lossRate: 0.05, duplicateRate: 0.05,
                                  burstRate: 0.05, lateRate: 0, tickLatenessPeriods: 1...3, openEnded: true)
        for seed in UInt64(9_000)...9_200 {
            checkInvariants(run(seed: seed, config: config), seed: seed)
        }
    }
}

@Suite struct GroupAssignerTests {
    // Grid: group g at g × 1000 µs.
    let grid = FrameGrid(t0: 0, periodMicroseconds: 1_000)

    @Test func perfectFramesAreWrittenInOrderAndFinishOnTheLast() {
        var a = GroupAssigner(grid: grid, startGroup: 5, stopGroup: 8)
        #expect(a.frame(center: 4_010) == [.holdAsPrevious])
        #expect(a.frame(center: 5_000) == [.write(group: 5)])
        #expect(a.frame(center: 6_020) == [.write(group: 6)])
        #expect(a.frame(center: 6_990) == [.write(group: 7), .finish])
        #expect(a.isFinished)
        #expect(a.frame(center: 8_000) == [.discard])
        #expect(a.written == 3 && a.repeated == 0)
    }

    @Test func framesBeforeTheStartAreHeldUntilTheFirstWrite() {
        var a = GroupAssigner(grid: grid, startGroup: 5, stopGroup: 7)
        #expect(a.frame(center: 2_000) == [.holdAsPrevious])
        #expect(a.frame(center: 3_000) == [.holdAsPrevious])
        #expect(a.frame(center: 4_499) == [.holdAsPrevious])
        #expect(a.frame(center: 4_500) == [.write(group: 5)])
        // A stray late frame for a pre-start group is now just discarded.
        #expect(a.frame(center: 4_000) == [.discard])
        #expect(a.discarded == 1)
    }

    @Test func gapIsFilledWithRepeatsBeforeTheNextWrite() {
        var a = GroupAssigner(grid: grid, startGroup: 0, stopGroup: 10)
        #expect(a.frame(center: 0) == [.write(group: 0)])
        #expect(a.frame(center: 3_100) == [.repeatPrevious(group: 1), .repeatPrevious(group: 2), .write(group: 3)])
        #expect(a.repeated == 2)
        #expect(a.nextGroup == 4)
    }

    @Test func firstFrameAfterTheStartFillsTheStartGroups() {
        var a = GroupAssigner(grid: grid, startGroup: 2, stopGroup: 6)
        #expect(a.frame(center: 4_000) == [.repeatPrevious(group: 2), .repeatPrevious(group: 3), .write(group: 4)])
    }

    @Test func secondFrameForAGroupIsDiscarded() {
        var a = GroupAssigner(grid: grid, startGroup: 0, stopGroup: 10)
        #expect(a.frame(center: 1_000) == [.repeatPrevious(group: 0), .write(group: 1)])
        #expect(a.frame(center: 1_400) == [.discard])
        #expect(a.frame(center: 600) == [.discard])
        #expect(a.discarded == 2)
    }

    @Test func frameBeyondTheStopFillsToTheStopAndFinishes() {
        var a = GroupAssigner(grid: grid, startGroup: 0, stopGroup: 3)
        #expect(a.frame(center: 0) == [.write(group: 0)])
        #expect(a.frame(center: 9_000) == [.repeatPrevious(group: 1), .repeatPrevious(group: 2), .finish])
        #expect(a.written == 1 && a.repeated == 2 && a.isFinished)
    }

    @Test func frameExactlyAtTheStopGroupFinishesWithoutWriting() {
        var a = GroupAssigner(grid: grid, startGroup: 0, stopGroup: 2)
        #expect(a.frame(center: 0) == [.write(group: 0)])
        #expect(a.frame(center: 1_000) == [.write(group: 1), .finish])
        var b = GroupAssigner(grid: grid, startGroup: 0, stopGroup: 2)
        #expect(b.frame(center: 0) == [.write(group: 0)])
        #expect(b.frame(center: 2_000) == [.repeatPrevious(group: 1), .finish])
    }

    @Test func tickFillsOnlyOverdueGroups() {
        var a = GroupAssigner(grid: grid, startGroup: 5, stopGroup: 10)
        #expect(a.tick(now: 5_300, lateness: 300) == [])  // instant 5000 + 300 is not before now
        #expect(a.tick(now: 5_301, lateness: 300) == [.repeatPrevious(group: 5)])
        #expect(a.tick(now: 5_900, lateness: 300) == [])
        #expect(a.tick(now: 7_400, lateness: 300) == [.repeatPrevious(group: 6), .repeatPrevious(group: 7)])
        // A frame for a group the tick already filled comes too late.
        #expect(a.frame(center: 6_950) == [.discard])
        #expect(a.frame(center: 8_000) == [.write(group: 8)])
        #expect(a.tick(now: 1_000_000, lateness: 300) == [.repeatPrevious(group: 9), .finish])
        #expect(a.isFinished)
        #expect(a.tick(now: 2_000_000, lateness: 0) == [])
        #expect(a.repeated == 4 && a.written == 1)
    }

    @Test func tickWithoutAStopNeverFinishes() {
        var a = GroupAssigner(grid: grid, startGroup: 0, stopGroup: nil)
        let actions = a.tick(now: 10_500, lateness: 0)
        #expect(actions == (0...10).map { .repeatPrevious(group: $0) })
        #expect(!a.isFinished)
        #expect(a.frame(center: 11_000) == [.write(group: 11)])
    }

    @Test func tickFinishesWhenTheStopHasAlreadyBeenReachedByFrames() {
        var a = GroupAssigner(grid: grid, startGroup: 0, stopGroup: nil)
        #expect(a.frame(center: 0) == [.write(group: 0)])
        #expect(a.frame(center: 1_000) == [.write(group: 1)])
        #expect(a.stop(at: 2) == [.finish])
        #expect(a.isFinished)
        #expect(a.tick(now: 100_000, lateness: 0) == [])
    }

    @Test func stopMovedEarlierEndsTheFileAtTheNewStop() {
        var a = GroupAssigner(grid: grid, startGroup: 0, stopGroup: 100)
        #expect(a.frame(center: 0) == [.write(group: 0)])
        #expect(a.frame(center: 1_000) == [.write(group: 1)])
        #expect(a.stop(at: 4) == [])
        #expect(a.stopGroup == 4)
        #expect(a.frame(center: 2_000) == [.write(group: 2)])
        #expect(a.frame(center: 3_000) == [.write(group: 3), .finish])
        #expect(a.frame(center: 4_000) == [.discard])
    }

    @Test func stopMovedLaterKeepsRecording() {
        var a = GroupAssigner(grid: grid, startGroup: 0, stopGroup: 2)
        #expect(a.frame(center: 0) == [.write(group: 0)])
        #expect(a.stop(at: 4) == [])
        #expect(a.frame(center: 1_000) == [.write(group: 1)])
        #expect(a.frame(center: 2_000) == [.write(group: 2)])
        #expect(!a.isFinished)
        #expect(a.frame(center: 3_000) == [.write(group: 3), .finish])
    }

    @Test func stopAtOrBeforeTheNextGroupFinishesAtOnce() {
        var a = GroupAssigner(grid: grid, startGroup: 0, stopGroup: nil)
        #expect(a.frame(center: 0) == [.write(group: 0)])
        #expect(a.frame(center: 1_000) == [.write(group: 1)])
        #expect(a.stop(at: 2) == [.finish])  // exactly the next group: groups 0 and 1 are the take
        var b = GroupAssigner(grid: grid, startGroup: 0, stopGroup: nil)
        #expect(b.frame(center: 0) == [.write(group: 0)])
        #expect(b.frame(center: 1_000) == [.write(group: 1)])
        #expect(b.stop(at: 1) == [.finish])  // already past: it can only finish now
        #expect(b.stop(at: 50) == [])         // and stays finished
        #expect(b.frame(center: 2_000) == [.discard])
    }

    @Test func stopAtOrBeforeTheStartStillRecordsOneGroup() {
        var a = GroupAssigner(grid: grid, startGroup: 3, stopGroup: nil)
        #expect(a.stop(at: 0) == [])
        #expect(a.stopGroup == 4)
        #expect(a.frame(center: 3_000) == [.write(group: 3), .finish])
    }
}
