import CoordCore
import Foundation
import Logging
import Media
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// Records one camera of a take: takes frames from its source (a synthetic sensor or a V4L2 camera), maps their
/// exposure centres onto the rig timebase, lets the `StridedGroupAssigner` decide which group each fills, and
/// writes the Matroska file and frames.csv. Runs on its own thread; recording never waits for the network.
///
/// A frame-rate cap (`settings.recordEvery` k > 1) runs the sensor at fps / k, phase-locked onto the coarse
/// grid of every k-th group; the groups between are held repeats. A live slow-down keeps the sensor's rate and
/// leaves frames unused instead; a disable ends the files early on purpose. Either way the file holds one frame
/// per group it records (CONTRACT §4).
///
/// A source that cannot steer its frames (a V4L2 camera free-runs once streaming) is started as near the grid as
/// it can be and left to run: the phase loop then only measures, and every centre in frames.csv is the measured
/// one. A source that ends for good (a camera unplugged) finalizes the files where they are; the node's other
/// cameras go on.
// @unchecked: requests and progress are under `lock`; everything else belongs to the recorder's thread.
final class CameraRecorder: @unchecked Sendable {
    struct Progress: Sendable {
        var frames: Int64 = 0
        var dropped: Int64 = 0
        var lastGroup: Int64 = -1
        var finished = false
        var error: String?
        var sensorSkips: Int64 = 0
        /// The phase loop's measured timestamp noise and the one-sigma error of its centre estimates (µs).
        var timestampNoise: Double = 0
        var centerUncertainty: Double = 0
        /// Times the phase fit restarted (dropped frames, or timing it could not explain).
        var phaseRestarts = 0
        /// Groups filled on purpose (a frame-rate cap or a slow-down); not counted in `dropped`.
        var held: Int64 = 0
        /// One group in this many is recorded from the sensor now.
        var recordEvery = 1
        /// Disabled during the take (its file ends early on purpose).
        var disabled = false
        /// Bytes of the .mkv so far.
        var bytesWritten: UInt64 = 0
        /// The newest frame's centre minus its nearest grid instant (µs), nil before the first frame.
        var phaseError: Double?
    }

    let settings: CameraSettings
    let node: String
    let mkvURL: URL
    let csvURL: URL
    private let source: CameraSource
    private let writer: MatroskaWriter
    private let csv: FileHandle
    private let grid: FrameGrid
    /// The grid the sensor is locked onto: the rig's grid, or every k-th group of it under a cap.
    private let sensorGrid: FrameGrid
    private let clock: ClockMappingBox
    private let localNow: @Sendable () -> Int64
    private let logger: Logger
    private let onFinish: @Sendable () -> Void
    /// Something this camera did on its own that the take's events should record: (kind, one sentence).
    private let onEvent: @Sendable (TakeEvent.Kind, String) -> Void
    /// The preview branch (nil: none): offered every frame, it takes one now and then, never making this wait.
    private let preview: PreviewPublisher?
    private let takeID: String

    private let lock = NSLock()
    private var progress = Progress()
    private var requestedStart: (start: Int64, stop: Int64?)?
    private var requestedStop: Int64?
    private var requestedSlows: [(every: Int, from: Int64)] = []
    private var requestedDisable: Int64?
    private var abandon = false
    /// Entered when the recorder's thread starts, left when its files are final.
    private let running = DispatchGroup()
    /// Signalled once the source has started (or failed to); `startFailure` says why it failed.
    private let started = DispatchSemaphore(value: 0)
    private var startFailure: String?

    // Owned by the recorder thread.
    private var assigner: StridedGroupAssigner?
    /// Slow-downs requested before the start, applied once the assigner exists.
    private var waitingSlows: [(every: Int, from: Int64)] = []
    /// The earliest group a disable ends the files before, and whether it still has to reach the assigner.
    private var disabledFrom: Int64?
    private var disablePending = false
    private var bytesCheckedAt: Int64?
    /// The directory this camera's files were in, once they were found deleted from it.
    private var stagingLost: String?
    private var previous: (capture: Capture, center: Int64)?
    private var blank: PlanarFrame?
    private var csvBuffer = ""
    private var rowsWritten: Int64 = 0
    private var framesWritten: Int64 = 0
    /// Frames written to the file whose row waits for a better centre estimate (see `emitRows`).
    private var pendingRows: [PendingRow] = []
    private var lastRowCenter: Int64?

