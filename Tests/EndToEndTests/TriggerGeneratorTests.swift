import CoordCore
import Foundation
import NodeAgent
import Platform
import Synchronization
import Testing

/// A scripted trigger line: records every level it is driven to, with the node clock's time.
final class ScriptedLine: TriggerLine {
    let levels = Mutex<[(active: Bool, at: Int64)]>([])
    let closed = Mutex(false)
    func set(_ active: Bool) throws(GPIOFailure) { levels.withLock { $0.append((active, MonotonicClock.now())) } }
    func close() { closed.withLock { $0 = true } }
}

@Suite struct TriggerGeneratorTests {
    let output = TriggerOutput(name: "sync", chip: "/dev/gpiochip0", line: 17, widthMicroseconds: 1_000, active: .high)

    /// The whole shell on a scripted line: 20 groups at 100 fps on a clock 5 s off the rig's, exactly 20 pulses,
    /// each rise at its group's edge mapped to the node clock, each fall a width later, none outside the take.
    @Test func aTakeOfTwentyGroupsIsTwentyPulsesOnTheGrid() async throws {
        let offset = 5_000_000.0
        let mapping = ClockMapping(offsetMicroseconds: offset)
        let localStart = MonotonicClock.now() + 80_000
        let grid = FrameGrid(t0: localStart + Int64(offset), periodMicroseconds: 10_000)
        let schedule = TriggerSchedule(grid: grid, delayMicroseconds: 50, exposureMicroseconds: 4_000, widthMicroseconds: 1_000,
                                       stopGroup: 20)
        let line = ScriptedLine()
        let generator = TriggerGenerator(output: output, line: line, schedule: schedule, mapping: { mapping })
        await generator.run()
        let edges = generator.edges
        #expect(edges.map(\.group) == Array(0..<20))
        for e in edges {
            #expect(e.intended == localStart + e.group * 10_000 - 50 - 2_000)
            #expect(e.actual >= e.intended)
        }
        let levels = line.levels.withLock { $0 }
        #expect(levels.count == 40)
        #expect(levels.enumerated().allSatisfy { $0.element.active == ($0.offset % 2 == 0) })
        #expect(levels.first!.at >= edges.first!.intended)
        for i in stride(from: 0, to: levels.count, by: 2) { #expect(levels[i + 1].at - levels[i].at >= 1_000) }
        #expect(line.closed.withLock { $0 })
        // The figure the manifest carries; loose on a shared 2-core builder, but a spin makes p50 small.
        let timing = generator.timing
        #expect(timing.p50 < 2_000 && timing.max >= timing.p99 && timing.p99 >= timing.p50)
        #expect(generator.failure == nil)
    }

    /// A Snap's shots (issue 39): one pulse on each asked group, none between them, then the train ends by itself.
    @Test func aShotsGroupsAreOnePulseEachAndNoneBetween() async throws {
        let grid = FrameGrid(t0: MonotonicClock.now() + 40_000, periodMicroseconds: 10_000)
        let schedule = TriggerSchedule(grid: grid, delayMicroseconds: 20, exposureMicroseconds: 2_000, widthMicroseconds: 500, groups: [2, 5, 6])
        let line = ScriptedLine()
        let generator = TriggerGenerator(output: output, line: line, schedule: schedule, mapping: { .identity })
        await generator.run()
        #expect(generator.edges.map(\.group) == [2, 5, 6])
        #expect(generator.edges.allSatisfy { $0.intended == grid.instant(ofGroup: $0.group) - 20 - 1_000 && $0.actual >= $0.intended })
        #expect(line.levels.withLock { $0.count } == 6 && line.closed.withLock { $0 })
    }

    /// An open-ended take (stop not known yet) ends when its task is cancelled, mid-sleep, with the line released.
    @Test func cancellingTheTaskEndsAnOpenEndedTrain() async throws {
        let grid = FrameGrid(t0: MonotonicClock.now() + 30_000, periodMicroseconds: 20_000)
        let schedule = TriggerSchedule(grid: grid, delayMicroseconds: 0, exposureMicroseconds: 0, widthMicroseconds: 1_000)
        let line = ScriptedLine()
        let generator = TriggerGenerator(output: output, line: line, schedule: schedule, mapping: { .identity })
        let cancelled = Mutex<Int64>(0)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await generator.run() }
            // Wait for three pulses through the line itself, then cancel.
            while generator.edges.count < 3 { await Task.yield(); try? await Task.sleep(for: .milliseconds(2)) }
            cancelled.withLock { $0 = MonotonicClock.now() }
            group.cancelAll()
        }
        // The train ends within a sleep slice of the cancel (20 ms), bounded loosely for a loaded builder; an open-ended
        // train that ignored the cancel would never end at all.
        let cancelledAt = cancelled.withLock { $0 }
        #expect(MonotonicClock.now() - cancelledAt < 1_000_000)
        #expect(generator.edges.count >= 3)
        // At most the pulse the thread was spinning towards and one more within the slice that saw the cancel.
        #expect(generator.edges.filter { $0.actual > cancelledAt }.count <= 2)
        #expect(line.closed.withLock { $0 })
        let levels = line.levels.withLock { $0 }
        #expect(levels.last?.active == false)
    }

    /// The stop group arriving mid-take ends the train after that group's pulse.
    @Test func aStopMidTakeEndsAfterTheLastGroup() async throws {
        let grid = FrameGrid(t0: MonotonicClock.now() + 30_000, periodMicroseconds: 10_000)
        let schedule = TriggerSchedule(grid: grid, delayMicroseconds: 0, exposureMicroseconds: 0, widthMicroseconds: 500)
        let generator = TriggerGenerator(output: output, line: ScriptedLine(), schedule: schedule, mapping: { .identity })
        generator.stop(at: 6)
        await generator.run()
        #expect(generator.edges.map(\.group) == Array(0..<6))
    }
}
