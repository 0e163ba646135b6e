import CoordCore
import CoordWire
import Foundation
import Platform

extension TakeSession {
    /// What recording left: the nodes whose files are not final, the take's groups (fewer than planned if stopped
    /// early) and each node's last status.
    struct Recorded {
        var unfinished: Set<String>
        var groups: Int64
        var finalStatus: [String: NodeStatus]
    }

    /// Phase 4: carries out the take's `TakeConductor`, showing progress, until every node reports its files final
    /// (or is given up on).
    func record(_ take: inout TakeRun) async throws -> Recorded {
        setRecording(true)
        // `state` is what the nested `perform` below changes (pressure bookkeeping); written back on the way out.
        var state = take
        defer { take = state }
        let takeID = state.takeID, grid = state.grid, byName = state.byName
        var conductor = TakeConductor(takeID: takeID, nodes: state.plans.map(\.name), grid: grid, groups: state.plannedGroups,
                                      now: MonotonicClock.now())
        var lastStatus: [String: NodeStatus] = [:]
        var lastProgress: Int64 = 0
        var outcome: TakeConductor.Finish?
        // Carries out one batch of directives; what they bring back (acknowledgements, statuses) is fed back in.
        func perform(_ directives: [TakeConductor.Directive]) async {
            for directive in directives {
                switch directive {
                case .say(let line):
                    console.step(line)
                case .record(let event):
                    addEvent(event)
                case .finish(let finish):
                    outcome = finish
                case .sendStop(let group, let nodes, let fresh):
                    let context = self.context, keys = self.keys
                    let results = await eachNodeResult(nodes.compactMap { byName[$0] }) { plan in
                        let stop = CoordRequest.stopAt(takeID: takeID, stopGroup: group)
                        guard fresh.contains(plan.name) else {
                            _ = try await plan.link.request(stop, timeout: 0.5, what: "the stop")
                            return
                        }
                        let link = try NodeLink(endpoint: plan.link.endpoint, context: context, keys: keys[plan.link.endpoint])
                        link.setName(plan.name)
                        defer { link.close() }
                        _ = try await link.request(stop, timeout: 0.5, what: "the stop")
                    }
                    for (node, result) in zip(nodes, results) {
                        if case .failure(let f) = result {
                            logger.warning("stop not acknowledged", metadata: ["node": "\(node)", "error": "\(f)"])
                            await perform(conductor.handle(.stopFailed(node: node)))
                        } else {
                            await perform(conductor.handle(.stopAcknowledged(node: node, now: MonotonicClock.now())))
                        }
                    }
                case .requestStatus(let nodes):
                    var faultSaid = Set<String>()
                    let pending = nodes.compactMap { byName[$0] }
                    let results = await eachNodeResult(pending) { plan -> NodeStatus in
                        let (reply, _) = try await plan.link.request(CoordRequest.status, timeout: 2, what: "a status request")
                        guard case .status(let s) = reply.body else { throw CoordError(.failure, "node \(plan.name) answered status with something else.") }
                        // Events are the sender's: named after the node as this rig knows it.
                        var status: NodeStatus
                        do throws(FieldFault) { status = try NodeReply.status(s, from: "node \(plan.name)") } catch { throw CoordError(error, node: plan.name) }
                        status.node = plan.name
                        for i in status.events.indices { status.events[i].node = plan.name }
                        return status
                    }
                    for (plan, result) in zip(pending, results) {
                        let now = MonotonicClock.now()
                        switch result {
                        case .success(let s):
                            lastStatus[plan.name] = s
                            await perform(conductor.handle(.status(node: plan.name, s.report, now: now)))
                            let disabled = await respondToPressure(s, plan: plan, take: &state, stopGroup: conductor.groups)
                            for camera in disabled { conductor.disabledByPolicy(node: plan.name, camera: camera) }
                        case .failure(let error):
                            logger.warning("status failed", metadata: ["node": "\(plan.name)", "error": "\(error)"])
                            // A reply the coordinator cannot use is said once: the node then counts as silent.
                            if let e = error as? CoordError, e.subject.field != nil, faultSaid.insert(plan.name).inserted {
                                console.step("  warning: \(e.message)")
                            }
                            await perform(conductor.handle(.statusFailed(node: plan.name, now: now)))
                        }
                    }
                }
            }
        }
        while outcome == nil {
            if takeStopRequest() { await perform(conductor.handle(.operatorStop(now: MonotonicClock.now()))) }
            await perform(conductor.handle(.tick(now: MonotonicClock.now())))
            let span = (groupZero: grid.t0, stop: conductor.stopInstant)
            phase.withLock { $0.span = span }
            guard outcome == nil else { break }
            let now = MonotonicClock.now()
            if now - lastProgress >= 1_000_000 {
                lastProgress = now
                showProgress(conductor, statuses: Array(lastStatus.values), now: now)
            }
            try await Task.sleep(nanoseconds: UInt64(conductor.pollInterval(now: MonotonicClock.now())) * 1000)
        }
        showProgress(conductor, statuses: Array(lastStatus.values), now: MonotonicClock.now())
        state.disabledElsewhere = conductor.disabledElsewhere
        setRecording(false)
        return Recorded(unfinished: outcome!.unfinished, groups: outcome!.groups, finalStatus: lastStatus)
    }

