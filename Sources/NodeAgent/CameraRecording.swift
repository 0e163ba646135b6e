import CoordCore
import Foundation
import Logging
import Capture
import LibAV
import Pixels
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// One camera's recording, owned by its recorder's thread (which takes it from `CameraRecorder.handOff`): the
/// source, the files, the phase loop and the group assigner. Nothing else touches it.
final class CameraRecording {
    let settings: CameraSettings
    let node: String
    let mkvURL: URL
    let csvURL: URL
    private let source: any CameraSource & Sendable
    let writer: MatroskaWriter
    /// frames.csv, holding space past its end as the .mkv does, so a full disk still takes the rows of every frame
    /// in the .mkv.
    let csv: HeadroomFile
    let grid: FrameGrid
    private let sensorGrid: FrameGrid
    private let clock: ClockMappingBox
    let localNow: @Sendable () -> Int64
    let logger: Logger
    private let onFinish: @Sendable () -> Void
    /// Something this camera did on its own that the take's events should record: (kind, one sentence).
    let onEvent: @Sendable (TakeEvent.Kind, String) -> Void
    /// The preview branch (nil: none): offered every frame, it takes one now and then, never making this wait.
    private let preview: PreviewPublisher?
    private let takeID: String
    let shared: CameraRecorder.SharedBox

    var assigner: StridedGroupAssigner?
    /// Slow-downs requested before the start, applied once the assigner exists.
    private var waitingSlows: [(every: Int, from: Int64)] = []
    /// The earliest group a disable ends the files before, and whether it still has to reach the assigner.
    private var disabledFrom: Int64?
    private var disablePending = false
    var bytesCheckedAt: Int64?
    /// The directory this camera's files were in, once they were found deleted from it.
    var stagingLost: String?
    private var previous: (capture: Capture, center: Int64)?
    var blank: PlanarFrame?
    var csvBuffer = ""
    var rowsWritten: Int64 = 0
    var framesWritten: Int64 = 0
    /// Frames written to the file whose row waits for a better centre estimate (see `emitRows`).
    var pendingRows: [PendingRow] = []
    private var lastRowCenter: Int64?
    /// A triggered camera's output and the matcher that gives each frame its pulse (nil: free-running).
    private let triggering: CameraTriggering?
    private var matcher: TriggerMatcher?
    private var edgesFed = 0

    struct PendingRow {
        var group: Int64
        var estimate: PhaseController.Estimate?
        var fallbackCenter: Int64
        var dup: Bool
        var writtenAtLocal: Int64
    }

    /// How long a frame's row waits: its centre is then estimated from the frames around it, not only before it.
    private var rowLag: Int64 { 2_000_000 }
    private var lastSequence: UInt32?
    /// Each frame's centre on the rig's grid (never going backwards) and its group.
    private var centres: FrameCentres
    /// The phase last logged for a source that cannot steer (µs from the nearest grid instant).
    private var loggedPhase: Int64?
    private var phase: PhaseController
    /// Re-phases a camera that takes a frame interval while streaming (vivid); nil for every other source.
    private var steering: PhaseSteering?
    /// The source takes frame-duration requests at all (false for a V4L2 camera).
    private let canSteer: Bool

