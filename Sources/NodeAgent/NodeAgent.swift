import CoordCore
import GenICam
import CoordWire
import Foundation
import Logging
import Capture
import Pixels
import Platform
import Synchronization
import ZeroMQ

/// The node agent: the shell that carries out what the node's take (`NodeTake`, pure, in CoordCore) decides.
/// Requests arrive on the socket's thread (routing: NodeRequests.swift); recording runs on the recorders' own
/// threads, which report back here. Everything that changes lives in rooms, each behind its own `Mutex`
/// (`NodeAgentState`), never one taken inside another.
/// Arm: NodeArm.swift; status: NodeStatusReport.swift; microphones, files, pressure, preview and the repair after
/// a crash each in their own file.
public final class NodeAgent: Sendable {
    public static let version = CoordVersion.current
    /// This process among all coord-node processes: a coordinator tells two spellings of one endpoint by it.
    let instanceID = (0..<4).map { _ in String(UInt32.random(in: 0...UInt32.max), radix: 16) }.joined(separator: "-")

    let configuration: NodeConfiguration
    let logger: Logger
    let store: FileStore
    let simulatedClock: SimulatedClock
    let cameras: [CameraCapabilities]
    /// What each V4L2 camera's controls accept (read once at start), so controls are checked while it is closed.
    let v4l2ControlRanges: [String: ControlRanges]
    /// The buses the node's cameras share: declared for synthetic cameras, read from sysfs for V4L2 ones.
    let buses: [Bus]
    let probe: HostProbe
    /// Only `pressureQueue` samples it (reading sysfs must not hold a room's lock).
    let monitor: Mutex<PressureMonitor>
    let takeRoom: Mutex<NodeAgentState.Take>
    let servingRoom = Mutex(NodeAgentState.Serving())
    let pressureRoom = Mutex(NodeAgentState.Pressure())
    let controlsRoom = Mutex(NodeAgentState.Controls())
    let previewRoom = Mutex<NodeAgentState.PreviewRun?>(nil)
    /// The console's Snaps waiting for their frames from the preview's cameras.
    let stills: StillKeeper
    /// Microphones opened at configure, so their timing has settled and their clock fit has seconds of stamps by
    /// group 0 (ALSA's pulse plugin reports a bogus half-second delay for its first second); taken by arm.
    let warmMics = Mutex<[String: any AudioSource]>([:])
    let indexQueue = DispatchQueue(label: "coord-node.index")
    let pressureQueue = DispatchQueue(label: "coord-node.pressure")
    /// The preview branch (nil: this node publishes none).
    let preview: PreviewPublisher?
    let previewContext = ZMQContext()
    let badInputLog = Mutex(RepeatLimiter())
    /// The node's own stop: why, whether it began, whether a status has told of the take it ended.
    let stopping = Mutex(NodeStopping())
    /// Who may connect (nil: no keys) and the preview context's ZAP handler.
    let gatekeeper: Gatekeeper?
    /// Where the takes' trigger trains run: a child task each, in the node's service group (`BuiltNode`).
    public let triggerRuns = TriggerRuns()
    let previewZAP: ZAPHandler?

