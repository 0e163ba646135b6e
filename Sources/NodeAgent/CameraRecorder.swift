import CoordCore
import Foundation
import Logging
import Capture
import Platform
import Synchronization
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
/// one; a camera that takes a frame interval while streaming (vivid; a UVC webcam answers EBUSY) is re-phased onto
/// the grid by `PhaseSteering`. A source that ends for good (a camera unplugged) finalizes the files where they are; the node's other
/// cameras go on.
final class CameraRecorder: Sendable {
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
        /// Times a free-running camera was re-phased onto the grid (one frame at another interval).
        var rePhases = 0
        /// A triggered camera's frames no pulse exposed: dropped, not written (CONTRACT §17).
        var extraFrames: Int64 = 0
    }

    /// What the node asks and what the recorder's thread reports, between the two.
    struct Shared: Sendable {
        var progress = Progress()
        var requestedStart: (start: Int64, stop: Int64?)?
        var requestedStop: Int64?
        var requestedSlows: [(every: Int, from: Int64)] = []
        var requestedDisable: Int64?
        var abandon = false
        /// Why the source could not start, once it did not.
        var startFailure: String?
        /// A free-running camera's answer to a frame interval while streaming, once its stream ran (nil: not asked).
        var rePhasing: RePhaseVerdict?
        /// The take's first group, once started: a triggered camera's pulses count from it.
        var startGroup: Int64?
    }

    /// `Shared` behind its lock, reached by the recorder and by its recording's thread.
    final class SharedBox: Sendable {
        private let mutex: Mutex<Shared>
        init(_ shared: Shared) { mutex = Mutex(shared) }
        @discardableResult
        func update<Result: Sendable>(_ body: (inout Shared) -> Result) -> Result { mutex.withLock { body(&$0) } }
    }

    let settings: CameraSettings
    let node: String
    let mkvURL: URL
    let csvURL: URL
    /// The grid the sensor is locked onto: the rig's grid, or every k-th group of it under a cap.
    private let sensorGrid: FrameGrid
    private let clock: ClockMappingBox
    private let canShiftPhase: Bool
    /// The source takes frame-duration requests at all (false for a V4L2 camera).
    private let canSteer: Bool
    /// Why a source that could steer does not (a libcamera camera that did not follow FrameDurationLimits at arm).
    private let freeRunReason: String?
    private let shared: SharedBox
    /// Entered when the recorder's thread starts, left when its files are final.
    private let running = DispatchGroup()
    /// Signalled once the source has started (or failed to); `startFailure` says why it failed.
    private let started = DispatchSemaphore(value: 0)
    /// The recording, made at init (so a file that cannot be made refuses the arm) and taken once by the thread.
    private let handOff: Mutex<CameraRecording?>
    /// The output whose pulses expose this camera (nil: it free-runs).
    private let triggering: CameraTriggering?

    /// Opens the file and its frames table; the source starts running at `arm` (armed), writing waits for `start`.
    init(settings: CameraSettings, node: String, directory: URL, source: any CameraSource & Sendable, grid: FrameGrid,
         clock: ClockMappingBox, metadata: [String: String], localNow: @escaping @Sendable () -> Int64, logger: Logger,
         onFinish: @escaping @Sendable () -> Void,
         onEvent: @escaping @Sendable (TakeEvent.Kind, String) -> Void = { _, _ in },
         preview: PreviewPublisher? = nil, takeID: String = "", triggering: CameraTriggering? = nil) throws(NodeFailure) {
        self.settings = settings
        self.triggering = triggering
        self.node = node
        self.clock = clock
        let sensorGrid = GroupStride(every: max(settings.recordEvery, 1)).coarseGrid(of: grid)
        self.sensorGrid = sensorGrid
        let phase = PhaseController(grid: sensorGrid, minPeriodMicroseconds: source.minPeriodMicroseconds,
                                    maxPeriodMicroseconds: source.maxPeriodMicroseconds,
                                    timing: source.frameDurationTiming)
        canSteer = source.canSteerPhase
        freeRunReason = source.freeRunReason
        canShiftPhase = canSteer && phase.canShiftPhase
        let mkvURL = directory.appendingPathComponent("\(settings.camera).mkv")
        let csvURL = directory.appendingPathComponent("\(settings.camera).frames.csv")
        self.mkvURL = mkvURL
        self.csvURL = csvURL
        var initial = Shared()
        initial.progress.recordEvery = max(settings.recordEvery, 1)
        let shared = SharedBox(initial)
        self.shared = shared
        handOff = Mutex(try CameraRecording(
            settings: settings, node: node, mkvURL: mkvURL, csvURL: csvURL, source: source, grid: grid, sensorGrid: sensorGrid,
            clock: clock, phase: phase, metadata: metadata, localNow: localNow, logger: logger, onFinish: onFinish,
            onEvent: onEvent, preview: preview, takeID: takeID, shared: shared, triggering: triggering))
    }

    /// A triggered camera's manifest figures so far: its output's pulses and their timing error (nil: free-running).
    var triggerFigures: TriggerFigures? {
        guard let t = triggering else { return nil }
        let start = shared.update { $0.startGroup } ?? 0
        let edges = t.generator.edges.filter { $0.group >= start }
        return TriggerFigures(output: t.binding.output, source: t.binding.source, pulses: Int64(edges.count),
                              error: TriggerTiming(errors: edges.map(\.error)))
    }

    /// One sentence when this camera's phase cannot be steered onto the grid, or nil.
    var phaseWarning: String? {
        guard !canShiftPhase else { return nil }
        let rate = settings.recordEvery > 1 ? String(format: "%.3g", settings.capturedFPS) : "\(settings.fps)"
        if !canSteer, case .accepted = shared.update({ $0.rePhasing }) {
            return "camera \(node)/\(settings.camera) free-runs once streaming at \(rate) fps but takes a new frame interval while it streams (as vivid does): the node re-phases it onto the grid, one frame at another interval, whenever its measured phase strays past a tenth of a frame; frames.csv and the sync report give the measured phase."
        }
        if !canSteer, let why = freeRunReason {
            return "camera \(node)/\(settings.camera) free-runs at \(rate) fps: \(why); its stream was started as near the grid as it could be, and its phase drifts by its rate error through the take; frames.csv and the sync report give the measured phase, not the target."
        }
        if !canSteer {
            if case .refused(let why) = shared.update({ $0.rePhasing }) {
                return "camera \(node)/\(settings.camera) cannot steer its frame timing (a V4L2 camera free-runs once streaming at \(rate) fps, and it refused a frame interval while streaming: \(why)): its stream was started as near the grid as it could be, and its phase drifts by its rate error through the take; frames.csv and the sync report give the measured phase, not the target."
            }
            return "camera \(node)/\(settings.camera) cannot steer its frame timing (a V4L2 camera, or a GenICam camera, free-runs once streaming at \(rate) fps): its stream was started as near the grid as it could be, and its phase drifts by its rate error through the take; frames.csv and the sync report give the measured phase, not the target."
        }
        return "camera \(node)/\(settings.camera) runs at the limit of its frame-duration range at \(rate) fps: its frames can be delayed onto the grid but not advanced, so if its clock runs slower than the grid's it drifts off by its rate error through the take (choose a lower frame rate for full phase lock)."
    }

    /// Starts the source on the recorder's own thread (a source that cannot steer waits there for its start
    /// instant near the grid); `waitUntilStarted` tells whether it did.
    func arm() {
        running.enter()
        let local = FrameCentres.anchor(of: sensorGrid, group: 0, mapping: clock.current)
        let anchor = GridAnchor(instantLocal: local.instantLocal, periodMicroseconds: local.periodMicroseconds)
        let thread = Thread { [self] in
            // Armed from the real-time socket thread: encoding must not inherit its priority.
            ThreadPriority.makeCurrentThreadNormal()
            ThreadPriority.nameCurrentThread("rec-\(settings.camera)")
            if let recording = handOff.withLock({ $0.take() }) {
                recording.record(from: anchor, started: started, running: running)
            } else {
                running.leave()
            }
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
        return shared.update { $0.startFailure }
    }

    /// Writes groups [start, stop); stop nil means until `stop(at:)`.
    func start(group: Int64, stop: Int64?) {
        if let stop { triggering?.generator.stop(at: stop) }
        shared.update { s in
            s.requestedStart = (group, stop)
            s.startGroup = group
        }
    }

    func stop(at group: Int64) {
        triggering?.generator.stop(at: group)
        shared.update { $0.requestedStop = group }
    }

    /// From group `from` on, writes one group in `recordEvery` from the sensor and fills the others with the
    /// previous frame (counted as held, not dropped); the sensor keeps its rate, so its phase lock is untouched.
    /// On a camera with a cap, `recordEvery` is its total stride on the rig's grid, not a multiple of the cap:
    /// it is rounded up to a multiple of the cap and never goes below it (`StridedGroupAssigner.slow`).
    func slow(recordEvery: Int, from group: Int64) {
        shared.update { $0.requestedSlows.append((recordEvery, group)) }
    }

    /// Ends this camera's files before group `from` (exactly `from − start` rows); the node's other cameras go
    /// on. Disabling is on purpose: a group already past ends the files at the next group, without an error.
    func disable(from group: Int64) {
        shared.update { s in
            s.requestedDisable = min(s.requestedDisable ?? group, group)
            s.progress.disabled = true
        }
    }

    /// Stops without finishing the take's groups (abort, or shutdown before start).
    func abandonRecording() {
        triggering?.generator.cancel()
        shared.update { $0.abandon = true }
    }

    /// Waits until the files are final (or the deadline passes); true if they are.
    func waitUntilFinished(deadline: DispatchTime) -> Bool {
        running.wait(timeout: deadline) == .success
    }

    var snapshot: Progress { shared.update { $0.progress } }
}