    /// The clock tracker's figures once every camera has stopped, and its failures as the take's events.
    func sayTracking(_ take: TakeRun, since trackingSince: Int64) {
        let tracker = take.tracker
        let tracked = Double(MonotonicClock.now() - trackingSince) / 1e6
        console.step(String(format: "clock probes: %d in %.1f s, %.0f a second for %d node(s) (100 a second each until a clock is known, then %.0f)",
                            tracker.probes, tracked, Double(tracker.probes) / max(tracked, 0.001), take.plans.count,
                            1e6 / Double(ClockProbePolicy.interval(nodes: take.plans.count, known: true))))
        for (node, failure) in tracker.failures {
            addEvent(TakeEvent(.clockUpdateFailed, at: MonotonicClock.now(), node: node, failure))
        }
        for (node, count) in tracker.held {
            addEvent(TakeEvent(.clockUpdateHeld, at: MonotonicClock.now(), node: node,
                     "\(count) clock update(s) for node \(node) were held back: the new estimate was far less certain than the one in force"))
        }
    }

    /// Phase 5: the manifest as recording left it, on disk before any file moves (if this coordinator dies while
    /// collecting, `coord collect` finishes the take from it); then collection, unless the files stay on the nodes.
    func collect(_ take: TakeRun, _ recorded: Recorded) async throws -> TakeOutcome {
        let manifest = pendingManifest(take, groups: recorded.groups, finalStatus: recorded.finalStatus)
        let directory = take.directory
        try TakeDirectoryWriter(directory: directory).writePending(manifest)
        setCollecting(directory)
        if request.collectLater {
            console.step("the files stay on the nodes; collect them with: coord collect --rig RIG.yaml \(directory.path)")
            return TakeOutcome(directory: directory, manifest: manifest,
                               report: SyncReport(groups: recorded.groups, grid: take.grid, inputs: []))
        }
        // Every node is asked, also one that failed or went quiet: what it recorded before is worth having, and
        // one that does not answer is named within seconds.
        if !recorded.unfinished.isEmpty {
            console.step("collecting what \(recorded.unfinished.sorted().joined(separator: ", ")) recorded as well")
        }
        let linksByNode = Dictionary(uniqueKeysWithValues: take.plans.map { ($0.name, $0.link) })
        let lock = try CollectLock(directory: directory, takeID: take.takeID)
        defer { lock.release() }
        let (finished, report) = try await TakeCollection.run(directory: directory, manifest: manifest, links: linksByNode,
                                                              policy: request.collectPolicy, console: console)
        return TakeOutcome(directory: directory, manifest: finished, report: report)
    }