    private struct PendingRow {
        var group: Int64
        var estimate: PhaseController.Estimate?
        var fallbackCenter: Int64
        var dup: Bool
        var writtenAtLocal: Int64
    }

    /// How long a frame's row waits: its centre is then estimated from the frames around it, not only before it.
    private var rowLag: Int64 { 2_000_000 }
    private var lastSequence: UInt32?
    private var lastCenter: Int64?
    /// The phase last logged for a source that cannot steer (µs from the nearest grid instant).
    private var loggedPhase: Int64?
    private var phase: PhaseController
    private let canShiftPhase: Bool
    /// The source takes frame-duration requests at all (false for a V4L2 camera).
    private let canSteer: Bool

    /// Opens the file and its frames table; the source starts running at `arm` (armed), writing waits for `start`.
    init(settings: CameraSettings, node: String, directory: URL, source: CameraSource, grid: FrameGrid, clock: ClockMappingBox,
         metadata: [String: String], localNow: @escaping @Sendable () -> Int64, logger: Logger,
         onFinish: @escaping @Sendable () -> Void,
         onEvent: @escaping @Sendable (TakeEvent.Kind, String) -> Void = { _, _ in },
         preview: PreviewPublisher? = nil, takeID: String = "") throws(NodeFailure) {
        self.preview = preview
        self.takeID = takeID
        self.settings = settings
        self.node = node
        self.source = source
        self.grid = grid
        self.clock = clock
        self.localNow = localNow
        self.logger = logger
        self.onFinish = onFinish
        self.onEvent = onEvent
        sensorGrid = GroupStride(every: max(settings.recordEvery, 1)).coarseGrid(of: grid)
        progress.recordEvery = max(settings.recordEvery, 1)
        phase = PhaseController(grid: sensorGrid, minPeriodMicroseconds: source.minPeriodMicroseconds,
                                maxPeriodMicroseconds: source.maxPeriodMicroseconds)
        canSteer = source.canSteerPhase
        canShiftPhase = canSteer && phase.canShiftPhase
        mkvURL = directory.appendingPathComponent("\(settings.camera).mkv")
        csvURL = directory.appendingPathComponent("\(settings.camera).frames.csv")
        guard let codec = VideoCodec(rawValue: settings.codec) else {
            throw NodeFailure(.badConfig, "camera \(node)/\(settings.camera): unknown codec \"\(settings.codec)\".")
        }
        do {
            writer = try MatroskaWriter(path: mkvURL.path, width: settings.width, height: settings.height, fps: settings.fps,
                                        codec: codec, metadata: metadata)
        } catch {
            throw NodeFailure(.io, "camera \(node)/\(settings.camera): \(error)")
        }
        guard FileManager.default.createFile(atPath: csvURL.path, contents: Data((FramesTable.header + "\n").utf8)),
              let handle = try? FileHandle(forWritingTo: csvURL) else {
            try? writer.finish()
            throw NodeFailure(.io, "camera \(node)/\(settings.camera): cannot create \(csvURL.path).")
        }
        _ = try? handle.seekToEnd()
        csv = handle
    }

    /// One sentence when this camera's phase cannot be steered onto the grid, or nil.
    var phaseWarning: String? {
        guard !canShiftPhase else { return nil }
        let rate = settings.recordEvery > 1 ? String(format: "%.3g", settings.capturedFPS) : "\(settings.fps)"
        if !canSteer {
            return "camera \(node)/\(settings.camera) cannot steer its frame timing (a V4L2 camera free-runs once streaming at \(rate) fps): its stream was started as near the grid as it could be, and its phase drifts by its rate error through the take; frames.csv and the sync report give the measured phase, not the target."
        }
        return "camera \(node)/\(settings.camera) runs at the limit of its frame-duration range at \(rate) fps: its frames can be delayed onto the grid but not advanced, so if its clock runs slower than the grid's it drifts off by its rate error through the take (choose a lower frame rate for full phase lock)."
    }