    init(settings: CameraSettings, node: String, mkvURL: URL, csvURL: URL, source: any CameraSource & Sendable, grid: FrameGrid,
         sensorGrid: FrameGrid, clock: ClockMappingBox, phase: PhaseController, metadata: [String: String],
         localNow: @escaping @Sendable () -> Int64, logger: Logger, onFinish: @escaping @Sendable () -> Void,
         onEvent: @escaping @Sendable (TakeEvent.Kind, String) -> Void, preview: PreviewPublisher?, takeID: String,
         shared: CameraRecorder.SharedBox, triggering: CameraTriggering? = nil) throws(NodeFailure) {
        self.settings = settings
        self.triggering = triggering
        matcher = triggering.map { TriggerMatcher(schedule: $0.schedule) }
        self.node = node
        self.mkvURL = mkvURL
        self.csvURL = csvURL
        self.source = source
        self.grid = grid
        self.sensorGrid = sensorGrid
        self.clock = clock
        self.phase = phase
        canSteer = source.canSteerPhase
        self.localNow = localNow
        self.logger = logger
        self.onFinish = onFinish
        self.onEvent = onEvent
        self.preview = preview
        self.takeID = takeID
        self.shared = shared
        centres = FrameCentres(grid: grid)
        let codec = settings.codec
        do {
            writer = try MatroskaWriter(path: mkvURL.path, width: settings.width, height: settings.height, fps: settings.fps,
                                        codec: codec, metadata: metadata)
        } catch {
            throw NodeFailure(.io, "camera \(node)/\(settings.camera): \(error)")
        }
        do throws(HeadroomFile.Failure) {
            // Four seconds of rows (the 2 s re-estimation lag and a second's buffer) of at most 64 bytes each.
            csv = try HeadroomFile(path: csvURL.path, headroom: 16_384 + 256 * Int64(max(settings.fps, 1)))
        } catch {
            try? writer.finish()
            throw NodeFailure(.io, "camera \(node)/\(settings.camera): cannot create \(csvURL.path): \(error.reason).")
        }
        let header = csv.write(Array((FramesTable.header + "\n").utf8))
        guard header == 0 else {
            csv.close()
            try? writer.finish()
            throw NodeFailure(.io, "camera \(node)/\(settings.camera): cannot write \(csvURL.path): \(POSIX.text(header)).")
        }
    }

    /// Starts the source (on the recorder's thread), then records until the files are final.
    func record(from anchor: GridAnchor, started: DispatchSemaphore, running: DispatchGroup) {
        do {
            try source.start(alignedTo: anchor)
        } catch {
            let message = "camera \(node)/\(settings.camera) cannot start: \(error)"
            logger.error("\(message)")
            shared.update { s in
                s.startFailure = message
                s.progress.error = message
            }
            started.signal()
            finishFiles(reason: nil)
            source.stop()
            running.leave()
            onFinish()
            return
        }
        noteRePhasing()
        started.signal()
        // Before the take starts (group 0 is seconds away): a source that cannot steer restarts to near the grid.
        source.settlePhase(on: anchor)
        run()
        running.leave()
    }

    private var lateness: Int64 { max(4 * sensorGrid.periodMicroseconds, 200_000) }

