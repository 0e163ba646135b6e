import CoordCore
import CoordWire
import Foundation
import Logging
import Media
import Platform

/// The preview while no take holds the cameras (a take's Arm carries its own), and the operator's camera controls.
extension NodeAgent {
    /// Opens the cameras for preview only, or renews a preview already running (its clock mapping and lease).
    /// Refused while a take holds the cameras: that take's Arm carries the preview. Runs on the control lane.
    func startPreview(_ message: Coord_V1_StartPreview) throws(NodeFailure) -> String {
        guard let preview else { throw NodeFailure(.badState, "node \(configuration.name) publishes no preview (started with an empty --preview-endpoint).") }
        let requested = message.cameras.map(CameraSettings.init(wire:))
        guard !requested.isEmpty else { throw NodeFailure(.badConfig, "a preview needs at least one camera.") }
        for s in requested {
            if let problem = s.problem(on: configuration.name, with: cameras.first { $0.name == s.camera }) {
                throw NodeFailure(.badConfig, problem)
            }
        }
        guard Set(requested.map(\.camera)).count == requested.count else {
            throw NodeFailure(.badConfig, "a preview names a camera of node \(configuration.name) twice.")
        }
        guard message.hasClock, message.framePeriodUs > 0 else { throw NodeFailure(.badConfig, "a preview needs a frame period and a clock mapping.") }
        let settings = PreviewSettings(width: Int(message.preview.width), fps: Int(message.preview.fps))
        if let problem = settings.problem { throw NodeFailure(.badConfig, problem) }
        let key = NodeAgentState.PreviewKey(settings: requested, t0: message.t0Us, period: Int64(message.framePeriodUs))
        let mapping = ClockMapping(wire: message.clock)
        let leaseUntil = MonotonicClock.now() + Int64(message.leaseMs) * 1000
        enum Plan { case busy(String), renewed, open }
        let plan: Plan = state.withLock { s in
            if s.take.holdsCameras { return .busy(s.take.takeID ?? "") }
            if let run = s.previewRun, run.key == key {
                run.clock.update(mapping)
                s.previewRun!.leaseUntil = leaseUntil
                return .renewed
            }
            return .open
        }
        switch plan {
        case .busy(let takeID):
            return "previewing take \(takeID)"
        case .renewed:
            preview.configure(settings, framePeriodMicroseconds: Int64(message.framePeriodUs))
            return "preview renewed"
        case .open:
            break
        }
        stopPreview()
        preview.configure(settings, framePeriodMicroseconds: Int64(message.framePeriodUs))
        let clock = ClockMappingBox(mapping)
        let grid = FrameGrid(t0: message.t0Us, periodMicroseconds: Int64(message.framePeriodUs))
        var opened: [PreviewCamera] = []
        for (index, s) in requested.enumerated() {
            let source = try cameraSource(for: s, index: index)
            opened.append(PreviewCamera(settings: s, source: source, grid: grid, clock: clock, publisher: preview,
                                        localNow: { [weak self] in self?.localNow() ?? 0 }, logger: logger))
        }
        opened.forEach { $0.start() }
        state.withLock { $0.previewRun = .init(cameras: opened, key: key, clock: clock, leaseUntil: leaseUntil) }
        logger.info("previewing", metadata: ["cameras": "\(requested.map(\.camera))", "width": "\(settings.width)", "fps": "\(settings.fps)"])
        return "previewing \(requested.count) camera(s)"
    }

    /// Closes the cameras opened for preview only (if any).
    func stopPreview() {
        guard let run = state.withLock({ s -> [PreviewCamera]? in
            defer { s.previewRun = nil }
            return s.previewRun?.cameras
        }) else { return }
        let deadline = DispatchTime.now() + .seconds(2)
        run.forEach { $0.stop(deadline: deadline) }
        logger.info("preview closed")
    }

    /// Sets one camera's controls: on the camera now if it is open (preview or take), and for whenever it opens.
    func setControls(_ message: Coord_V1_SetControls) throws(NodeFailure) -> Coord_V1_ControlsApplied {
        guard cameras.contains(where: { $0.name == message.camera }) else {
            throw NodeFailure(.notFound, "node \(configuration.name) has no camera named \"\(message.camera)\".")
        }
        let wanted = CameraControls(wire: message.controls)
        let name = "\(configuration.name)/\(message.camera)"
        let open = state.withLock { $0.openCameras[message.camera]?.camera }
        var applied: CameraControls
        let streaming = open?.isStreaming ?? false
        if let open, streaming {
            if let problem = open.controlRanges.problem(with: wanted, camera: name) { throw NodeFailure(.badConfig, problem) }
            do {
                applied = try open.apply(wanted)
            } catch {
                throw NodeFailure(.io, "camera \(name): \(error).")
            }
        } else {
            // Not open: checked against the ranges the camera declared (a synthetic camera's exposure up to 1 s).
            let ranges = v4l2ControlRanges[message.camera] ?? SyntheticSensor.controlRanges(periodMicroseconds: 1_000_000)
            if let problem = ranges.problem(with: wanted, camera: name) { throw NodeFailure(.badConfig, problem) }
            applied = wanted
        }
        let merged = state.withLock { s -> CameraControls in
            let merged = (s.controls[message.camera] ?? CameraControls()).updated(with: wanted)
            s.controls[message.camera] = merged
            // What Status reports from now: the camera's own answer, or (closed) the last values read with these over them.
            if streaming {
                s.controlsRead[message.camera] = (MonotonicClock.now(), applied)
            } else if let read = s.controlsRead[message.camera] {
                s.controlsRead[message.camera] = (read.at, read.controls.updated(with: wanted))
            }
            return merged
        }
        if !streaming { applied = merged }
        logger.info("controls set", metadata: ["camera": "\(message.camera)", "applied": "\(applied)"])
        var reply = Coord_V1_ControlsApplied()
        reply.camera = message.camera
        reply.controls = applied.wire
        return reply
    }
}
