import CoordCore
import CoordWire
import Foundation
import Logging
import Capture
import LibAV
import Pixels
import Platform
import Synchronization
import ZeroMQ

/// What the recorder knows about a frame it offers to the preview.
struct PreviewOffer: Sendable {
    var camera: String
    var ordinal: Int
    var takeID: String
    var group: Int64
    var centerMicroseconds: Int64
    var dropped: Int64
    var centerUncertainty: Double
    var phaseError: Int64
}

/// The node's preview branch: recorder threads offer frames; at most one per camera per 1/fps is taken (a copy,
/// made at once), and a worker thread scales, encodes and publishes it on the node's PUB socket. A camera whose
/// previous tile is still being encoded simply skips the offer: the preview drops, the recording never waits.
final class PreviewPublisher: Sendable {
    let endpoint: String
    private let node: String
    private let logger: Logger
    /// Only the worker thread uses the socket after init (and replaces it when a key is revoked): the lock is
    /// never contended, it only makes the replacement safe to express.
    private let current: Mutex<ZMQSocket>
    private var socket: ZMQSocket { current.withLock { $0 } }
    private let context: ZMQContext
    private let options: ZMQSocket.Options
    /// The gatekeeper's count of revoked keys (nil without keys): a PUB socket cannot judge its subscribers'
    /// messages one by one, so when a key leaves the directory the socket is bound again and every subscriber
    /// passes the ZAP handler anew (an authorized one reconnects by itself within ZeroMQ's reconnect interval).
    private let revocations: (@Sendable () -> Int)?
    private let wake = DispatchSemaphore(value: 0)

    private enum SlotState { case free, filling, pending, encoding }
    /// Whose turn one camera's slot is (under the publisher's lock): its content belongs to whoever moved it away
    /// from free (filling: the offering recorder; encoding: the worker), never to both.
    private struct Turn {
        var state = SlotState.free
        var lastGroup: Int64 = .min
    }
    /// One camera's tile in the making. Its own lock is only taken by the holder of its turn, so it is never
    /// contended: a copy or an encoding never holds the publisher's lock.
    private final class Slot: Sendable {
        struct Content {
            var picture: PlanarFrame?
            var jpeg: [UInt8]?
            var offer: PreviewOffer?
            let maker = PreviewTileMaker()
        }
        let content = Mutex(Content())
    }
    private struct State {
        var settings = PreviewSettings.off
        var stride: Int64 = 1
        var slots: [String: Slot] = [:]
        var turns: [String: Turn] = [:]
        var stopped = false
        var published: Int64 = 0
    }
    private let state = Mutex(State())

    /// Binds the PUB socket at `endpoint` (its port `*` for any); the worker starts at once.
    /// `curve`: the node's CURVE server keys (its context's ZAP handler admits only authorized subscribers).
    init(node: String, endpoint requested: String, context: ZMQContext, curve: ZMQSocket.Curve?, logger: Logger,
         revocations: (@Sendable () -> Int)? = nil) throws(ZMQError) {
        self.node = node
        self.logger = logger
        var options = ZMQSocket.Options()
        options.sendTimeoutMs = 0
        options.lingerMs = 0
        // A subscriber that falls behind loses tiles instead of receiving stale ones later.
        options.sendHighWaterMark = 8
        options.curve = curve
        let socket = try context.makeSocket(.publisher, options: options)
        endpoint = try socket.bind(requested)
        current = Mutex(socket)
        self.context = context
        self.options = options
        self.revocations = revocations
        let thread = Thread { [self] in work() }
        thread.name = "preview"
        thread.start()
    }

    var settings: PreviewSettings { state.withLock { $0.settings } }

    /// Tiles of this size and rate from now on, taken from every stride-th group of a grid of this period.
    func configure(_ settings: PreviewSettings, framePeriodMicroseconds: Int64) {
        state.withLock {
            $0.settings = settings
            $0.stride = settings.groupStride(framePeriodMicroseconds: framePeriodMicroseconds)
        }
    }

    var publishedCount: Int64 { state.withLock { $0.published } }