    private func showProgress(_ conductor: TakeConductor, statuses: [NodeStatus], now: Int64) {
        let grid = conductor.grid
        let stopInstant = conductor.stopInstant
        let elapsed = max(0, min(Double(now - grid.t0), Double(stopInstant - grid.t0))) / 1e6
        let planned = Double(stopInstant - grid.t0) / 1e6
        let frames = statuses.flatMap(\.cameras).map(\.frames)
        let dups = statuses.flatMap(\.cameras).map(\.dropped).reduce(0, +)
        if now < grid.t0 {
            console.progress("armed: recording starts in \(String(format: "%.1f", Double(grid.t0 - now) / 1e6)) s")
        } else if request.untilStopped && !conductor.stopping {
            console.progress(String(format: "recording %.1f s (until Ctrl-C)  frames %d–%d per camera  dups %d",
                                    Double(now - grid.t0) / 1e6, frames.min() ?? 0, frames.max() ?? 0, dups))
        } else {
            console.progress(String(format: "recording %.1f / %.1f s  frames %d–%d of %d per camera  dups %d  nodes done %d/%d",
                                    elapsed, planned, frames.min() ?? 0, frames.max() ?? 0, conductor.groups, dups,
                                    conductor.finished.count, conductor.nodes.count))
        }
    }

    /// Copies the node's own events into the take's, and carries out what the pressure policy decides for it.
    /// Returns the cameras the policy disabled now (sent or not: a lost reply may still have been applied).
    private func respondToPressure(_ status: NodeStatus, plan: NodePlan, take: inout TakeRun, stopGroup: Int64) async -> [String] {
        var disabled: [String] = []
        let seen = take.nodeEventsSeen[plan.name] ?? 0
        if status.events.count > seen {
            for e in status.events[seen...] {
                addEvent(e)
                if e.kind == .pressureShutdown { console.step("node \(plan.name): \(e.detail)") }
            }
            take.nodeEventsSeen[plan.name] = status.events.count
        }
        guard status.state == .recording, let level = status.pressure else { return [] }
        let grid = take.grid
        let now = MonotonicClock.now()
        let reading = PressureReading(level: level, factor: "", cause: status.pressureCause)
        for decision in take.responder.observe(node: plan.name, reading: reading, now: now) {
            // A second ahead: the change reaches the node before the group it applies from is written.
            let from = grid.nearestGroup(to: now) + max(2, Int64(1_000_000 / grid.periodMicroseconds))
            guard from < stopGroup else { continue }
            if case .disable = decision.action { disabled.append(decision.camera) }
            let adjust = CoordRequest.adjustCamera(takeID: take.takeID, camera: decision.camera, fromGroup: from,
                                                   reason: decision.sentence, action: decision.action)
            let (kind, failedKind): (TakeEvent.Kind, TakeEvent.Kind)
            switch decision.action {
            case .slow: (kind, failedKind) = (.cameraSlowed, .cameraSlowedFailed)
            case .disable: (kind, failedKind) = (.cameraDisabled, .cameraDisabledFailed)
            case .restore: (kind, failedKind) = (.cameraRestored, .cameraRestoredFailed)
            }
            do {
                _ = try await plan.link.request(adjust, timeout: 1, what: "the pressure policy's change")
                console.step("from group \(from): \(decision.sentence)")
                addEvent(TakeEvent(kind, at: grid.instant(ofGroup: from), node: plan.name, camera: decision.camera,
                                   "from group \(from): \(decision.sentence)"))
            } catch {
                addEvent(TakeEvent(failedKind, at: now, node: plan.name, camera: decision.camera,
                                   "\(decision.sentence) It was not applied: \(error)"))
            }
        }
        return disabled
    }
}
