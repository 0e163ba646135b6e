import CoordCore
import CoordWire
import Foundation
import Platform

extension TakeSession {
    /// Phase 2: waits until every node's clock is known (the take directory goes if it never is) and says each
    /// node's figures.
    func align(_ take: inout TakeRun) async throws {
        console.step("aligning clocks")
        let mappings: [String: ClockMapping]
        let aligning = MonotonicClock.now()
        do {
            mappings = try await take.tracker.aligned()
            console.step(String(format: "clocks aligned in %.1f s", Double(MonotonicClock.now() - aligning) / 1e6)
                         + Self.followedNote(take.tracker.followedOutcome, handed: !followed.isEmpty, nodes: take.plans.count))
        } catch {
            try? FileManager.default.removeItem(at: take.directory)
            throw error
        }
        for i in take.plans.indices { take.plans[i].mapping = mappings[take.plans[i].name]! }
        for plan in take.plans {
            let figures = TakeManifest.ClockTrackPoint(node: plan.name, at: MonotonicClock.now(), mapping: plan.mapping)
            console.step(String(format: "  %@: offset %+.0f µs, drift %+.2f ppm, uncertainty ±%.1f µs (bound ±%.0f µs); time service: %@",
                                plan.name, figures.offsetMicroseconds, figures.driftPPM, figures.uncertaintyMicroseconds,
                                figures.boundMicroseconds, plan.timeService))
        }
    }

    /// " (63 of 64 already followed, 2 of them topped up; aligned afresh: n3 disagreed)"; nothing when no clock was
    /// handed over.
    static func followedNote(_ outcome: (used: Set<String>, refused: [String: String], toppedUp: Set<String>), handed: Bool,
                             nodes: Int) -> String {
        guard handed else { return "" }
        let refused = outcome.refused.sorted { $0.key < $1.key }
        var note = " (\(outcome.used.count) of \(nodes) already followed"
        if !outcome.toppedUp.isEmpty { note += ", \(outcome.toppedUp.count) of them topped up" }
        if !refused.isEmpty {
            note += "; aligned afresh: " + refused.prefix(5).map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            if refused.count > 5 { note += " and \(refused.count - 5) more" }
        }
        return note + ")"
    }

    /// What configuring the rig left: the start's state, its next directive (arm, or abandon) and the slowest
    /// configure round trip (µs).
    struct Configured: Sendable {
        var start: TakeStart
        var directive: TakeStart.Directive
        var slowest: Int64
    }

    /// Each node's failure as one sentence, by node name.
    static func failures<T>(_ nodes: [String], _ results: [Result<T, Error>]) -> [String: String] {
        Dictionary(uniqueKeysWithValues: zip(nodes, results).compactMap { node, r in r.failure.map { (node, "\($0)") } })
    }

    /// Configures the rig as `TakeStart` directs (the rig file's first node alone, then the others). It runs while
    /// the clocks are aligned: neither needs the other, so a console's take does not wait for both in turn.
    func configure(_ plans: [NodePlan], takeID: String) async -> Configured {
        let byName = Dictionary(uniqueKeysWithValues: plans.map { ($0.name, $0) })
        var start = TakeStart(nodes: plans.map(\.name))
        var directive = start.begin()
        var slowest: Int64 = 0
        let began = MonotonicClock.now()
        while case .configure(let nodes) = directive {
            let (failures, took) = await configureRound(nodes.compactMap { byName[$0] }, takeID: takeID)
            slowest = max(slowest, took)
            directive = start.configured(nodes, failures: failures)
        }
        if case .arm = directive {
            console.step(String(format: "configured %d node(s) in %.2f s (slowest round trip %.0f ms)", plans.count,
                                Double(MonotonicClock.now() - began) / 1e6, Double(slowest) / 1e3))
        }
        return Configured(start: start, directive: directive, slowest: slowest)
    }

    /// One configure round to `plans` at once: each node's failure and how long the round took.
    private func configureRound(_ plans: [NodePlan], takeID: String) async -> (failures: [String: String], took: Int64) {
        let sent = MonotonicClock.now()
        let results = await eachNodeResult(plans) { plan in
            _ = try await plan.link.request(CoordRequest.configure(takeID: takeID, cameras: plan.cameras),
                                            timeout: 5, what: "the configuration")
        }
        return (Self.failures(plans.map(\.name), results), MonotonicClock.now() - sent)
    }