    /// Offers one frame; copies it only when its group is one the preview takes (the same groups on every camera,
    /// so the coordinator can match them) and this camera's previous tile is done.
    func offer(_ offer: PreviewOffer, payload: CapturePayload) {
        let slot: Slot? = state.withLock { s in
            guard !s.stopped, s.settings.isOn else { return nil }
            let slot = s.slots[offer.camera] ?? Slot()
            s.slots[offer.camera] = slot
            let turn = s.turns[offer.camera] ?? Turn()
            guard turn.state == .free, offer.group != turn.lastGroup,
                  (offer.group % s.stride + s.stride) % s.stride == 0 else { return nil }
            s.turns[offer.camera] = Turn(state: .filling, lastGroup: offer.group)
            return slot
        }
        guard let slot else { return }
        slot.content.withLock { c in
            switch payload {
            case .picture(let picture):
                if c.picture?.width != picture.width || c.picture?.height != picture.height {
                    c.picture = PlanarFrame(width: picture.width, height: picture.height)
                }
                c.picture!.copy(from: picture)
                c.jpeg = nil
            case .jpeg(let bytes):
                // An MJPEG camera's tile is its own JPEG, not scaled (decoding it here would cost the node a decoder).
                c.jpeg = bytes
            }
            c.offer = offer
        }
        state.withLock { $0.turns[offer.camera]?.state = .pending }
        wake.signal()
    }

    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }

    private func work() {
        ThreadPriority.makeCurrentThreadNormal()
        defer { socket.close() }
        var revoked = revocations?() ?? 0
        while true {
            _ = wake.wait(timeout: .now() + .milliseconds(200))
            if let count = revocations?(), count != revoked {
                revoked = count
                rebind()
            }
            let (stopped, width, due): (Bool, Int, [(camera: String, slot: Slot)]) = state.withLock { s in
                let due = s.turns.filter { $0.value.state == .pending }.map(\.key)
                for camera in due { s.turns[camera]?.state = .encoding }
                return (s.stopped, s.settings.width, due.compactMap { camera in s.slots[camera].map { (camera, $0) } })
            }
            if stopped { return }
            for (camera, slot) in due {
                publish(slot, width: width)
                state.withLock { s in
                    s.turns[camera]?.state = .free
                    s.published += 1
                }
            }
        }
    }

    /// Closes the socket (dropping every subscriber) and binds a new one at the same endpoint; the port is free again
    /// once libzmq's I/O thread has closed the old listener, so the bind is retried for up to a second.
    private func rebind() {
        socket.close()
        let deadline = MonotonicClock.now() + 1_000_000
        while true {
            do {
                let fresh = try context.makeSocket(.publisher, options: options)
                do {
                    try fresh.bind(endpoint)
                    current.withLock { $0 = fresh }
                    logger.info("preview subscribers dropped: a key left the authorized directory", metadata: ["endpoint": "\(endpoint)"])
                    return
                } catch {
                    fresh.close()
                    throw error
                }
            } catch {
                guard MonotonicClock.now() < deadline else {
                    logger.error("no preview from now on: cannot bind \(endpoint) again after a key was revoked: \(error)")
                    return
                }
                Thread.sleep(forTimeInterval: 0.02)
            }
        }
    }

    private func publish(_ slot: Slot, width: Int) {
        guard let frame = slot.content.withLock({ tile(of: $0, width: width) }) else { return }
        var envelope = Coord_V1_Envelope()
        envelope.protocolVersion = UInt32(Coord_V1_ProtocolVersion.current.rawValue)
        envelope.previewFrame = frame
        guard let bytes = try? envelope.serializedBytes() as [UInt8] else { return }
        _ = try? socket.send([bytes])
    }

    /// The slot's frame as a PreviewFrame with its tile; nil when it cannot be made.
    private func tile(of slot: Slot.Content, width: Int) -> Coord_V1_PreviewFrame? {
        guard let offer = slot.offer else { return nil }
        var frame = Coord_V1_PreviewFrame()
        frame.node = node
        frame.camera = offer.camera
        frame.ordinal = UInt32(clamping: offer.ordinal)
        frame.group = offer.group
        frame.centerUs = offer.centerMicroseconds
        frame.dropped = UInt64(clamping: offer.dropped)
        frame.takeID = offer.takeID
        frame.centerUncertaintyUs = offer.centerUncertainty
        frame.phaseErrorUs = offer.phaseError
        if let jpeg = slot.jpeg {
            frame.jpeg = Data(jpeg)
        } else if let picture = slot.picture {
            do {
                frame.jpeg = Data(try slot.maker.tile(of: picture, tileWidth: width))
                let size = PreviewTileMaker.size(width: picture.width, height: picture.height, tileWidth: width)
                frame.width = UInt32(size.width)
                frame.height = UInt32(size.height)
            } catch {
                logger.warning("preview tile failed", metadata: ["camera": "\(offer.camera)", "error": "\(error)"])
                return nil
            }
        }
        return frame
    }
}