    private func run() {
        defer {
            source.stop()
            if let previous { source.release(previous.capture) }
            previous = nil
            onFinish()
        }
        while true {
            let (start, stop, disable, slows, quit) = shared.update { s in
                defer {
                    s.requestedStart = nil
                    s.requestedStop = nil
                    s.requestedDisable = nil
                    s.requestedSlows.removeAll()
                }
                return (s.requestedStart, s.requestedStop, s.requestedDisable, s.requestedSlows, s.abandon)
            }
            waitingSlows += slows

            if quit {
                finishFiles(reason: "stopped before its last group")
                return
            }
            if let lost = stagingLost {
                cameraEnded(kind: .stagingLost, verb: "stopped",
                            "its files were deleted from the staging directory \(lost) while it recorded")
                return
            }
            var actions: [StridedGroupAssigner.Action] = []
            if let start, assigner == nil {
                assigner = StridedGroupAssigner(grid: grid, cap: max(settings.recordEvery, 1), startGroup: start.start,
                                                stopGroup: start.stop)
            }
            if assigner != nil {
                for slow in waitingSlows { assigner!.slow(every: slow.every, from: slow.from) }
                waitingSlows.removeAll()
            }
            if let disable {
                disabledFrom = min(disabledFrom ?? disable, disable)
                disablePending = true
            }
            if let stop, assigner != nil, disabledFrom.map({ $0 > stop }) ?? true {
                if assigner!.nextGroup > stop && !assigner!.isFinished {
                    // Frames past the stop are already in the file: the take cannot be equal on this camera.
                    let message = "camera \(node)/\(settings.camera): the stop at group \(stop) arrived after group \(assigner!.nextGroup - 1) was written"
                    logger.error("\(message)")
                    shared.update { s in s.progress.error = s.progress.error ?? message }
                }
                actions += assigner!.stop(at: stop)
            }
            if disablePending, let disabledFrom, assigner != nil {
                // Never later than a stop already set; a group already past ends the files at the next one.
                let end = min(max(disabledFrom, assigner!.nextGroup), assigner!.stopGroup ?? .max)
                actions += assigner!.stop(at: end)
                disablePending = false
            }
            if !actions.isEmpty, perform(actions, capture: nil) { return }

            let next = source.next(timeoutMicroseconds: sensorGrid.periodMicroseconds)
            if case .ended(let why) = next {
                cameraEnded(why)
                return
            }
            if case .frame(let capture) = next {
                if let last = lastSequence, capture.sequence != last &+ 1 {
                    shared.update { s in s.progress.sensorSkips += Int64(capture.sequence &- last &- 1) }
                }
                lastSequence = capture.sequence
                // The phase loop filters the noisy timestamp; the frame's centre is its estimate, on the rig
                // timebase by the clock mapping in force now (tracked by the coordinator through the take).
                let estimate = phase.observe(sequence: capture.sequence, stampedCenterLocal: capture.stampedCenterLocal,
                                             durationMicroseconds: capture.durationMicroseconds)
                let mapping = clock.current
                let placed = centres.place(centerLocal: estimate.centerLocal, mapping: mapping)
                let center = placed.center
                // Steer the sensor so the frame after next lands on the grid (armed and recording alike); a source
                // that cannot steer is only measured.
                if canSteer {
                    source.requestNextFramePeriod(FrameCentres.steer(&phase, mapping: mapping, acquiring: assigner == nil))
                } else {
                    notePhase(center: center)
                    // A triggered camera's phase is the pulses': nothing to re-phase.
                    if triggering == nil { steerPhase(center: center) }
                }
                let restarts = phase.restarts, stampSigma = source.stampChoice?.uncertaintyMicroseconds ?? 0
                let (dropped, uncertainty) = shared.update { s in
                    s.progress.timestampNoise = estimate.noiseMicroseconds
                    let fit = estimate.uncertaintyMicroseconds.isFinite ? estimate.uncertaintyMicroseconds : 0
                    // The phase loop sees only the stamps' noise; a stamp's lateness (uvcvideo's) widens it.
                    s.progress.centerUncertainty = (fit * fit + stampSigma * stampSigma).squareRoot()
                    s.progress.phaseRestarts = restarts
                    s.progress.phaseError = Double(placed.phaseError)
                    return (s.progress.dropped, s.progress.centerUncertainty)
                }
                if let preview {
                    preview.offer(PreviewOffer(camera: settings.camera, ordinal: settings.ordinal, takeID: takeID,
                                               group: placed.group, centerMicroseconds: center, dropped: dropped,
                                               centerUncertainty: uncertainty, phaseError: placed.phaseError),
                                  payload: capture.payload)
                }
                if assigner == nil {
                    keepAsPrevious(capture, center: center)
                    continue
                }
                var written = center
                if matcher != nil {
                    guard let pulsed = pulseCenter(of: capture, center: center, mapping: mapping) else {
                        source.release(capture)
                        // A frame no pulse exposed still says the camera's time has passed, as a missing frame does: a
                        // free-running camera whose last pulse went unanswered (skipped, or no frame) would otherwise
                        // never end the take. Its own centre, not the clock: a recorder running behind its queued
                        // frames must not fill groups whose frames are still in the queue.
                        actions = assigner!.tick(now: center, lateness: lateness)
                        if perform(actions, capture: nil) { return }
                        continue
                    }
                    written = pulsed
                }
                actions = assigner!.frame(center: written)
                if perform(actions, capture: (capture, written, estimate)) { return }
            } else if assigner != nil {
                let now = Int64(clock.current.rig(fromLocal: Double(localNow())).rounded())
                actions = assigner!.tick(now: now, lateness: lateness)
                if perform(actions, capture: nil) { return }
            }
        }
    }

