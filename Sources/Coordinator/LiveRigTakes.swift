import CoordCore
import CoordWire
import Foundation
import Logging
import Platform
import Synchronization
import ZeroMQ

// Takes started and stopped from the console.
extension LiveRig {
    // MARK: Takes

    /// The rig file's camera entries with the controls the operator set here over theirs: a take opens each camera
    /// with what the operator last set, not with the values the file had when the console loaded it.
    static func withOperatorControls(_ entries: [String: [RigSpec.Camera]],
                                     _ set: [(endpoint: String, controls: [String: CameraControls])]) -> [String: [RigSpec.Camera]] {
        var entries = entries
        for (endpoint, controls) in set {
            guard var list = entries[endpoint] else { continue }
            for i in list.indices {
                guard let c = controls[list[i].name], !c.isEmpty else { continue }
                list[i].controls = takeControls(file: [list[i]], camera: list[i].name, setHere: c)
            }
            entries[endpoint] = list
        }
        return entries
    }

    /// What a take from this console sets on one camera as it opens it: its rig-file entry's controls with the
    /// operator's over them (the one merge, `withOperatorControls` makes it too). A camera the file does not list
    /// opens with the node's own, which already hold what the operator set; a control left out stays as it is.
    static func takeControls(file entries: [RigSpec.Camera]?, camera: String, setHere: CameraControls?) -> CameraControls {
        let file = entries?.first(where: { $0.name == camera })?.controls ?? CameraControls()
        return file.updated(with: setHere ?? CameraControls())
    }

    /// Starts a take as `coord start-take` does (the rig file's settings), with preview tiles from its cameras.
    public func startTake(name: String?, seconds: Double?) throws(Refusal) -> TakeView {
        var request = template
        request.name = name ?? template.name
        if let seconds { request.seconds = seconds }
        request.untilStopped = seconds == nil
        if request.untilStopped { request.seconds = TakeRequest.longestSeconds }
        request.preview = preview
        request.camerasByEndpoint = Self.withOperatorControls(request.camerasByEndpoint,
                                                              state.withLock { s in s.nodes.map { (endpoint: $0.spec.endpoint, controls: $0.operatorControls) } })
        if let problem = request.problem() { throw Refusal(.invalid, problem) }
        let console = Console(quiet: false) { [weak self] line in self?.event("take", line.trimmingCharacters(in: .whitespaces)) }
        // The clocks this console follows go to the take, which then need not align them again (issue 27).
        let session = TakeSession(endpoints: spec.nodes.map(\.endpoint),
                                  names: Dictionary(spec.nodes.map { ($0.endpoint, $0.name) }) { first, _ in first },
                                  keys: spec.linkKeysByEndpoint, request: request,
                                  followed: followedClocks(),
                                  previousArming: state.withLock { $0.lastArming }, console: console, logger: logger)
        let view = TakeView(takeId: nil, name: request.name, state: .starting, seconds: seconds, elapsedS: 0, message: nil, report: nil)
        let accepted = state.withLock { s -> Refusal? in
            if s.closing { return Refusal(.unavailable, "the console is shutting down; start the take from a console that is running.") }
            if let adopted = s.adopted {
                return Refusal(.conflict, "the rig is recording take \(adopted.takeID) (started elsewhere); stop it from this page or with coord stop-take first.")
            }
            guard s.session == nil else { return Refusal(.conflict, "a take is already running from this console; stop it first.") }
            s.session = session
            s.take = view
            return nil
        }
        if let accepted { throw accepted }
        // The take's own clock tracking takes over; two trackers would probe every node twice.
        stopTracker()
        broadcast(.take(view))
        event("take-start", "take \(request.name) starting (\(seconds.map { "\($0) s" } ?? "until stopped"))")
        takeWorkSink.yield(.started(session, view))
        return view
    }

    /// What `runTakes` runs: a take started from the page, or the stop and collection of a take adopted from the rig.
    enum TakeWork: Sendable {
        case started(TakeSession, TakeView)
        case adopted(AdoptedTake, stopGroup: Int64)
    }