    /// Builds the agent; every V4L2 camera's device is opened once to read what it offers. Throws one sentence
    /// naming the camera and its device when one is missing, busy, not a capture node or offers nothing coord can
    /// record (the node must not start without a camera it was told to record).
    public init(configuration: NodeConfiguration, logger: Logger) throws(NodeFailure) {
        self.configuration = configuration
        self.logger = logger
        store = FileStore(root: configuration.staging)
        stills = StillKeeper(node: configuration.name, store: store, logger: logger)
        let probe = HostProbe(root: configuration.systemRoot)
        self.probe = probe
        monitor = Mutex(PressureMonitor(probe: probe, staging: configuration.staging))
        simulatedClock = SimulatedClock(offsetMicroseconds: configuration.clockOffsetMicroseconds,
                                        driftPPM: configuration.clockDriftPPM,
                                        hostReference: configuration.clockReferenceMicroseconds ?? MonotonicClock.now())
        let synthetic = configuration.syntheticCameras.map { name in
            // A synthetic sensor declares the formats a typical USB camera offers, up to 60 fps.
            let sizes = [(320, 240), (640, 480), (1280, 720), (1920, 1080), (3840, 2160)]
            return CameraCapabilities(
                name: name, source: "synthetic",
                formats: sizes.map { CameraFormat(pixelFormat: "yuv420p", width: $0.0, height: $0.1,
                                                  minFramePeriodMicroseconds: Int64(SyntheticSensor.Spec.fastestPeriodMicroseconds),
                                                  maxFramePeriodMicroseconds: 1_000_000) },
                codecs: VideoCodec.allCases, bus: configuration.syntheticCameraBus[name] ?? "")
        }
        var buses = configuration.syntheticBuses
        var v4l2: [CameraCapabilities] = []
        var ranges: [String: ControlRanges] = [:]
        for entry in configuration.v4l2Cameras {
            let found: V4L2CameraDescription
            do {
                found = try configuration.v4l2.describe(camera: entry.name, path: entry.device)
            } catch {
                throw NodeFailure(.io, "camera \(entry.name): \(error).")
            }
            if let problem = found.formatProblem { throw NodeFailure(.io, "camera \(entry.name): \(problem).") }
            ranges[entry.name] = found.controlRanges
            // The USB bus the camera's stream crosses, shared with the node's other cameras on it.
            // sysfs knows the node by its real name: a /dev/v4l/by-id link is followed first.
            let bus = probe.usbBus(forVideoDevice: URL(fileURLWithPath: entry.device).resolvingSymlinksInPath().path)
            if let bus, !buses.contains(where: { $0.id == bus.id }) { buses.append(bus) }
            var found4 = CameraCapabilities(name: entry.name, source: "v4l2", device: entry.device, formats: found.handshakeFormats,
                                            codecs: VideoCodec.allCases, bus: bus?.id ?? "")
            // What the controller will reserve for an isochronous webcam: its largest alternate setting.
            found4.usbReservedBytesPerSecond = probe.usbIsoStream(
                forVideoDevice: URL(fileURLWithPath: entry.device).resolvingSymlinksInPath().path)?.stream.reservedBytesPerSecond ?? 0
            v4l2.append(found4)
            logger.info("camera found", metadata: ["camera": "\(entry.name)", "device": "\(entry.device)",
                                                   "card": "\(found.capabilities.card)", "bus": "\(found.busInfo)"])
        }
        var genicam: [CameraCapabilities] = []
        for entry in configuration.genicamCameras {
            let found: GenICamDescription
            do {
                found = try GenICamCamera.describe(deviceID: entry.deviceID, interfaces: configuration.genicamInterfaces)
            } catch {
                throw NodeFailure(.io, "camera \(entry.name): \(error).")
            }
            if let problem = found.formatProblem(deviceID: entry.deviceID) { throw NodeFailure(.io, "camera \(entry.name): \(problem).") }
            ranges[entry.name] = found.controlRanges
            // The link its stream crosses (a NIC's GigE, a USB3 link), shared with the node's other cameras on it.
            let bus = GenICamLink.bus(of: found, deviceID: entry.deviceID, systemRoot: configuration.systemRoot)
            if let bus, !buses.contains(where: { $0.id == bus.id }) { buses.append(bus) }
            var capability = CameraCapabilities(name: entry.name, source: "genicam", device: entry.deviceID, formats: found.handshakeFormats,
                                              codecs: VideoCodec.allCases, bus: bus?.id ?? "")
            // Its AcquisitionFrameRate limit at this size and exposure: what a trigger faster than it would lose.
            capability.trigger = configuration.cameraTriggers[entry.name].map {
                .init(output: $0.output, maximumFrameRate: found.frameRateRange?.upperBound)
            }
            genicam.append(capability)
            logger.info("camera found", metadata: ["camera": "\(entry.name)", "genicam": "\(entry.deviceID)",
                                                   "model": "\(found.identity.model ?? "")", "protocol": "\(found.identity.transport ?? "")"])
        }
        let libcamera = try configuration.libcameraCameras.map { entry throws(NodeFailure) in
            try LibcameraCameras.capabilities(entry, logger: logger)
        }
        // Every other triggered camera (V4L2) says its output; its rate limit is its formats' already.
        cameras = (synthetic + v4l2 + genicam + libcamera).map { c in
            var c = c
            if c.trigger == nil, let t = configuration.cameraTriggers[c.name] { c.trigger = .init(output: t.output) }
            return c
        }
        takeRoom = Mutex(NodeAgentState.Take(take: NodeTake(node: configuration.name, cameras: cameras)))
        v4l2ControlRanges = ranges
        self.buses = buses
        let gatekeeper = configuration.security.map { Gatekeeper(security: $0, logger: logger) }
        self.gatekeeper = gatekeeper
        var zap: ZAPHandler?
        var publisher: PreviewPublisher?
        if let endpoint = configuration.previewBindEndpoint {
            do {
                // The preview is guarded like the control socket: its handler is bound before the PUB socket.
                zap = try gatekeeper?.guardContext(previewContext)
                var revocations: (@Sendable () -> Int)?
                if let keeper = gatekeeper { revocations = { keeper.revocationCount } }
                publisher = try PreviewPublisher(node: configuration.name, endpoint: endpoint, context: previewContext,
                                                 curve: gatekeeper?.serverCurve, logger: logger, revocations: revocations)
            } catch {
                // The preview is a convenience: a node records without it rather than not at all.
                logger.warning("no preview: \(error)")
            }
        }
        previewZAP = zap
        preview = publisher
        recoverInterruptedTakes()
    }

