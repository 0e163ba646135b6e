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
        let accepted = state.withLock { s -> Bool in
            guard s.session == nil else { return false }
            s.session = session
            s.take = view
            return true
        }
        guard accepted else { throw Refusal(.conflict, "a take is already running from this console; stop it first.") }
        // The take's own clock tracking takes over; two trackers would probe every node twice.
        stopTracker()
        broadcast(.take(view))
        event("take-start", "take \(request.name) starting (\(seconds.map { "\($0) s" } ?? "until stopped"))")
        Task { [self] in
            // The take's state follows the phases the session publishes; they end when `run` returns.
            let following = Task { [self] in
                for await phase in session.phases { follow(phase) }
            }
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
            await following.value
            if final.state == .failed { final.elapsedS = session.recordedSeconds(now: MonotonicClock.now()) ?? 0 }
            let finished = state.withLock { s -> TakeView in
                s.take = final
                s.session = nil
                s.lastArming = session.arming ?? s.lastArming
                return final
            }
            broadcast(.take(finished))
            let ended = finished.state.rawValue
            event(finished.state == .done ? "take-done" : "take-\(ended)",
                  "take \(finished.takeId ?? finished.name): \(ended)\(finished.message.map { "; \($0)" } ?? "")")
        }
        return view
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
    private func follow(_ phase: TakePhase) {
        let changed = state.withLock { s -> TakeView? in
            guard var t = s.take else { return nil }
            switch phase {
            case .recording(let takeID):
                guard t.state == .starting else { return nil }
                t.state = .recording
                t.takeId = takeID
            case .collecting:
                guard t.state == .recording || t.state == .stopping else { return nil }
                t.state = .collecting
            }
            s.take = t
            return t
        }
        if let changed { broadcast(.take(changed)) }
    }

    /// Stops the running take on one group, as `coord stop-take` does.
    public func stopTake() throws(Refusal) -> TakeView {
        let (session, take) = state.withLock { ($0.session, $0.take) }
        guard let session, let take else { throw Refusal(.conflict, "no take is running from this console.") }
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
