import Capture
import CoordCore
import Foundation
import Platform

/// The console's Snap on a node that previews idle: KeepStills checked against the preview and handed to the keeper.
extension NodeAgent {
    /// The farthest ahead a shot's first group may lie: a Snap is for now, a later one is a take's business.
    static let farthestSnapMicroseconds: Int64 = 60_000_000

    func keepStills(shotID: String, groups: [Int64], format: SnapPlan.Format, modes: [StillModeSwitch.Mode] = []) throws(NodeFailure) -> String {
        // Names, group order and count, format: checked at the edge (CoordWire).
        guard let run = previewRoom.withLock({ $0 }), let grid = run.grid else {
            throw NodeFailure(.badState, "node \(configuration.name) does not preview, so it has no frames to keep for shot \(shotID).")
        }
        let rigNow = Int64(run.clock.current.rig(fromLocal: Double(localNow())))
        let first = groups[0], last = groups[groups.count - 1]
        let ahead = grid.instant(ofGroup: first) - rigNow
        guard ahead > 0 else {
            throw NodeFailure(.badConfig, "group \(first) of shot \(shotID) is already past on node \(configuration.name) (\(-ahead / 1000) ms ago).")
        }
        guard ahead <= Self.farthestSnapMicroseconds else {
            throw NodeFailure(.badConfig, "group \(first) of shot \(shotID) is \(ahead / 1_000_000) s ahead; a Snap keeps groups at most \(Self.farthestSnapMicroseconds / 1_000_000) s ahead.")
        }
        let switched = try stillSettings(modes, run: run, shotID: shotID)
        let directory = store.takeDirectory(shotID)
        guard !FileManager.default.fileExists(atPath: directory.path) else {
            throw NodeFailure(.badConfig, "node \(configuration.name) already holds files of \(shotID); a shot needs a new id.")
        }
        // Long enough for the last group to pass and its stills to be encoded; a camera that stopped ends the wait.
        // A switched camera's stills are larger (a 4K PNG takes seconds to encode on a busy box): 10 s more.
        let deadline = MonotonicClock.now() + (grid.instant(ofGroup: last) - rigNow) + (switched.isEmpty ? 5_000_000 : 15_000_000)
        let folder = directory.appendingPathComponent(configuration.name)
        // Triggered cameras expose only on a pulse: one per shot group, unless a take's train runs (it holds the cameras).
        let pulsed = try startSnapPulses(shotID: shotID, groups: groups, cameras: run.cameras.map(\.settings), grid: grid, clock: run.clock, folder: folder)
        do {
            try stills.expect(shotID: shotID, groups: groups, format: format, cameras: run.cameras.map(\.settings.camera),
                              folder: folder, deadline: deadline)
        } catch {
            cancelSnapPulses(cameras: pulsed)
            throw error
        }
        for (index, settings) in switched { switchForStills(index: index, to: settings, through: last, run: run) }
        logger.info("keeping stills", metadata: ["shot": "\(shotID)", "groups": "\(groups.count)", "first": "\(first)", "ahead_us": "\(ahead)",
                                                 "switched": "\(switched.map(\.1.camera))"])
        return "keeping \(groups.count) group(s) of \(run.cameras.count) camera(s)" + (switched.isEmpty ? "" : ", \(switched.count) switched to the still's mode")
    }

    /// Each switched camera's index in the preview and its settings in the still's mode, each checked against what
    /// the camera offers.
    private func stillSettings(_ modes: [StillModeSwitch.Mode], run: NodeAgentState.PreviewRun, shotID: String) throws(NodeFailure) -> [(Int, CameraSettings)] {
        var out: [(Int, CameraSettings)] = []
        for mode in modes {
            guard let index = run.cameras.firstIndex(where: { $0.settings.camera == mode.camera }) else {
                throw NodeFailure(.badConfig, "shot \(shotID) switches camera \(mode.camera), which node \(configuration.name) does not preview.")
            }
            var settings = run.cameras[index].settings
            settings.width = mode.width
            settings.height = mode.height
            settings.recordEvery = mode.recordEvery
            if let problem = settings.problem(on: configuration.name, with: cameras.first { $0.name == mode.camera }) {
                throw NodeFailure(.badConfig, problem)
            }
            out.append((index, settings))
        }
        return out
    }

    /// Off the control lane: ends the camera's preview stream, opens it in the still's mode on the same grid until
    /// it has passed `last`, then opens it in the preview's mode again. A preview stopped or reopened meanwhile
    /// (another run) keeps what it has: the camera opened here is closed.
    private func switchForStills(index: Int, to settings: CameraSettings, through last: Int64, run: NodeAgentState.PreviewRun) {
        guard let grid = run.grid else { return }
        let thread = Thread { [self] in
            let began = MonotonicClock.now()
            // The camera as the run holds it now (an earlier shot's switch may have replaced it since).
            guard let old = previewRoom.withLock({ $0?.clock === run.clock ? $0?.cameras[index] : nil }) else { return }
            old.stop(deadline: .now() + .seconds(2))
            let back = run.cameras[index].settings
            let ended: @Sendable (Bool) -> Void = { [weak self] byItself in
                guard let self, byItself else { return }
                self.reopen(index: index, settings: back, grid: grid, clock: run.clock, endAfterGroup: nil, ended: nil)
            }
            let opened = reopen(index: index, settings: settings, grid: grid, clock: run.clock, endAfterGroup: last, ended: ended)
            logger.info("camera switched for stills", metadata: [
                "camera": "\(settings.camera)", "size": "\(settings.width)x\(settings.height)", "record_every": "\(settings.recordEvery)",
                "restart_us": "\(MonotonicClock.now() - began)", "opened": "\(opened)"])
            if !opened { reopen(index: index, settings: back, grid: grid, clock: run.clock, endAfterGroup: nil, ended: nil) }
        }
        thread.name = "still-mode-\(settings.camera)"
        thread.start()
    }

    /// Opens camera `index` of the preview run that follows `clock` with `settings` and puts it in the run's place;
    /// false when it cannot be opened or that run is gone.
    @discardableResult
    private func reopen(index: Int, settings: CameraSettings, grid: FrameGrid, clock: ClockMappingBox, endAfterGroup: Int64?,
                        ended: (@Sendable (Bool) -> Void)?) -> Bool {
        guard let preview, previewRoom.withLock({ $0?.clock === clock }) else { return false }
        let source: any CameraSource & Sendable
        do {
            source = try cameraSource(for: settings, index: index)
        } catch {
            logger.warning("camera cannot switch mode", metadata: ["camera": "\(settings.camera)", "size": "\(settings.width)x\(settings.height)", "error": "\(error)"])
            return false
        }
        let camera = PreviewCamera(settings: settings, source: source, grid: grid, clock: clock, publisher: preview,
                                   localNow: { [weak self] in self?.localNow() ?? 0 }, logger: logger, stills: stills,
                                   endAfterGroup: endAfterGroup, ended: ended)
        let placed = previewRoom.withLock { run -> Bool in
            guard run?.clock === clock, let cameras = run?.cameras, cameras.indices.contains(index) else { return false }
            run?.cameras[index] = camera
            return true
        }
        guard placed else {
            source.stop()
            return false
        }
        camera.start()
        return true
    }
}