    /// The stored calibration, read afresh so a `coord-node calibrate` takes effect without a restart; nil
    /// (with a warning) when there is none or it cannot be read.
    func calibration() -> Calibration? {
        let url = configuration.calibrationFile
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            return try Calibration.load(from: url)
        } catch {
            logger.warning("calibration not used", metadata: ["reason": "\(error)"])
            return nil
        }
    }

    /// The node's local clock (µs): CLOCK_MONOTONIC, shifted by the simulation if one is configured.
    public func localNow() -> Int64 { simulatedClock.local(fromHost: MonotonicClock.now()) }

    // MARK: The take: its decisions under the lock, carried out after

    /// What carrying out a decision's directives made: the directives themselves, and the devices an arm opened.
    struct Carried {
        var directives: [NodeTake.Directive]
        var armed: OpenedDevices?
    }

    /// Lets the take decide under the lock (the shell's part of its directives done there too: `keep` when the
    /// take keeps the recorders just opened), then carries the directives out with the recorders as they were; a
    /// refusal is thrown. `arm`: the Arm being served, whose devices an `openDevices` opens.
    @discardableResult
    func decide(for arm: NodeRequest.Arm? = nil, _ decision: (inout NodeTake) -> [NodeTake.Directive],
                keeping keep: ((inout NodeAgentState.Take) -> Void)? = nil) throws(NodeFailure) -> Carried {
        let (directives, recorders, clock) = takeRoom.withLock { s in
            let directives = decision(&s.take)
            let held = (s.recorders, s.clock)
            s.apply(directives)
            if let keep, directives.contains(where: { if case .keepRecorders = $0 { true } else { false } }) { keep(&s) }
            return (directives, held.0, held.1)
        }
        // A Configure's controls are kept before any device of its take can open (its Arm comes after this returns).
        if directives.contains(where: { if case .configured = $0 { true } else { false } }) {
            controlsRoom.withLock { $0.apply(directives) }
        }
        var carried = Carried(directives: directives)
        try carryOut(directives, recorders: recorders, clock: clock, arm: arm, into: &carried)
        return carried
    }

    /// A recorder's news, from its own thread: nothing to refuse.
    func report(_ event: NodeTake.Event) {
        _ = try? decide { $0.handle(event) }
    }

    private func carryOut(_ directives: [NodeTake.Directive], recorders: [any TakeRecorder], clock: ClockMappingBox?,
                          arm: NodeRequest.Arm?, into carried: inout Carried) throws(NodeFailure) {
        for directive in directives {
            switch directive {
            case .refuse(let failure):
                throw failure
            case .openDevices(let arming, let settings, let grid, let clock):
                // Only an Arm makes the take open devices; its request says the timecode and the preview.
                guard let arm else {
                    throw NodeFailure(.internal, "the take of node \(configuration.name) asked to open devices for take \(arming.takeID) outside an arm.")
                }
                carried.armed = try openDevices(arming, settings: settings, grid: grid, clock: clock, for: arm)
            case .configured:
                warmUpMicrophones()
            case .markRecording(let takeID, let t0, let period, let startGroup):
                store.markRecording(takeID, .init(t0: t0, periodMicroseconds: period, startGroup: startGroup))
            case .startRecorders(let group, let stop):
                recorders.forEach { $0.start(group: group, stop: stop) }
            case .stopRecorders(let group):
                recorders.forEach { $0.stop(at: group) }
            case .adjust(let camera, let adjustment):
                guard let recorder = recorders.cameras.first(where: { $0.settings.camera == camera }) else { continue }
                switch adjustment {
                case .slow(let every, let from): recorder.slow(recordEvery: every, from: from)
                case .disable(let from): recorder.disable(from: from)
                case .unknown: break
                }
            case .updateClock(let mapping):
                clock?.update(mapping)
            case .abandonRecorders:
                recorders.forEach { $0.abandonRecording() }
                coolMicrophones()
            case .deleteTake(let takeID):
                // Nothing was recorded: the empty files go. A take that had started keeps whatever it captured.
                // The abandoned recorders end first (a microphone waits up to 0.1 s for its next buffer): a take
                // armed again at once opens files of the same names, which a late recorder must not close or remove.
                let deadline = DispatchTime.now() + .seconds(2)
                for recorder in recorders where !recorder.waitUntilFinished(deadline: deadline) {
                    logger.warning("recorder still ending", metadata: ["take": "\(takeID)", "recorder": "\(recorder.name)"])
                }
                try? FileManager.default.removeItem(at: store.takeDirectory(takeID))
            case .finalize(let takeID):
                finalize(takeID)
            case .log(let severity, let line):
                switch severity {
                case .notice: logger.notice("\(line)")
                case .warning: logger.warning("\(line)")
                case .error: logger.error("\(line)")
                }
            case .keepRecorders, .say, .ignored:
                // Kept under the lock by `decide`'s `keep`; an event is in the take's events for status; an ignored
                // request's reason is its reply.
                break
            }
        }
    }

    /// Every recorder's files are final: checksums the take's files once and stores them in the take's index, so
    /// listing never hashes on the request thread. Runs on the thread of the recorder that finished last.
    private func finalize(_ takeID: String) {
        let files: [TakeManifest.File]
        do {
            let index = try store.index(takeID: takeID)
            files = index.files
            if let problem = index.unsaved {
                logger.warning("take \(takeID): its checksums are kept in memory only until collected: \(problem)")
            }
        } catch {
            logger.error("take \(takeID): its files could not be checksummed: \(error.message)")
            files = []
        }
        store.clearRecordingMark(takeID)
        report(.finalized(takeID: takeID))
        logger.info("take finished", metadata: ["take": "\(takeID)", "files": "\(files.count)"])
    }

    // MARK: Requests of the take

    func configure(takeID: String, cameras requested: [CameraSettings]) throws(NodeFailure) {
        try decide { $0.handle(.configure(takeID: takeID, cameras: requested, now: MonotonicClock.now())) }
        logger.info("configured", metadata: ["take": "\(takeID)", "cameras": "\(requested.map(\.camera))"])
    }

    func start(takeID: String, startGroup: Int64, stopGroup: Int64) throws(NodeFailure) {
        let local = localNow()
        try decide { $0.handle(.start(takeID: takeID, startGroup: startGroup, stopGroup: stopGroup, localNow: local)) }
        logger.info("recording", metadata: ["take": "\(takeID)", "start_group": "\(startGroup)", "stop_group": "\(stopGroup)"])
    }

    /// A newer estimate of this node's clock for the take in progress; the cameras use it from their next frame.
    func updateClock(takeID: String, _ clock: ClockMapping) throws(NodeFailure) -> String {
        let directives = try decide { $0.handle(.updateClock(takeID: takeID, clock)) }.directives
        for case .ignored(let why) in directives { return why }
        return "clock updated"
    }

    /// The coordinator's pressure policy slows or disables one camera from a group on.
    func adjust(takeID: String, camera: String, _ adjustment: NodeTake.Adjustment, reason: String) throws(NodeFailure) -> String {
        try decide { $0.handle(.adjust(takeID: takeID, camera: camera, adjustment)) }
        switch adjustment {
        case .slow(let every, let from):
            logger.notice("camera slowed", metadata: ["camera": "\(camera)", "record_every": "\(every)",
                                                      "from_group": "\(from)", "reason": "\(reason)"])
            return "camera \(camera) records one group in \(every) from group \(from)"
        case .disable(let from):
            logger.notice("camera disabled", metadata: ["camera": "\(camera)", "from_group": "\(from)", "reason": "\(reason)"])
            return "camera \(camera) ends before group \(from)"
        case .unknown:
            return "camera \(camera) unchanged"  // refused by the take above; never reached
        }
    }

    func stop(takeID: String, stopGroup: Int64) throws(NodeFailure) {
        try decide { $0.handle(.stop(takeID: takeID, stopGroup: stopGroup)) }
    }

    func abort(takeID: String, reason: String) throws(NodeFailure) {
        try decide { $0.handle(.abort(takeID: takeID, reason: reason)) }
        logger.warning("take aborted", metadata: ["take": "\(takeID)", "reason": "\(reason)"])
    }

    // MARK: Time and shutdown

    /// Called every few hundred ms by the server: the take judges the time (an armed take never started is
    /// dropped), the pressure is sampled, an idle preview's lease and a collection's chunk buffers run out.
    public func tick() {
        // Off the socket thread: reading sysfs must not delay the clock probes it answers.
        pressureQueue.async { [weak self] in self?.samplePressure() }
        let now = MonotonicClock.now()
        let leaseOver = previewRoom.withLock { $0.map { now > $0.leaseUntil } ?? false }
        let collectionOver = servingRoom.withLock { s -> Bool in
            // Chunk buffers are kept for the next chunk while a collection runs, and returned 10 s after it.
            guard let last = s.lastChunkServed, now - last > 10_000_000 else { return false }
            s.lastChunkServed = nil
            return true
        }
        if collectionOver { ChunkBuffers.shared.trim() }
        if leaseOver { pressureQueue.async { [weak self] in self?.stopPreview() } }
        report(.tick(localNow: localNow()))
    }

    /// Why the node is going away, as the take it ends will say it ("SIGTERM, its service shutting down"): noted
    /// by whoever saw the signal, before the graceful shutdown begins.
    public func noteStopping(cause: String) {
        stopping.withLock { if $0.cause == nil { $0.cause = cause } }
    }

    /// Graceful shutdown: a recording take's cameras stop two groups ahead, on a group the take's events name with
    /// the cause (`noteStopping`), and their files are finalized; an armed take's recorders are let go. The take's
    /// end and its events are left in a note, so a restarted node still tells its coordinator why the take ended.
    /// Idempotent; returns whether a take was ended (its coordinator should then see its status once more).
    @discardableResult
    public func shutdown() -> Bool {
        let (first, cause) = stopping.withLock { s -> (Bool, String) in
            defer { s.begun = true }
            return (!s.begun, s.cause ?? "its service shutting down")
        }
        guard first else {
            // Another caller is ending the take: its files are final only once it is done.
            let deadline = DispatchTime.now() + .seconds(15)
            while DispatchTime.now() < deadline, !stopping.withLock({ $0.done }) { Thread.sleep(forTimeInterval: 0.05) }
            return false
        }
        defer { stopping.withLock { $0.done = true } }
        stopPreview()
        preview?.stop()
        previewZAP?.stop()
        let local = localNow()
        let directives = (try? decide { $0.handle(.stopping(cause: cause, localNow: local)) })?.directives ?? []
        let stopped = directives.contains { if case .stopRecorders = $0 { true } else { false } }
        let said = directives.contains { if case .say = $0 { true } else { false } }
        let active = takeRoom.withLock { $0.recorders }
        // A recording take's recorders were told to stop at a group; anything else (an armed take) lets go now.
        if !stopped { active.forEach { $0.abandonRecording() } }
        var deadline = DispatchTime.now() + .seconds(10)
        var late = active.filter { !$0.waitUntilFinished(deadline: deadline) }
        if !late.isEmpty {
            late.forEach { $0.abandonRecording() }
            deadline = DispatchTime.now() + .seconds(2)
            late = late.filter { !$0.waitUntilFinished(deadline: deadline) }
        }
        for recorder in late {
            switch recorder.kind {
            case .camera: logger.error("camera \(recorder.name) did not finish its files within 12 s of shutdown")
            case .microphone: logger.error("microphone \(recorder.name) did not finish its file within 12 s of shutdown")
            }
        }
        coolMicrophones()
        if said {
            let take = takeRoom.withLock { $0.take }
            if let takeID = take.takeID { store.leaveStopNote(takeID, .init(detail: take.detail, events: take.events)) }
        }
        return said
    }

    /// Waits, after `shutdown` ended a take, until a status has told someone the take's end (its coordinator polls
    /// every half second), or until `deadline`.
    public func awaitTakeEndSeen(deadline: DispatchTime) {
        while DispatchTime.now() < deadline, !stopping.withLock({ $0.endSeen }) {
            Thread.sleep(forTimeInterval: 0.05)
        }
    }
}

/// The node's own stop (graceful shutdown), as the agent and its status see it.
struct NodeStopping {
    var cause: String?
    var begun = false
    var done = false
    /// A status reply said the take's files are final after the stop began.
    var endSeen = false
}