    /// Starts the source on the recorder's own thread (a source that cannot steer waits there for its start
    /// instant near the grid); `waitUntilStarted` tells whether it did.
    func arm() {
        running.enter()
        let mapping = clock.current
        let t0 = Double(sensorGrid.instant(ofGroup: 0))
        let first = mapping.local(fromRig: t0)
        let anchor = GridAnchor(instantLocal: first,
                                periodMicroseconds: mapping.local(fromRig: t0 + Double(sensorGrid.periodMicroseconds)) - first)
        let thread = Thread { [self] in
            // Armed from the real-time socket thread: encoding must not inherit its priority.
            ThreadPriority.makeCurrentThreadNormal()
            ThreadPriority.nameCurrentThread("rec-\(settings.camera)")
            do {
                try source.start(alignedTo: anchor)
            } catch {
                let message = "camera \(node)/\(settings.camera) cannot start: \(error)"
                logger.error("\(message)")
                lock.lock(); startFailure = message; progress.error = message; lock.unlock()
                started.signal()
                finishFiles(reason: nil)
                source.stop()
                running.leave()
                onFinish()
                return
            }
            started.signal()
            // Before the take starts (group 0 is seconds away): a source that cannot steer restarts to near the grid.
            source.settlePhase(on: anchor)
            run()
            running.leave()
        }
        thread.name = "record-\(settings.camera)"
        thread.start()
    }

    /// Waits until the source has started; one sentence if it could not (or did not by `deadline`), else nil.
    func waitUntilStarted(deadline: DispatchTime) -> String? {
        guard started.wait(timeout: deadline) == .success else {
            return "camera \(node)/\(settings.camera) did not start streaming in time."
        }
        started.signal()  // later callers see the same answer
        lock.lock()
        defer { lock.unlock() }
        return startFailure
    }

    /// Writes groups [start, stop); stop nil means until `stop(at:)`.
    func start(group: Int64, stop: Int64?) {
        lock.lock()
        requestedStart = (group, stop)
        lock.unlock()
    }

    func stop(at group: Int64) {
        lock.lock()
        requestedStop = group
        lock.unlock()
    }

    /// From group `from` on, writes one group in `recordEvery` from the sensor and fills the others with the
    /// previous frame (counted as held, not dropped); the sensor keeps its rate, so its phase lock is untouched.
    /// On a camera with a cap, `recordEvery` is its total stride on the rig's grid, not a multiple of the cap:
    /// it is rounded up to a multiple of the cap and never goes below it (`StridedGroupAssigner.slow`).
    func slow(recordEvery: Int, from group: Int64) {
        lock.lock()
        requestedSlows.append((recordEvery, group))
        lock.unlock()
    }

    /// Ends this camera's files before group `from` (exactly `from − start` rows); the node's other cameras go
    /// on. Disabling is on purpose: a group already past ends the files at the next group, without an error.
    func disable(from group: Int64) {
        lock.lock()
        requestedDisable = min(requestedDisable ?? group, group)
        progress.disabled = true
        lock.unlock()
    }

    /// Stops without finishing the take's groups (abort, or shutdown before start).
    func abandonRecording() {
        lock.lock()
        abandon = true
        lock.unlock()
    }

    /// Waits until the files are final (or the deadline passes); true if they are.
    func waitUntilFinished(deadline: DispatchTime) -> Bool {
        running.wait(timeout: deadline) == .success
    }