    /// Writes the rows of frames written at least `rowLag` ago (all of them with `all`), each with its centre
    /// re-estimated from the phase fit as it stands now, mapped by the newest clock mapping.
    func emitRows(all: Bool = false) {
        let now = localNow()
        let mapping = clock.current
        while let row = pendingRows.first, all || now - row.writtenAtLocal >= rowLag {
            pendingRows.removeFirst()
            var center = row.fallbackCenter
            if let estimate = row.estimate, let better = phase.center(of: estimate) {
                center = Int64(mapping.rig(fromLocal: better).rounded())
            }
            if !row.dup {
                // Rig-timebase centres never go backwards, whatever a clock update did.
                if let lastRowCenter, center <= lastRowCenter { center = lastRowCenter + 1 }
                lastRowCenter = center
            }
            appendRow(group: row.group, center: center, dup: row.dup)
        }
    }

    private func keepAsPrevious(_ capture: Capture, center: Int64) {
        if let previous { source.release(previous.capture) }
        previous = (capture, center)
    }

    /// The measured phase of a source that cannot steer: logged once its fit has settled (a second of frames),
    /// then whenever it has moved by a tenth of a period, so the log shows where the camera really runs.
    /// Whether this free-running camera can be re-phased (asked once its stream ran), for the arm's warning.
    private func noteRePhasing() {
        guard !canSteer, let camera = source as? RePhasingCamera, let verdict = camera.rePhaseVerdict else { return }
        var state = verdict
        if verdict == .accepted, ProcessInfo.processInfo.environment["COORD_NODE_REPHASE"] == "off" {
            // The baseline of bench/vmlab_steer.py: the same node, measuring only.
            state = .refused("re-phasing is switched off (COORD_NODE_REPHASE=off)")
        } else if verdict == .accepted {
            let candidate = PhaseSteering(periodMicroseconds: source.minPeriodMicroseconds,
                                          offeredPeriods: camera.offeredPeriodsMicroseconds)
            if candidate.canStep {
                steering = candidate
            } else {
                state = .refused("it offers no other frame interval within half a frame of its own")
            }
        }
        logger.info("camera re-phasing probed", metadata: ["camera": "\(settings.camera)", "verdict": "\(state)"])
        shared.update { $0.rePhasing = state }
    }

    /// Feeds the measured phase to the steering and carries out its decision (one frame at another interval).
    private func steerPhase(center: Int64) {
        guard steering != nil, let camera = source as? RePhasingCamera else { return }
        let error = center - sensorGrid.instant(ofGroup: sensorGrid.nearestGroup(to: center))
        guard case .rePhase(let period, let shift) = steering!.observe(phaseErrorMicroseconds: Double(error)) else { return }
        guard camera.rePhase(throughPeriod: period) else { return }
        // The frames move on purpose: the fit starts again rather than take the step for noise.
        phase.restartFit()
        loggedPhase = nil
        logger.info("camera re-phased", metadata: ["camera": "\(settings.camera)", "phase_error_us": "\(error)",
                                                   "shift_us": "\(Int(shift.rounded()))"])
        shared.update { $0.progress.rePhases += 1 }
    }

    private func notePhase(center: Int64) {
        guard phase.estimate.map({ $0.frames >= max(settings.fps, 8) }) ?? false else { return }
        let error = center - grid.instant(ofGroup: grid.nearestGroup(to: center))
        if let loggedPhase, abs(error - loggedPhase) < grid.periodMicroseconds / 10 { return }
        loggedPhase = error
        logger.info("camera phase measured", metadata: ["camera": "\(settings.camera)", "phase_error_us": "\(error)"])
    }