/// One camera opened for preview only (no take, no files): its frames steered onto the preview grid as a
/// recording's are, each offered to the preview.
final class PreviewCamera: Sendable {
    /// The group a frame stands for in a Snap: a sensor running one group in `every` (a still's mode) shoots groups
    /// n·every, and a free-running one (a webcam that takes no interval while streaming) lands up to half its frame
    /// off: its frame nearest a shot's group is that group's still, its phase error stated, never a missed shot.
    static func stillGroup(_ group: Int64, every: Int) -> Int64 {
        guard every > 1 else { return group }
        let k = Int64(every)
        let shifted = group + k / 2  // groups are never negative here; floor for safety
        return (shifted >= 0 ? shifted / k : -((-shifted + k - 1) / k)) * k
    }

    let settings: CameraSettings
    /// Used by this camera's thread only, after `start`.
    private let source: any CameraSource & Sendable
    private let grid: FrameGrid
    private let clock: ClockMappingBox
    private let publisher: PreviewPublisher
    private let localNow: @Sendable () -> Int64
    private let logger: Logger
    private let stopped = Mutex(false)
    private let finished = DispatchSemaphore(value: 0)
    private let stills: StillKeeper?
    /// A camera switched to a still's mode runs until it has passed this group and settled its stills, then calls
    /// `ended` (true: it ended by itself, not by `stop`), where the node puts the preview's mode back.
    private let endAfterGroup: Int64?
    private let ended: (@Sendable (Bool) -> Void)?

    init(settings: CameraSettings, source: any CameraSource & Sendable, grid: FrameGrid, clock: ClockMappingBox, publisher: PreviewPublisher,
         localNow: @escaping @Sendable () -> Int64, logger: Logger, stills: StillKeeper? = nil,
         endAfterGroup: Int64? = nil, ended: (@Sendable (Bool) -> Void)? = nil) {
        self.stills = stills
        self.endAfterGroup = endAfterGroup
        self.ended = ended
        self.settings = settings
        self.source = source
        self.grid = grid
        self.clock = clock
        self.publisher = publisher
        self.localNow = localNow
        self.logger = logger
    }

    func start() {
        let thread = Thread { [self] in
            run()
            finished.signal()
            ended?(!stopped.withLock { $0 })
        }
        thread.name = "preview-\(settings.camera)"
        thread.start()
    }

    /// Stops and lets go of the camera; waits at most `deadline` for its thread.
    func stop(deadline: DispatchTime) {
        stopped.withLock { $0 = true }
        _ = finished.wait(timeout: deadline)
    }

