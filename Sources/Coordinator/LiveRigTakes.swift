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
                                  previousArming: takeRoom.withLock { $0.lastArming }, console: console, logger: logger)
        let started = takeRoom.withLock { r in
            let started = r.state.start(name: request.name, seconds: seconds)
            if case .success = started { r.session = session }
            return started
        }
        let view = try started.get()
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
        let (closing, session) = takeRoom.withLock { r in (r.state.close(), r.session) }
        takeWorkSink.finish()
        switch closing {
        case .nothing:
            return nil
        case .adoptedStopping(let takeID, let stopGroup):
            return "take \(takeID) stops at group \(stopGroup), then it is collected"
        case .stopOwn(let name):
            guard let session else { return nil }
            if session.collectingTake() != nil { return "take \(name) is being collected" }
            guard session.requestStop() else { return "take \(name) is starting; it stops as soon as it records, then it is collected" }
            if let view = takeRoom.withLock({ r in try? r.state.ownStop(accepted: true).get() }) { broadcast(.take(view)) }
            event("operator-stop", "the console is shutting down: take \(name) stops on one instant and is collected")
            return "stopping take \(name): every camera stops at one instant, then the take is collected"
        }
    }

    /// The take running from this console as a second interrupt finds it: its id (once known), its directory and
    /// whether it is recording or collecting; nil when no take runs.
    public var interruptedTake: InterruptedTake? {
        takeRoom.withLock { r in
            r.session.map { session in
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
    public var finishedOnClose: TakeView? { takeRoom.withLock { $0.state.finishedWhileClosing } }

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
        let finished = takeRoom.withLock { r -> TakeView in
            r.session = nil
            r.lastArming = session.arming ?? r.lastArming
            return r.state.finished(final)
        }
        ended(finished)
    }

    /// Says how a take ended, on the page and in the events.
    private func ended(_ take: TakeView) {
        takesChanged()
        broadcast(.take(take))
        event(take.state == .done ? "take-done" : "take-\(take.state.rawValue)",
              "take \(take.takeId ?? take.name): \(take.state.rawValue)\(take.message.map { "; \($0)" } ?? "")")
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

    /// Shows the phase the running take entered; one that began recording while the console shuts down stops at once.
    private func follow(_ phase: TakePhase, session: TakeSession) {
        let (view, stopNow) = takeRoom.withLock { r -> (TakeView?, Bool) in
            let (changed, stopNow) = switch phase {
            case .recording(let takeID): r.state.recording(takeID: takeID)
            case .collecting: (r.state.collecting(), false)
            }
            // Shown as it is now: armed is starting until group 0.
            return (changed.flatMap { _ in Self.shown(r, now: MonotonicClock.now()) }, stopNow)
        }
        if stopNow, session.requestStop() {
            event("operator-stop", "the console is shutting down: the take stops on one instant as soon as it records")
        }
        if let view { broadcast(.take(view)) }
    }

    /// Stops the running take on one group, as `coord stop-take` does; a take the rig records that another
    /// coordinator started is stopped the same way, then collected here.
    public func stopTake() async throws(Refusal) -> TakeView {
        let (decision, session) = takeRoom.withLock { r in (r.state.stop(), r.session) }
        switch decision {
        case .refused(let refusal):
            throw refusal
        case .adopted(let adopted):
            return try await stopAdopted(adopted)
        case .own:
            let accepted = session?.requestStop() ?? false
            let view = try takeRoom.withLock { r in r.state.ownStop(accepted: accepted) }.get()
            broadcast(.take(view))
            event("operator-stop", "stop requested from the console")
            return view
        }
    }

    /// The take directories under the takes directory, newest first by group 0's wall-clock time. The take this
    /// console shows running is listed as what it is now (its manifest says "partial" until it ends, CONTRACT §6b).
    /// A manifest is read (typed) only when it is new or changed since the last listing; nothing in the takes
    /// directory is followed through a link.
    func listTakes() -> [TakeEntry] {
        let running = takeRoom.withLock { r -> (id: String, state: TakeState)? in
            guard let take = Self.shown(r, now: MonotonicClock.now()), take.state.isRunning,
                  let id = take.takeId ?? r.session?.takeID else { return nil }
            return (id, take.state)
        }
        guard let root = try? TakeDirectory.open(template.takesDirectory.path), let found = try? root.entries() else { return [] }
        let listed = found.compactMap { entry -> ListedTake? in
            guard entry.kind == .directory, RigName.isValid(entry.name),
                  let manifest = try? root.entry("\(entry.name)/manifest.json"), manifest.kind == .file else { return nil }
            // The report is written after the manifest: its presence is part of what the listing knows.
            let hasReport = (try? root.checkFile("\(entry.name)/sync-report.html")) == true
            let stamp = ListedTake.Stamp(bytes: manifest.size, modified: manifest.modified, hasReport: hasReport)
            if let known = listedTakes.withLock({ $0[entry.name] }), known.stamp == stamp { return known }
            guard let data = try? root.data("\(entry.name)/manifest.json", limit: 64 << 20),
                  let read = try? JSONDecoder().decode(TakeManifest.self, from: data) else { return nil }
            // RFC 3339 in UTC sorts as text.
            let made = ListedTake(stamp: stamp, started: read.startWallclock,
                                  entry: TakeEntry(takeId: entry.name, name: read.name, status: read.status.rawValue, started: read.startWallclock,
                                                   report: hasReport ? "takes/\(entry.name)/sync-report.html" : nil))
            listedTakes.withLock { $0[entry.name] = made }
            return made
        }
        return listed.sorted { ($0.started, $0.entry.takeId) > ($1.started, $1.entry.takeId) }.map { listed in
            guard listed.entry.takeId == running?.id, let running else { return listed.entry }
            var entry = listed.entry
            entry.status = running.state.rawValue
            entry.report = nil
            return entry
        }
    }

    /// A take directory as the takes list last read it.
    struct ListedTake: Sendable {
        struct Stamp: Equatable, Sendable {
            var bytes: UInt64
            var modified: Double
            var hasReport: Bool
        }
        var stamp: Stamp
        var started: String
        var entry: TakeEntry
    }

    /// The takes list read again now (a take ended) and shown if it changed.
    func takesChanged() {
        let takes = listTakes()
        let changed = state.withLock { s -> Bool in
            guard takes != s.lastTakes else { return false }
            s.lastTakes = takes
            return true
        }
        if changed { broadcast(.takes(takes)) }
    }
}

// A take the rig's nodes record that no take of this console started.
extension LiveRig {
    /// Follows the take the nodes' statuses show, when none runs from here: adopted (shown as recording, with its
    /// elapsed time from the nodes' rig clocks), and let go once the nodes no longer record it.
    func followAdopted() {
        let statuses = state.withLock { s in s.nodes.compactMap { $0.view.reachable ? $0.lastStatus : nil } }
        let now = MonotonicClock.now()
        let (view, said) = takeRoom.withLock { r in r.state.seen(AdoptedTake.seen(statuses), now: now) }
        if let said { event(view?.takeId == nil ? "take-ended" : "take-adopted", said) }
        if let view { broadcast(.take(take ?? view)) }
    }

    /// Places one stop on every node recording the adopted take (as `coord stop-take`), then collects it as a child
    /// of the console's take service.
    private func stopAdopted(_ adopted: AdoptedTake) async throws(Refusal) -> TakeView {
        var outcome: RigStop.Outcome?
        var failure: Refusal?
        do {
            outcome = try await RigStop.stop(spec).first { $0.takeID == adopted.takeID }
            if outcome == nil { failure = Refusal(.conflict, "take \(adopted.takeID) is no longer recording on any node.") }
        } catch {
            failure = Refusal(.unavailable, "take \(adopted.takeID) could not be stopped: \(error)")
        }
        let view = takeRoom.withLock { r in r.state.adoptedStopPlaced(outcome != nil) }
        guard let outcome, failure == nil else { throw failure! }
        let missed = outcome.unreached.isEmpty ? "" : "; not told: \(outcome.unreached.joined(separator: "; "))"
        event("operator-stop", "take \(adopted.takeID) stops at group \(outcome.stopGroup) (in \(String(format: "%.1f", outcome.secondsAhead)) s), then it is collected here\(missed)")
        let shown = view ?? TakeView(takeId: adopted.takeID, name: adopted.name, state: .stopping, seconds: nil, elapsedS: 0, message: nil, report: nil)
        broadcast(.take(shown))
        takeWorkSink.yield(.adopted(adopted, stopGroup: outcome.stopGroup))
        return shown
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
        takeRoom.withLock { $0.state.adoptedCollecting(final) }
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
        ended(takeRoom.withLock { $0.state.finished(final) })
    }
}