    /// Runs every take started from this console, each as a child task, until `close` and the last of them has
    /// ended (stopped, collected, its manifest and report written). The console's take service runs this, so
    /// graceful shutdown reaches a take that records.
    public func runTakes() async {
        await withDiscardingTaskGroup { group in
            for await work in takeWork {
                switch work {
                case .started(let session, let view): group.addTask { await self.record(session, view) }
                case .adopted(let take, let stopGroup): group.addTask { await self.collectAdopted(take, stopGroup: stopGroup) }
                }
            }
        }
    }

    /// The console is shutting down: no take starts any more; a take recording stops on one instant and is collected,
    /// one still starting stops as soon as it records. Returns what the shutdown waits for, in a sentence (nil:
    /// nothing runs).
    @discardableResult
    public func close() -> String? {
        let (session, take, adopted) = state.withLock { s in
            s.closing = true
            return (s.session, s.take, s.adoptedStopping ? s.adopted : nil)
        }
        takeWorkSink.finish()
        if let adopted { return "take \(adopted.takeID) stops at group \(adopted.stopGroup), then it is collected" }
        guard let session, let take else { return nil }
        let name = take.takeId ?? session.takeID ?? take.name
        if session.requestStop() {
            markStopping()
            event("operator-stop", "the console is shutting down: take \(name) stops on one instant and is collected")
            return "stopping take \(name): every camera stops at one instant, then the take is collected"
        }
        if session.collectingTake() != nil { return "take \(name) is being collected" }
        return "take \(name) is starting; it stops as soon as it records, then it is collected"
    }

    /// The take running from this console as a second interrupt finds it: its id (once known), its directory and
    /// whether it is recording or collecting; nil when no take runs.
    public var interruptedTake: InterruptedTake? {
        state.withLock { s in
            s.session.map { session in
                InterruptedTake(takeID: session.takeID, directory: session.takeID.map { template.takesDirectory.appendingPathComponent($0) },
                                recording: session.isRecording, collecting: session.collectingTake() != nil)
            }
        }
    }

    public struct InterruptedTake: Sendable {
        public var takeID: String?
        public var directory: URL?
        public var recording: Bool
        public var collecting: Bool
    }

    /// The take the console finished while it shut down (nil: none ran then).
    public var finishedOnClose: TakeView? {
        state.withLock { s in s.closing ? s.finishedWhileClosing : nil }
    }

    /// Runs one take to its end, showing its phases, and records what became of it.
    private func record(_ session: TakeSession, _ view: TakeView) async {
        // The take's state follows the phases the session publishes; they end when `run` returns.
        async let following: Void = {
            for await phase in session.phases { self.follow(phase, session: session) }
        }()
        var final = view
        do {
            let outcome = try await session.run()
            final.takeId = outcome.manifest.takeID
            final.state = outcome.manifest.status == .partial ? .partial : .done
            final.message = outcome.manifest.status == .partial ? "the take is partial: \(outcome.manifest.partialCause)." : nil
            final.report = "takes/\(outcome.manifest.takeID)/sync-report.html"
            // What was recorded: the take's groups on its grid.
            final.elapsedS = Double(outcome.manifest.groups) * Double(outcome.manifest.framePeriodMicroseconds) / 1e6
            counted(outcome.manifest)
        } catch {
            final.state = .failed
            final.message = "\(error)"
        }
        // Every phase is shown before the end.
        await following
        if final.state == .failed { final.elapsedS = session.recordedSeconds(now: MonotonicClock.now()) ?? 0 }
        let finished = state.withLock { s -> TakeView in
            s.take = final
            s.session = nil
            s.lastArming = session.arming ?? s.lastArming
            if s.closing { s.finishedWhileClosing = final }
            return final
        }
        broadcast(.take(finished))
        let ended = finished.state.rawValue
        event(finished.state == .done ? "take-done" : "take-\(ended)",
              "take \(finished.takeId ?? finished.name): \(ended)\(finished.message.map { "; \($0)" } ?? "")")
    }

