import CoordCore
import Foundation
import Platform
import Synchronization

/// The node's trigger trains in its structured concurrency: `BuiltNode.run` runs `run` beside its service group,
/// each train an arm launches is a child task here, so a stop group ends it after its last pulse and the node's end
/// (cancelled once the group, whose socket's graceful stop gives a recording take's trains their stop group, has
/// ended) cancels what is left. An agent that is not run as a node (a test's) runs its trains on their threads alone.
public final class TriggerRuns: Sendable {
    private let trains: AsyncStream<TriggerGenerator>
    private let arriving: AsyncStream<TriggerGenerator>.Continuation
    private let attached = Mutex(false)

    init() { (trains, arriving) = AsyncStream.makeStream() }

    /// Runs every train launched from now on until the task is cancelled.
    public func run() async {
        attached.withLock { $0 = true }
        await withDiscardingTaskGroup { group in
            // Ends when this task is cancelled: the node is ending, and a train still open stops now.
            for await train in trains { group.addTask { await train.run() } }
            group.cancelAll()
        }
        attached.withLock { $0 = false }
    }

    /// Runs `train` from now on, in the group when there is one (true) or on its thread alone.
    func launch(_ train: TriggerGenerator) -> Bool {
        let inGroup = attached.withLock { $0 }
        if inGroup, case .enqueued = arriving.yield(train) { return true }
        train.start()
        return false
    }
}

/// A triggered camera's part of its output's pulse train: the generator (shared by every camera on the output)
/// and the camera's own binding, whose delay and exposure place its frames' centres.
struct CameraTriggering: Sendable {
    let generator: TriggerGenerator
    let binding: CameraTrigger
    /// The camera's pulses as the matcher expects them (its own delay; the exposure set for the take, or 0).
    let schedule: TriggerSchedule
}

extension NodeAgent {
    /// The arm's trigger outputs (CONTRACT §17): one generator per output an armed camera is bound to, its line
    /// opened now (a missing or busy chip refuses the arm with GPIOLine's sentence naming chip and line), pulsing
    /// from group 0 on the grid mapped through the clock the node follows; started here (the first edge is group
    /// 0's, seconds away), ended by the stop group the recorders are given or by `cancel` (an abort, a failed arm).
    /// `groups`: a Snap's shots while the node previews (one pulse each, none between), instead of a take's every group.
    func openTriggerOutputs(settings: [CameraSettings], grid: FrameGrid, mapping: ClockMappingBox,
                            groups: [Int64]? = nil) throws(NodeFailure) -> [String: CameraTriggering] {
        var generators: [String: TriggerGenerator] = [:]
        var out: [String: CameraTriggering] = [:]
        do throws(NodeFailure) {
            for s in settings {
                guard let binding = configuration.cameraTriggers[s.camera],
                      let output = configuration.triggerOutputs.first(where: { $0.name == binding.output }) else { continue }
                let exposure = Int64(s.controls.exposureMicroseconds ?? 0)
                let schedule = groups.map {
                    TriggerSchedule(grid: grid, delayMicroseconds: binding.delayMicroseconds, exposureMicroseconds: exposure,
                                    widthMicroseconds: output.widthMicroseconds, groups: $0)
                } ?? TriggerSchedule(grid: grid, delayMicroseconds: binding.delayMicroseconds, exposureMicroseconds: exposure,
                                     widthMicroseconds: output.widthMicroseconds)
                if generators[output.name] == nil {
                    if let problem = TriggerSchedule.widthProblem(output: output.name, widthMicroseconds: output.widthMicroseconds, rate: grid.rate) {
                        throw NodeFailure(.badConfig, "node \(configuration.name): \(problem)")
                    }
                    let line: any TriggerLine
                    do {
                        line = try configuration.triggerLine(output)
                    } catch {
                        throw NodeFailure(.io, "node \(configuration.name), trigger output \(output.name): \(error.description)")
                    }
                    // The first camera bound to the output places its edges; another camera's own delay places its centres.
                    generators[output.name] = TriggerGenerator(output: output, line: line, schedule: schedule) { mapping.current }
                }
                out[s.camera] = CameraTriggering(generator: generators[output.name]!, binding: binding, schedule: schedule)
            }
        } catch {
            generators.values.forEach { $0.cancel(); $0.start() }  // releases the lines at once
            throw error
        }
        for generator in out.generators {
            let o = generator.output
            let where_ = triggerRuns.launch(generator) ? "the node's task group" : "its own thread"
            logger.info("trigger output started", metadata: ["output": "\(o.name)", "chip": "\(o.chip)", "line": "\(o.line)", "runs_in": "\(where_)"])
        }
        return out
    }
}

extension [String: CameraTriggering] {
    /// Each output's generator once.
    var generators: [TriggerGenerator] {
        var seen = Set<ObjectIdentifier>()
        return values.map(\.generator).filter { seen.insert(ObjectIdentifier($0)).inserted }
    }
}
