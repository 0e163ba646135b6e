import CoordCore
import Foundation
import Platform
import Synchronization

/// One edge the generator emitted: its group, intended and measured instants on the node's clock (µs).
public struct TriggerEdge: Equatable, Sendable {
    public var group: Int64
    public var intended: Int64
    public var actual: Int64
    public var error: Int64 { actual - intended }
}

/// The trigger generator of one output (CONTRACT §17): a dedicated thread, at real-time priority where allowed,
/// sleeps on clock_nanosleep(TIMER_ABSTIME) to `spinMicroseconds` before each edge on the node's clock (the rig
/// instant mapped through the clock alignment), spins to the edge, drives the line active, records the edge's
/// actual time, and drives it inactive after the pulse width. It ends after the take's last group, or at once
/// when the task running `run` is cancelled (SIGTERM through the node's service group), leaving the line inactive.
public final class TriggerGenerator: Sendable {
    public let output: TriggerOutput
    let line: any TriggerLine
    /// The node clock's mapping onto the rig timebase, read before every edge so clock updates apply from the next pulse.
    let mapping: @Sendable () -> ClockMapping
    let now: @Sendable () -> Int64
    /// How long before an edge the thread stops sleeping and spins: a sleep's wake-up is late by tens of µs
    /// (more under load), a spin is exact but burns the core, so only this long.
    let spinMicroseconds: Int64
    private let state: Mutex<(schedule: TriggerSchedule, cancelled: Bool, edges: [TriggerEdge], failure: String?)>
    /// Signalled once the thread has released the line (a train ended so a take or a Snap can open it).
    private let released = DispatchSemaphore(value: 0)

    public init(output: TriggerOutput, line: any TriggerLine, schedule: TriggerSchedule, spinMicroseconds: Int64 = 100,
                now: @escaping @Sendable () -> Int64 = MonotonicClock.now,
                mapping: @escaping @Sendable () -> ClockMapping) {
        self.output = output
        self.line = line
        self.mapping = mapping
        self.now = now
        self.spinMicroseconds = spinMicroseconds
        state = Mutex((schedule, false, [], nil))
    }

    /// The take's stop group (exclusive) became known.
    public func stop(at group: Int64) { state.withLock { $0.schedule.stop(at: group) } }

    public var edges: [TriggerEdge] { state.withLock { $0.edges } }
    /// The edges after the first `count` (a recorder reading them as they come, without copying the take's).
    public func edges(after count: Int) -> [TriggerEdge] { state.withLock { count < $0.edges.count ? Array($0.edges[count...]) : [] } }
    /// Why the line stopped pulsing early (a GPIO failure), if it did.
    public var failure: String? { state.withLock { $0.failure } }
    public var timing: TriggerTiming { TriggerTiming(errors: edges.map(\.error)) }

    /// Emits the take's pulses on a dedicated thread; returns when the last is done or the task is cancelled.
    public func run() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                start { done.resume() }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Starts the pulses on their own thread (the node's take, whose recorders are threads too); `onEnd` runs on
    /// it once the last pulse is done or `cancel` was called, with the line released.
    public func start(onEnd: @escaping @Sendable () -> Void = {}) {
        let thread = Thread { [self] in
            ThreadPriority.nameCurrentThread("trigger-\(output.name)")
            ThreadPriority.raiseCurrentThread()
            pulses()
            line.close()
            released.signal()
            onEnd()
        }
        thread.start()
    }

    /// Waits until the thread has released the line, at most until `deadline`; false if it has not.
    public func waitReleased(deadline: DispatchTime) -> Bool { released.wait(timeout: deadline) == .success }

    /// Ends the train within one sleep slice (an abort, a failed arm, the node shutting down without a stop group).
    public func cancel() { state.withLock { $0.cancelled = true } }

    /// The generator thread's loop.
    private func pulses() {
        // Sleeps in slices so a cancel or a stop is seen within one slice even before a far edge.
        let slice: Int64 = 20_000
        var next: Int64?
        var started = false
        while true {
            let (schedule, cancelled) = state.withLock { ($0.schedule, $0.cancelled) }
            if cancelled { return }
            let m = mapping()
            if !started {
                // Started late (or restarted): the first edge still ahead, never one in the past.
                guard let first = schedule.nextPulse(atOrAfter: Int64(m.rig(fromLocal: Double(now())).rounded(.up))) else { return }
                next = first.group
                started = true
            }
            guard let group = next, let p = schedule.pulse(ofGroup: group) else { return }  // past the take's last group
            let edge = Int64(m.local(fromRig: Double(p.edge)).rounded())
            let t = now()
            if t < edge - spinMicroseconds {
                MonotonicClock.sleep(until: min(edge - spinMicroseconds, t + slice))
                continue  // look at the schedule, the mapping and a cancel again
            }
            if t > edge + schedule.grid.periodMicroseconds / 2 {
                next = schedule.group(after: group)  // woke too late for this group: no pulse rather than one on the wrong frame
                continue
            }
            while now() < edge {}
            do {
                try line.set(true)
                let actual = now()
                state.withLock { $0.edges.append(TriggerEdge(group: group, intended: edge, actual: actual)) }
                MonotonicClock.sleep(until: actual + output.widthMicroseconds)
                try line.set(false)
            } catch {
                state.withLock { $0.failure = error.description }
                return
            }
            next = schedule.group(after: group)  // a Snap's next shot, or the take's next group
        }
    }
}
