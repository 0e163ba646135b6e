import CoordCore
import Foundation
import Logging
import Platform
import Synchronization

/// The Snap's pulses on a previewing node (CONTRACT §17, §18): while no take's train runs, a camera bound to a
/// trigger output exposes nothing, so KeepStills makes the output emit one pulse per shot group (the take's
/// generator, on a sparse schedule) and the preview camera hands each frame here first; the frame its pulse
/// exposed is the still, centred as a take's frame is. Beside the camera's table the node writes
/// `<camera>.trigger.json` (the manifest's `trigger` block for the shot) before the still is offered, so the
/// shot's listing, made once every table is written, holds it.
final class SnapTriggers: Sendable {
    private struct Camera {
        let triggering: CameraTriggering
        var pulses: SnapPulses
        var fed = 0
        let folder: URL
        let clock: ClockMappingBox
    }
    private let cameras = Mutex<[String: Camera]>([:])
    /// Each previewing camera's exposure as its newest frame reported it (µs): what places a shot's pulse when the
    /// camera's settings name none (an exposure the camera chose itself).
    private let exposures = Mutex<[String: Int64]>([:])
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    func begin(_ triggering: [String: CameraTriggering], groups: [Int64], folder: URL, clock: ClockMappingBox) {
        cameras.withLock { c in
            for (camera, t) in triggering {
                c[camera] = Camera(triggering: t, pulses: SnapPulses(schedule: t.schedule, delayMicroseconds: t.binding.delayMicroseconds, groups: groups),
                                   folder: folder, clock: clock)
            }
        }
    }

    func exposure(of camera: String) -> Int64? { exposures.withLock { $0[camera] } }

    /// Lets go of cameras whose shot was refused after their outputs started.
    func end(_ names: some Sequence<String>) {
        cameras.withLock { c in for n in names { c.removeValue(forKey: n)?.triggering.generator.cancel() } }
    }

    /// The decisions for one frame of `camera`; nil when no shot's pulse of it is pending (the frame is the
    /// preview's alone, or a free-running camera's to keep as usual).
    func frame(camera: String, center: Int64, exposureMicroseconds: Int64) -> [SnapPulses.Decision]? {
        if exposureMicroseconds > 0 { exposures.withLock { $0[camera] = exposureMicroseconds } }
        return decide(camera: camera) { $0.frame(center: center, exposureMicroseconds: exposureMicroseconds) }
    }

    /// The camera delivered nothing for a while: shot groups it can no longer answer are missing.
    func idle(camera: String, rigNow: Int64) -> [SnapPulses.Decision]? {
        decide(camera: camera) { $0.idle(rigNow: rigNow) }
    }

    private func decide(camera: String, _ step: (inout SnapPulses) -> [SnapPulses.Decision]) -> [SnapPulses.Decision]? {
        let answer: (decisions: [SnapPulses.Decision], figures: TriggerFigures?, folder: URL)? = cameras.withLock { c in
            guard var cam = c[camera] else { return nil }
            let edges = cam.triggering.generator.edges
            let mapping = cam.clock.current
            for e in edges.dropFirst(cam.fed) {
                cam.pulses.pulse(group: e.group, actual: Int64(mapping.rig(fromLocal: Double(e.actual)).rounded()))
            }
            cam.fed = edges.count
            let decisions = step(&cam.pulses)
            c[camera] = cam.pulses.isDone ? nil : cam
            let figures = decisions.isEmpty ? nil : TriggerFigures(output: cam.triggering.binding.output, source: cam.triggering.binding.source,
                                                                   pulses: Int64(edges.count), error: TriggerTiming(errors: edges.map(\.error)))
            return (decisions, figures, cam.folder)
        }
        guard let answer else { return nil }
        if let figures = answer.figures {
            let url = answer.folder.appendingPathComponent("\(camera).trigger.json")
            do {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                try encoder.encode(figures).write(to: url, options: .atomic)
            } catch {
                logger.error("cannot write \(url.path): \(error.localizedDescription)")
            }
        }
        return answer.decisions
    }
}

extension NodeAgent {
    /// Starts one pulse per shot group on every output a previewing camera is bound to (CONTRACT §17): the take's
    /// generator and deadline arithmetic on the shot's groups; a line that cannot be opened refuses the shot in
    /// GPIOLine's sentence naming output, chip and line. Returns the cameras it pulses for.
    func startSnapPulses(shotID: String, groups: [Int64], cameras settings: [CameraSettings], grid: FrameGrid, clock: ClockMappingBox,
                         folder: URL) throws(NodeFailure) -> [String] {
        // The exposure the camera runs at places the pulse (delay + exposure/2 ahead), as the take's set exposure does.
        // A camera the preview train pulses has a frame every group: its still is the train's frame of the group.
        let trained = previewTrainCameras
        let bound = settings.filter { configuration.cameraTriggers[$0.camera] != nil && !trained.contains($0.camera) }.map { s in
            var s = s
            let set = controlsRoom.withLock { $0.controls[s.camera]?.exposureMicroseconds }
            s.controls.exposureMicroseconds = stills.triggers.exposure(of: s.camera).map { Int($0) } ?? set ?? s.controls.exposureMicroseconds
            return s
        }
        guard !bound.isEmpty else { return [] }
        let triggering = try openTriggerOutputs(settings: bound, grid: grid, mapping: clock, groups: groups)
        stills.triggers.begin(triggering, groups: groups, folder: folder, clock: clock)
        logger.info("snap pulses", metadata: ["shot": "\(shotID)", "cameras": "\(triggering.keys.sorted())", "groups": "\(groups.count)"])
        return Array(triggering.keys)
    }

    /// Ends a shot's pulses that were started for a KeepStills refused after all.
    func cancelSnapPulses(cameras: [String]) {
        stills.triggers.end(cameras)
    }
}