    var snapshot: Progress {
        lock.lock()
        defer { lock.unlock() }
        return progress
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
            lock.lock()
            let start = requestedStart
            requestedStart = nil
            let stop = requestedStop
            requestedStop = nil
            let disable = requestedDisable
            requestedDisable = nil
            waitingSlows += requestedSlows
            requestedSlows.removeAll()
            let quit = abandon
            lock.unlock()

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
                    lock.lock(); progress.error = progress.error ?? message; lock.unlock()
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
                    lock.lock(); progress.sensorSkips += Int64(capture.sequence &- last &- 1); lock.unlock()
                }
                lastSequence = capture.sequence
                // The phase loop filters the noisy timestamp; the frame's centre is its estimate, on the rig
                // timebase by the clock mapping in force now (tracked by the coordinator through the take).
                let estimate = phase.observe(sequence: capture.sequence, stampedCenterLocal: capture.stampedCenterLocal,
                                             durationMicroseconds: capture.durationMicroseconds)
                let mapping = clock.current
                var center = Int64(mapping.rig(fromLocal: estimate.centerLocal).rounded())
                // Rig-timebase centres never go backwards, whatever a clock update did.
                if let lastCenter, center <= lastCenter { center = lastCenter + 1 }
                lastCenter = center
                // Steer the sensor so the frame after next lands on the grid (armed and recording alike); a source
                // that cannot steer is only measured.
                if canSteer {
                    source.requestNextFramePeriod(phase.nextDuration(toLocal: { mapping.local(fromRig: $0) },
                                                                     toRig: { mapping.rig(fromLocal: $0) },
                                                                     acquiring: assigner == nil))
                } else {
                    notePhase(center: center)
                }
                lock.lock()
                progress.timestampNoise = estimate.noiseMicroseconds
                progress.centerUncertainty = estimate.uncertaintyMicroseconds.isFinite ? estimate.uncertaintyMicroseconds : 0
                progress.phaseRestarts = phase.restarts
                let group = grid.nearestGroup(to: center)
                progress.phaseError = Double(center - grid.instant(ofGroup: group))
                let (dropped, uncertainty) = (progress.dropped, progress.centerUncertainty)
                lock.unlock()
                if let preview {
                    preview.offer(PreviewOffer(camera: settings.camera, ordinal: settings.ordinal, takeID: takeID,
                                               group: group, centerMicroseconds: center, dropped: dropped,
                                               centerUncertainty: uncertainty, phaseError: center - grid.instant(ofGroup: group)),
                                  payload: capture.payload)
                }
                if assigner == nil {
                    keepAsPrevious(capture, center: center)
                    continue
                }
                actions = assigner!.frame(center: center)
                if perform(actions, capture: (capture, center, estimate)) { return }
            } else if assigner != nil {
                let now = Int64(clock.current.rig(fromLocal: Double(localNow())).rounded())
                actions = assigner!.tick(now: now, lateness: lateness)
                if perform(actions, capture: nil) { return }
            }
        }
    }

    /// Writes the rows of frames written at least `rowLag` ago (all of them with `all`), each with its centre
    /// re-estimated from the phase fit as it stands now, mapped by the newest clock mapping.
    private func emitRows(all: Bool = false) {
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
        lock.lock(); progress.error = progress.error ?? message; lock.unlock()
        onEvent(kind, message)
        finishFiles(reason: nil)
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
                    frameWritten(group: group, estimate: capture.estimate, center: capture.center, dup: false, held: false)
                    keepAsPrevious(capture.capture, center: capture.center)
                    captureKept = true
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
                case .discard:
                    break
                case .finish:
                    finishFiles(reason: nil)
                    return true
                }
            }
        } catch {
            let at = assigner.map { " after group \($0.nextGroup - 1)" } ?? ""
            let message = "camera \(node)/\(settings.camera) stopped recording\(at): \(error)"
            logger.error("\(message)")
            lock.lock(); progress.error = message; lock.unlock()
            onEvent(.writeFailed, message)
            finishFiles(reason: message)
            return true
        }
        return false
    }

    /// A raw picture is encoded; a camera's JPEG is muxed as it came (MJPEG passthrough).
    private func write(_ payload: CapturePayload, group: Int64) throws {
        switch payload {
        case .picture(let picture): try writer.write(picture, ptsMicroseconds: pts(group))
        case .jpeg(let bytes): try writer.writePacket(bytes, ptsMicroseconds: pts(group))
        }
    }

    private func pts(_ group: Int64) -> Int64 {
        (group - (assigner?.startGroup ?? 0)) * grid.periodMicroseconds
    }

    private func blankPicture() -> PlanarFrame {
        if let blank { return blank }
        let frame = PlanarFrame(width: settings.width, height: settings.height)
        frame.luma.update(repeating: 16)
        frame.cb.update(repeating: 128)
        frame.cr.update(repeating: 128)
        blank = frame
        return frame
    }

    /// `held`: a fill on purpose (cap or slow-down), counted apart from frames the sensor failed to deliver.
    private func frameWritten(group: Int64, estimate: PhaseController.Estimate?, center: Int64, dup: Bool, held: Bool) {
        pendingRows.append(PendingRow(group: group, estimate: estimate, fallbackCenter: center, dup: dup, writtenAtLocal: localNow()))
        framesWritten += 1
        let every = assigner?.recordEvery(atGroup: group)
        lock.lock()
        progress.frames = framesWritten
        if dup { if held { progress.held += 1 } else { progress.dropped += 1 } }
        progress.lastGroup = group
        if let every { progress.recordEvery = every }
        lock.unlock()
        refreshBytesWritten()
    }

    /// Keeps `Progress.bytesWritten` at the .mkv's size on disk, read at most twice a second (`force`: now), and
    /// notices files deleted under the recorder (the staging directory removed mid-take): frames written to an
    /// unlinked file are lost, so the camera must end and say so.
    private func refreshBytesWritten(force: Bool = false) {
        let now = MonotonicClock.now()
        guard force || bytesCheckedAt.map({ now - $0 >= 500_000 }) ?? true else { return }
        bytesCheckedAt = now
        var csvStat = stat()
        let unlinked = fstat(csv.fileDescriptor, &csvStat) == 0 && csvStat.st_nlink == 0
        guard !unlinked, let attributes = try? FileManager.default.attributesOfItem(atPath: mkvURL.path),
              let size = (attributes[.size] as? NSNumber)?.uint64Value else {
            if !force, stagingLost == nil { stagingLost = mkvURL.deletingLastPathComponent().path }
            return
        }
        lock.lock(); progress.bytesWritten = size; lock.unlock()
    }

    private func appendRow(group: Int64, center: Int64, dup: Bool) {
        csvBuffer += FramesTable.line(FrameRow(frame: rowsWritten, group: group, centerMicroseconds: center, isDup: dup))
        csvBuffer += "\n"
        rowsWritten += 1
        // Rows reach the disk every second's worth of frames; with the 2 s re-estimation lag a crash loses the
        // last ~3 s of rows (the .mkv keeps those frames).
        if rowsWritten % Int64(max(settings.fps, 1)) == 0 { flushRows() }
    }

    private func flushRows() {
        guard !csvBuffer.isEmpty else { return }
        do {
            try csv.write(contentsOf: Data(csvBuffer.utf8))
        } catch {
            lock.lock(); progress.error = progress.error ?? "camera \(node)/\(settings.camera): writing \(csvURL.path) failed: \(reason(error))"; lock.unlock()
        }
        csvBuffer = ""
    }

    private func finishFiles(reason: String?) {
        emitRows(all: true)
        flushRows()
        try? csv.synchronize()
        try? csv.close()
        do {
            try writer.finish()
        } catch {
            lock.lock(); progress.error = progress.error ?? "camera \(node)/\(settings.camera): finishing \(mkvURL.path) failed: \(error)"; lock.unlock()
        }
        refreshBytesWritten(force: true)
        lock.lock()
        progress.finished = true
        if let reason, progress.error == nil, assigner != nil { progress.error = "camera \(node)/\(settings.camera) \(reason)" }
        lock.unlock()
        logger.info("camera finished", metadata: ["camera": "\(settings.camera)", "frames": "\(rowsWritten)"])
    }
}