    /// The rig's counters take the take's final figures (a status a second may have missed its last frames).
    private func counted(_ manifest: TakeManifest) {
        state.withLock { s in
            for camera in manifest.cameras {
                guard let i = s.nodes.firstIndex(where: { $0.name == camera.node }) else { continue }
                s.nodes[i].counts.finished(.init(camera: camera.camera, takeID: manifest.takeID, frames: UInt64(max(0, camera.frames)),
                                                 dups: UInt64(max(0, camera.dropped))))
            }
        }
    }

    /// Shows the phase the running take entered.
    private func follow(_ phase: TakePhase, session: TakeSession) {
        let (changed, closing) = state.withLock { s -> (TakeView?, Bool) in
            guard var t = s.take else { return (nil, s.closing) }
            switch phase {
            case .recording(let takeID):
                guard t.state == .starting else { return (nil, s.closing) }
                t.state = s.closing ? .stopping : .recording
                t.takeId = takeID
            case .collecting:
                guard t.state == .recording || t.state == .stopping else { return (nil, s.closing) }
                t.state = .collecting
            }
            s.take = t
            return (t, s.closing)
        }
        // A take that began recording while the console shuts down stops at once (it had no stop to take before).
        if closing, case .recording = phase, session.requestStop() {
            event("operator-stop", "the console is shutting down: the take stops on one instant as soon as it records")
        }
        if let changed { broadcast(.take(changed)) }
    }

    /// Shows the running take as stopping (one collecting already stays so).
    private func markStopping() {
        let view = state.withLock { s -> TakeView? in
            if s.take?.state == .recording { s.take?.state = .stopping }
            return s.take
        }
        if let view { broadcast(.take(view)) }
    }

    /// Stops the running take on one group, as `coord stop-take` does; a take the rig records that another
    /// coordinator started is stopped the same way, then collected here.
    public func stopTake() async throws(Refusal) -> TakeView {
        let (session, take, adopted) = state.withLock { ($0.session, $0.take, $0.session == nil ? $0.adopted : nil) }
        if let adopted { return try await stopAdopted(adopted) }
        guard let session, let take else { throw Refusal(.conflict, "no take is recording: there is nothing to stop.") }
        guard session.requestStop() else {
            throw Refusal(.conflict, "the take is not recording yet (it is \(take.state.rawValue)); stop it once it records.")
        }
        let view = state.withLock { s -> TakeView in
            // A take already collecting stays so.
            if s.take?.state == .recording { s.take?.state = .stopping }
            return s.take ?? take
        }
        broadcast(.take(view))
        event("operator-stop", "stop requested from the console")
        return view
    }