    /// The source is gone for good (unplugged), or the files were deleted under it: the files end where they are,
    /// and the take's events say which camera ended and why.
    private func cameraEnded(kind: TakeEvent.Kind = .cameraEnded, verb: String = "ended", _ why: String) {
        let at = assigner.map { "after group \($0.nextGroup - 1)" } ?? "before the take started"
        let message = "camera \(node)/\(settings.camera) \(verb) \(at): \(why)"
        logger.error("\(message)")
        shared.update { s in s.progress.error = s.progress.error ?? message }
        onEvent(kind, message)
        finishFiles(reason: nil)
    }

    /// A triggered frame's centre: the measured edge of the pulse that exposed it plus the camera's delay and half
    /// its exposure; nil for a frame no pulse exposed (dropped and counted; a pulse without a frame is a gap the
    /// assigner fills with a dup).
    private func pulseCenter(of capture: Capture, center: Int64, mapping: ClockMapping) -> Int64? {
        guard let triggering else { return center }
        for e in triggering.generator.edges(after: edgesFed) {
            matcher!.pulse(group: e.group, actual: Int64(mapping.rig(fromLocal: Double(e.actual)).rounded()))
            edgesFed += 1
        }
        switch matcher!.frame(center: center) {
        case .extra:
            let extra = matcher!.extraFrames
            shared.update { $0.progress.extraFrames = extra }
            return nil
        case .pulse(_, let expected):
            let edge = expected - triggering.schedule.leadMicroseconds
            return edge + triggering.binding.delayMicroseconds + capture.exposureMicroseconds / 2
        }
    }

    /// Carries out the assigner's decisions; returns true once the file is finished.
    private func perform(_ actions: [StridedGroupAssigner.Action],
                         capture: (capture: Capture, center: Int64, estimate: PhaseController.Estimate)?) -> Bool {
        var captureKept = false
        defer { if let capture, !captureKept { source.release(capture.capture) } }
        defer { emitRows() }
        do {
            for action in actions {
                switch action {
                case .holdAsPrevious:
                    if let capture { keepAsPrevious(capture.capture, center: capture.center); captureKept = true }
                case .write(let group):
                    guard let capture else { continue }
                    try write(capture.capture.payload, group: group)
                    // A triggered frame's centre is its pulse's, not the phase fit's.
                    frameWritten(group: group, estimate: matcher == nil ? capture.estimate : nil, center: capture.center, dup: false, held: false)
                    keepAsPrevious(capture.capture, center: capture.center)
                    captureKept = true
                    if isShortOfSpace { stopOnFullDisk(after: group); return true }
                case .repeatPrevious(let group, let held):
                    // A held repeat may come with a frame the slow-down leaves unused: it is released, not kept.
                    if writer.framesWritten > 0 {
                        try writer.writeRepeat(ptsMicroseconds: pts(group))
                    } else {
                        // Nothing written yet: the held pre-roll frame (or a blank picture) fills the first group.
                        try write(previous?.capture.payload ?? .picture(blankPicture()), group: group)
                    }
                    frameWritten(group: group, estimate: nil, center: previous?.center ?? grid.instant(ofGroup: group), dup: true,
                                 held: held)
                    if isShortOfSpace { stopOnFullDisk(after: group); return true }
                case .discard:
                    break
                case .finish:
                    finishFiles(reason: nil)
                    return true
                }
            }
        } catch {
            let at = assigner.map { " after group \($0.nextGroup - 1)" } ?? ""
            var message = "camera \(node)/\(settings.camera) stopped recording\(at): \(error)"
            while message.hasSuffix(".") { message.removeLast() }
            if writer.isShortOfSpace { message += " (the staging disk of node \(node) is full)" }
            shared.update { s in s.progress.error = message }
            // The frame whose write failed has no row; frames written before it may not all be in the file.
            if finishFiles(reason: nil) != nil { message += "; " + reconcileWithFile() }
            logger.error("\(message)")
            shared.update { s in s.progress.error = message }
            onEvent(.writeFailed, message)
            return true
        }
        return false
    }
}