    /// Phase 3: arms every node as `TakeStart` directs (after `configure`) — group 0 far enough ahead for all to be
    /// ready and for each camera's phase loop to settle on the grid — and starts every camera on group 0, to stop
    /// after the last group. Leaves the manifest of a recording take on disk.
    func start(_ take: inout TakeRun, after configured: Configured) async throws {
        let rate = request.rate
        let period = rate.periodMicroseconds
        let plannedGroups = Int64((request.seconds * rate.value).rounded())
        guard plannedGroups >= 1 else { throw CoordError(.usage, "--seconds \(request.seconds) is shorter than one frame.") }
        take.plannedGroups = plannedGroups
        take.wallclockService = WallclockServiceProbe.read()
        var lead: Int64 = 0
        var slowestConfigure = configured.slowest
        let margin = max(200_000, 3 * period)
        var t0Date = Date()
        let takeID = take.takeID, tracker = take.tracker, byName = take.byName, preview = request.preview
        var start = configured.start
        var directive = configured.directive
        // What a late arming of this take measured (`rearm`): the second arm's lead is made from it.
        var learned: TakeStart.Arming?
        startLoop: while true {
            switch directive {
            case .configure(let nodes):
                let (failures, took) = await configureRound(nodes.compactMap { byName[$0] }, takeID: takeID)
                slowestConfigure = max(slowestConfigure, took)
                directive = start.configured(nodes, failures: failures)
            case .arm(let nodes):
                lead = TakeStart.groupZeroLead(slowestConfigure: slowestConfigure, nodes: nodes.count, previous: learned ?? previousArming)
                // Group 0's local time of day, for every file's timecode tag and the editorial timeline.
                // One reading of the wall clock at t0 gives both the manifest's start_wallclock and the timecode;
                // t0 then waits for the next frame of the time of day, so group 0 is its timecode label (§13).
                let early = MonotonicClock.now() + lead
                let earlyDate = Date(timeIntervalSinceNow: Double(early - MonotonicClock.now()) / 1e6)
                let onFrame = TimeOfDayFrame.delay(after: Timecode.microsecondsOfDay(earlyDate, timeZone: TimeZone.current), rate: rate)
                lead += onFrame
                take.grid = FrameGrid(t0: early + onFrame, rate: rate)
                t0Date = earlyDate.addingTimeInterval(Double(onFrame) / 1e6)
                console.step("arming; group 0 in \(lead / 1000) ms")
                take.timecode = Timecode(date: t0Date, rate: rate, timeZone: TimeZone.current).description
                let (armGrid, armTimecode, armLead) = (take.grid, take.timecode, lead)
                let arming = MonotonicClock.now()
                let results = await eachNodeResult(nodes.compactMap { byName[$0] }) { plan -> Int64 in
                    let began = MonotonicClock.now()
                    let arm = CoordRequest.arm(takeID: takeID, clock: plan.mapping, grid: armGrid, timecode: armTimecode,
                                               preview: preview)
                    tracker.armed(plan.name, at: began, with: plan.mapping)
                    let (reply, _) = try await plan.link.request(arm, timeout: Double(armLead) / 1e6, what: "arming")
                    if case .armed(let armed) = reply.body {
                        let checked: NodeReply.Armed
                        do throws(FieldFault) { checked = try NodeReply.armed(armed, takeID: takeID, from: "node \(plan.name)") } catch { throw CoordError(error, node: plan.name) }
                        self.ledger.withLock { shared in
                            for c in checked.controls { shared.controls["\(plan.name)/\(c.camera)"] = c.controls }
                            for (camera, device) in checked.cameraDevices { shared.devices["\(plan.name)/\(camera)"] = device }
                            for (mic, device) in checked.micDevices { shared.micDevices["\(plan.name)/\(mic)"] = device }
                        }
                        for warning in armed.warnings {
                            self.console.step("  warning: \(warning)")
                            self.addEvent(TakeEvent(.phaseFixed, at: began, node: plan.name, warning))
                        }
                    }
                    return MonotonicClock.now() - began
                }
                let times = Dictionary(uniqueKeysWithValues: zip(nodes, results).compactMap { n, r in r.success.map { (n, $0) } })
                let armed = TakeStart.Arming(nodes: nodes.count, took: MonotonicClock.now() - arming)
                ledger.withLock { $0.arming = armed }
                console.step(String(format: "armed %d node(s) in %.2f s", nodes.count, Double(armed.took) / 1e6))
                directive = start.armed(failures: Self.failures(nodes, results), armTimes: times, now: MonotonicClock.now(),
                                        t0: take.grid.t0, margin: margin)
                if case .start = directive { tracker.startPushing(takeID: takeID) }
            case .start(let nodes):
                // A node takes the start up to a frame before group 0 (and refuses it later, saying so): each is
                // waited for until then, and never for less than 50 ms.
                let startBy = take.grid.t0 - take.grid.periodMicroseconds
                let results = await eachNodeResult(nodes.compactMap { byName[$0] }) { plan in
                    _ = try await plan.link.request(CoordRequest.startAt(takeID: takeID, startGroup: 0, stopGroup: plannedGroups),
                                                    timeout: max(0.05, Double(startBy - MonotonicClock.now()) / 1e6),
                                                    what: "the start")
                }
                directive = start.started(failures: Self.failures(nodes, results))
            case .rearm(let nodes, let measured, let note):
                console.step(note)
                addEvent(TakeEvent(.armedAgain, at: MonotonicClock.now(), note))
                learned = measured
                await abortAll(nodes.compactMap { byName[$0] }, takeID: takeID, reason: "arming again with more lead")
                directive = start.rearming()
            case .abandon(let reason, let failure):
                await abortAll(take.plans, takeID: takeID, reason: reason)
                try? FileManager.default.removeItem(at: take.directory)
                throw CoordError(.failure, failure)
            case .recording:
                break startLoop
            }
        }
        take.startWallclock = WallClock.rfc3339(t0Date)
        addEvent(TakeEvent(.start, at: take.grid.t0, "all \(take.cameraCount) camera(s) start at group 0"))
        // Already now a manifest: should this coordinator die while recording, the nodes still stop at the planned
        // group and `coord collect` can bring the take home from it.
        let started = pendingManifest(take, groups: plannedGroups, finalStatus: [:])
        try? TakeDirectoryWriter(directory: take.directory).writePending(started)
    }

    func abortAll(_ plans: [NodePlan], takeID: String, reason: String) async {
        await eachNodeResult(plans) { plan in
            _ = try await plan.link.request(CoordRequest.abort(takeID: takeID, reason: reason), timeout: 2, what: "the abort")
        }
    }
}