    /// The take directories under the takes directory, newest first by group 0's wall-clock time. The take this
    /// console is recording is listed as what it is now (its manifest says "partial" until it ends, CONTRACT §6b).
    func listTakes() -> [TakeEntry] {
        let root = template.takesDirectory
        let running = state.withLock { s -> (id: String, state: TakeState)? in
            if s.session == nil, let adopted = s.adopted, let take = s.take, take.state.isRunning { return (adopted.takeID, take.state) }
            guard s.session != nil, let take = s.take, let id = take.takeId ?? s.session?.takeID else { return nil }
            return (id, take.state)
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        var entries: [(String, TakeEntry)] = []
        for name in names where RigName.isValid(name) {
            let directory = root.appendingPathComponent(name)
            guard let data = try? Data(contentsOf: directory.appendingPathComponent("manifest.json")),
                  let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { continue }
            let modified = (try? FileManager.default.attributesOfItem(atPath: directory.path)[.modificationDate] as? Date) ?? nil
            // RFC 3339 in UTC sorts as text; a manifest without it falls back to the folder's time.
            let started = json["start_wallclock"] as? String ?? WallClock.rfc3339(modified ?? Date(timeIntervalSince1970: 0))
            let hasReport = FileManager.default.fileExists(atPath: directory.appendingPathComponent("sync-report.html").path)
            let status = name == running?.id ? running!.state.rawValue : json["status"] as? String ?? "unknown"
            entries.append((started, TakeEntry(takeId: name, name: json["name"] as? String ?? name, status: status, started: started,
                                               report: hasReport && name != running?.id ? "takes/\(name)/sync-report.html" : nil)))
        }
        return entries.sorted { ($0.0, $0.1.takeId) > ($1.0, $1.1.takeId) }.map(\.1)
    }
}

// A take the rig's nodes record that no take of this console started.
extension LiveRig {
    /// Follows the take the nodes' statuses show, when none runs from here: adopted (shown as recording, with its
    /// elapsed time from the nodes' rig clocks), and let go once the nodes no longer record it.
    func followAdopted() {
        let now = MonotonicClock.now()
        let (view, said) = state.withLock { s -> (TakeView?, String?) in
            guard s.session == nil else { return (nil, nil) }
            let seen = AdoptedTake.seen(s.nodes.compactMap { $0.view.reachable ? $0.lastStatus : nil })
            guard let seen else {
                // Stopped and collected from here: the collection says when it ends.
                guard let gone = s.adopted, !s.adoptedStopping else { return (nil, nil) }
                s.adopted = nil
                if s.take?.takeId == gone.takeID, s.take?.state.isRunning == true { s.take = nil }
                return (s.take, "take \(gone.takeID) is no longer recorded by the rig's nodes (it ended, or was stopped elsewhere)")
            }
            let before = s.adopted
            s.adopted = seen
            s.adoptedSeenAt = now
            guard let before, before.takeID == seen.takeID else {
                // Every take has a stop (an open-ended one 24 h ahead): its length is shown unless it is that.
                let planned = Double(seen.stopGroup) * Double(seen.grid.periodMicroseconds) / 1e6
                s.adoptedStopping = false
                s.take = TakeView(takeId: seen.takeID, name: seen.name, state: .recording,
                                  seconds: seen.stopGroup > 0 && planned < TakeRequest.longestSeconds - 60 ? planned : nil,
                                  elapsedS: seen.recordedSeconds(rigNow: seen.rigNow), message: "started by another coordinator: Stop stops it and collects it here",
                                  report: nil)
                return (s.take, "the rig is recording take \(seen.takeID) on \(seen.nodes.joined(separator: ", ")), started elsewhere: shown here; Stop stops it and collects it")
            }
            // A stop brought forward (from here, `coord stop-take` or its own coordinator): the take is stopping.
            if seen.stopGroup > 0, before.stopGroup == 0 || seen.stopGroup < before.stopGroup, s.take?.state == .recording {
                s.take?.state = .stopping
                return (s.take, nil)
            }
            return (nil, nil)
        }
        if let said { event(view?.takeId == nil ? "take-ended" : "take-adopted", said) }
        if let view { broadcast(.take(take ?? view)) }
    }

    /// Places one stop on every node recording the adopted take (as `coord stop-take`), then collects it as a child
    /// of the console's take service.
    private func stopAdopted(_ adopted: AdoptedTake) async throws(Refusal) -> TakeView {
        let already = state.withLock { s -> Refusal? in
            if s.closing { return Refusal(.unavailable, "the console is shutting down; stop the take with coord stop-take --rig RIG.yaml.") }
            if s.adoptedStopping { return Refusal(.conflict, "take \(adopted.takeID) is already stopping; it is collected here once every node has stopped.") }
            s.adoptedStopping = true
            return nil
        }
        if let already { throw already }
        let outcomes: [RigStop.Outcome]
        do {
            outcomes = try await RigStop.stop(spec)
        } catch {
            state.withLock { $0.adoptedStopping = false }
            throw Refusal(.unavailable, "take \(adopted.takeID) could not be stopped: \(error)")
        }
        guard let outcome = outcomes.first(where: { $0.takeID == adopted.takeID }) else {
            state.withLock { $0.adoptedStopping = false }
            throw Refusal(.conflict, "take \(adopted.takeID) is no longer recording on any node.")
        }
        let view = state.withLock { s -> TakeView in
            if s.take?.state == .recording { s.take?.state = .stopping }
            return s.take ?? TakeView(takeId: adopted.takeID, name: adopted.name, state: .stopping, seconds: nil, elapsedS: 0, message: nil, report: nil)
        }
        let missed = outcome.unreached.isEmpty ? "" : "; not told: \(outcome.unreached.joined(separator: "; "))"
        event("operator-stop", "take \(adopted.takeID) stops at group \(outcome.stopGroup) (in \(String(format: "%.1f", outcome.secondsAhead)) s), then it is collected here\(missed)")
        broadcast(.take(view))
        takeWorkSink.yield(.adopted(adopted, stopGroup: outcome.stopGroup))
        return view
    }

