import CoordCore
import CoordWire
import Foundation
import Logging
import Capture
import Platform

/// The preview while no take holds the cameras (a take's Arm carries its own), and the operator's camera controls.
extension NodeAgent {
    /// Opens the cameras for preview only, or renews a preview already running (its clock mapping and lease).
    /// Refused while a take holds the cameras: that take's Arm carries the preview. Runs on the control lane.
    func startPreview(_ request: NodeRequest.Preview) throws(NodeFailure) -> String {
        guard let preview else { throw NodeFailure(.badState, "node \(configuration.name) publishes no preview (started with an empty --preview-endpoint).") }
        // At least one camera, a clock mapping, a period and tile settings in range: checked at the edge (CoordWire).
        let requested = request.cameras
        for s in requested {
            if let problem = s.problem(on: configuration.name, with: cameras.first { $0.name == s.camera }) {
                throw NodeFailure(.badConfig, problem)
            }
        }
        guard Set(requested.map(\.camera)).count == requested.count else {
            throw NodeFailure(.badConfig, "a preview names a camera of node \(configuration.name) twice.")
        }
        let settings = request.settings
        let grid = request.grid
        let key = NodeAgentState.PreviewKey(settings: requested, t0: grid.t0, period: grid.periodMicroseconds)
        let mapping = request.clock
        let leaseUntil = MonotonicClock.now() + request.lease.microseconds
        enum Plan { case busy(String), renewed, open }
        let holder = takeRoom.withLock { $0.take.holdsCameras ? $0.take.takeID ?? "" : nil }
        let plan: Plan = holder.map { .busy($0) } ?? previewRoom.withLock { run in
            guard run?.key == key else { return .open }
            run?.clock.update(mapping)
            run?.leaseUntil = leaseUntil
            return .renewed
        }
        switch plan {
        case .busy(let takeID):
            return "previewing take \(takeID)"
        case .renewed:
            preview.configure(settings, framePeriodMicroseconds: grid.periodMicroseconds)
            return "preview renewed"
        case .open:
            break
        }
        stopPreview()
        preview.configure(settings, framePeriodMicroseconds: grid.periodMicroseconds)
        let clock = ClockMappingBox(mapping)
        var opened: [PreviewCamera] = []
        for (index, s) in requested.enumerated() {
            let source = try cameraSource(for: s, index: index)
            opened.append(PreviewCamera(settings: s, source: source, grid: grid, clock: clock, publisher: preview,
                                        localNow: { [weak self] in self?.localNow() ?? 0 }, logger: logger, stills: stills))
        }
        opened.forEach { $0.start() }
        previewRoom.withLock { $0 = .init(cameras: opened, key: key, clock: clock, leaseUntil: leaseUntil, grid: grid) }
        logger.info("previewing", metadata: ["cameras": "\(requested.map(\.camera))", "width": "\(settings.width)", "fps": "\(settings.fps)"])
        return "previewing \(requested.count) camera(s)"
    }

    /// Closes the cameras opened for preview only (if any).
    func stopPreview() {
        guard let (run, train) = previewRoom.withLock({ run -> ([PreviewCamera], [TriggerGenerator])? in
            defer { run = nil }
            return run.map { ($0.cameras, $0.train) }
        }) else { return }
        let deadline = DispatchTime.now() + .seconds(2)
        endPreviewTrain(train, deadline: deadline)
        run.forEach { $0.stop(deadline: deadline) }
        logger.info("preview closed")
    }

    /// Sets one camera's controls: on the camera now if it is open (preview or take), and for whenever it opens.
    func setControls(camera: String, _ wanted: CameraControls) throws(NodeFailure) -> Coord_V1_ControlsApplied {
        guard cameras.contains(where: { $0.name == camera }) else {
            throw NodeFailure(.notFound, "node \(configuration.name) has no camera named \"\(camera)\".")
        }
        let name = "\(configuration.name)/\(camera)"
        let open = controlsRoom.withLock { $0.openCameras[camera]?.camera }
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
            let ranges = v4l2ControlRanges[camera] ?? SyntheticSensor.controlRanges(periodMicroseconds: 1_000_000)
            if let problem = ranges.problem(with: wanted, camera: name) { throw NodeFailure(.badConfig, problem) }
            applied = wanted
        }
        let merged = controlsRoom.withLock { s -> CameraControls in
            let merged = (s.controls[camera] ?? CameraControls()).updated(with: wanted)
            s.controls[camera] = merged
            // What Status reports from now: the camera's own answer, or (closed) the last values read with these over them.
            if streaming {
                s.controlsRead[camera] = (MonotonicClock.now(), applied)
            } else if let read = s.controlsRead[camera] {
                s.controlsRead[camera] = (read.at, read.controls.updated(with: wanted))
            }
            return merged
        }
        if !streaming { applied = merged }
        logger.info("controls set", metadata: ["camera": "\(camera)", "applied": "\(applied)"])
        var reply = Coord_V1_ControlsApplied()
        reply.camera = camera
        reply.controls = applied.wire
        return reply
    }
}