    private func run() {

        let sensorGrid = GroupStride(every: max(settings.recordEvery, 1)).coarseGrid(of: grid)
        var phase = PhaseController(grid: sensorGrid, minPeriodMicroseconds: source.minPeriodMicroseconds,
                                    maxPeriodMicroseconds: source.maxPeriodMicroseconds,
                                    timing: source.frameDurationTiming)
        let mapping = clock.current
        let rigNow = mapping.rig(fromLocal: Double(localNow()))
        let local = FrameCentres.anchor(of: sensorGrid, group: sensorGrid.nearestGroup(to: Int64(rigNow)) + 1, mapping: mapping)
        let anchor = GridAnchor(instantLocal: local.instantLocal, periodMicroseconds: local.periodMicroseconds)
        do {
            try source.start(alignedTo: anchor)
        } catch {
            logger.warning("preview camera cannot start", metadata: ["camera": "\(settings.camera)", "error": "\(error)"])
            return
        }
        defer { source.stop() }
        var centres = FrameCentres(grid: grid)
        // Kept stills' frames, re-estimated once the fit holds about a second of frames after them.
        let settleFrames = max(8, Int((1_000_000 / Double(sensorGrid.periodMicroseconds)).rounded(.up)))
        var framesSeen = 0
        var settling: [(group: Int64, estimate: PhaseController.Estimate, due: Int)] = []
        defer { for kept in settling { stills?.settle(camera: settings.camera, group: kept.group, center: nil) } }
        while !stopped.withLock({ $0 }) {
            let result = source.next(timeoutMicroseconds: sensorGrid.periodMicroseconds)
            if case .ended(let why) = result {
                logger.warning("preview camera ended", metadata: ["camera": "\(settings.camera)", "why": "\(why)"])
                return
            }
            guard case .frame(let capture) = result else {
                // A triggered camera that answers no pulse delivers nothing: its shot's stills are missing, not awaited.
                if let stills, let decisions = stills.triggers.idle(camera: settings.camera,
                                                                    rigNow: Int64(clock.current.rig(fromLocal: Double(localNow())).rounded())) {
                    carryOut(decisions, stills: stills, payload: nil)
                }
                continue
            }
            let estimate = phase.observe(sequence: capture.sequence, stampedCenterLocal: capture.stampedCenterLocal,
                                         durationMicroseconds: capture.durationMicroseconds)
            let mapping = clock.current
            let placed = centres.place(centerLocal: estimate.centerLocal, mapping: mapping)
            if source.canSteerPhase {
                source.requestNextFramePeriod(FrameCentres.steer(&phase, mapping: mapping, acquiring: true))
            }
            let offer = PreviewOffer(camera: settings.camera, ordinal: settings.ordinal, takeID: "",
                                     group: placed.group, centerMicroseconds: placed.center, dropped: 0,
                                     centerUncertainty: estimate.uncertaintyMicroseconds.isFinite ? estimate.uncertaintyMicroseconds : 0,
                                     phaseError: placed.phaseError)
            publisher.offer(offer, payload: capture.payload)
            framesSeen += 1
            // A triggered camera's frames are matched by their own stamps: a Snap's pulses come one per shot, too
            // sparse for a phase fit. Its still is its pulse's frame, centred on the pulse (no fit to settle).
            if let stills, let decisions = stills.triggers.frame(camera: settings.camera,
                                                                center: Int64(mapping.rig(fromLocal: capture.stampedCenterLocal).rounded()),
                                                                exposureMicroseconds: capture.exposureMicroseconds) {
                carryOut(decisions, stills: stills, payload: capture.payload)
            } else if stills?.offer(camera: settings.camera, group: Self.stillGroup(placed.group, every: settings.recordEvery),
                                    center: placed.center, payload: capture.payload) == true {
                settling.append((Self.stillGroup(placed.group, every: settings.recordEvery), estimate, framesSeen + settleFrames))
            }
            while let next = settling.first, framesSeen >= next.due {
                settling.removeFirst()
                let better = phase.center(of: next.estimate).map { Int64(mapping.rig(fromLocal: $0).rounded()) }
                stills?.settle(camera: settings.camera, group: next.group, center: better)
            }
            source.release(capture)
            if let end = endAfterGroup, placed.group >= end, settling.isEmpty { return }
        }
    }
}

extension PreviewCamera {
    /// A triggered camera's shot decisions: the pulse's frame kept (its centre final), groups with none missed.
    fileprivate func carryOut(_ decisions: [SnapPulses.Decision], stills: StillKeeper, payload: CapturePayload?) {
        for decision in decisions {
            switch decision {
            case .missed(let groups):
                stills.passed(camera: settings.camera, groups: groups)
            case .keep(let group, let center):
                if let payload, stills.offer(camera: settings.camera, group: group, center: center, payload: payload) {
                    stills.settle(camera: settings.camera, group: group, center: nil)
                }
            }
        }
    }
}