    /// Waits for every node to finish the adopted take, then collects it into this console's takes directory as
    /// `coord collect` does (the manifest its coordinator wrote as recording began says what to fetch).
    private func collectAdopted(_ adopted: AdoptedTake, stopGroup: Int64) async {
        let directory = template.takesDirectory.appendingPathComponent(adopted.takeID)
        let stopInstant = adopted.grid.instant(ofGroup: stopGroup)
        // The stop instant on the nodes' rig clocks, then up to a minute for their files to be final.
        var deadline = MonotonicClock.now() + max(0, stopInstant - adopted.rigNow) + 60_000_000
        while MonotonicClock.now() < deadline, !Task.isCancelled {
            let recording = state.withLock { s in
                s.nodes.contains { $0.lastStatus.map { $0.takeID == adopted.takeID && ($0.state == .recording || $0.state == .armed) } ?? false }
            }
            if !recording { break }
            try? await Task.sleep(nanoseconds: 250_000_000)
        }
        var final = TakeView(takeId: adopted.takeID, name: adopted.name, state: .collecting, seconds: nil,
                             elapsedS: Double(max(0, stopInstant - adopted.grid.t0)) / 1e6, message: nil, report: nil)
        state.withLock { $0.take = final }
        broadcast(.take(final))
        if !FileManager.default.fileExists(atPath: directory.appendingPathComponent("manifest.json").path) {
            final.state = .partial
            final.message = "take \(adopted.takeID) stopped at group \(stopGroup), but its take directory is not under this console's takes directory (\(template.takesDirectory.path)): collect it where it was started, with coord collect --rig RIG.yaml \(adopted.takeID)."
        } else {
            // Another coordinator collecting it (the one that started it, still alive): its collection is awaited.
            deadline = MonotonicClock.now() + 3_600_000_000
            while CollectLock.isHeld(directory: directory), MonotonicClock.now() < deadline, !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 500_000_000)
            }
            let console = Console(quiet: false) { [weak self] line in self?.event("take", line.trimmingCharacters(in: .whitespaces)) }
            do {
                let (manifest, _) = try await TakeCollection.resume(spec, directory: directory, console: console)
                final.state = manifest.status == .partial ? .partial : .done
                final.message = manifest.status == .partial ? "the take is partial: \(manifest.partialCause)." : nil
                final.report = "takes/\(manifest.takeID)/sync-report.html"
                final.elapsedS = Double(manifest.groups) * Double(manifest.framePeriodMicroseconds) / 1e6
                counted(manifest)
            } catch {
                final.state = .failed
                final.message = "\(error)"
            }
        }
        let finished = state.withLock { s -> TakeView in
            s.take = final
            s.adopted = nil
            s.adoptedStopping = false
            if s.closing { s.finishedWhileClosing = final }
            return final
        }
        broadcast(.take(finished))
        event(finished.state == .done ? "take-done" : "take-\(finished.state.rawValue)",
              "take \(adopted.takeID): \(finished.state.rawValue)\(finished.message.map { "; \($0)" } ?? "")")
    }
}
