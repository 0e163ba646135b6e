/// The node's take, in the manner of the coordinator's `TakeConductor`: a request (configure, arm, start, stop,
/// abort, adjust a camera, a clock update), a recorder's news (its devices opened, it finished, it ended on its
/// own) or the clock goes in; what to do comes out (open the devices, start the recorders at a group, stop them,
/// finalize the take's files, delete them, say an event, refuse). It touches no device, file or socket and reads
/// no clock, so every path is a unit test; `NodeAgent` only carries the directives out.
///
/// Cameras and microphones are both recorders here, known by name; each arm of a take is an `Arming`, so news
/// from the recorders of an earlier arm (an aborted take's camera finishing late) never touches the current one.
public struct NodeTake: Sendable {
    /// One arm of one take: the recorders it opened report under it.
    public struct Arming: Hashable, Sendable {
        public let takeID: String
        public let number: Int
        public init(takeID: String, number: Int) { self.takeID = takeID; self.number = number }
    }

    /// How a camera's recording changes mid-take (the coordinator's pressure policy).
    public enum Adjustment: Sendable, Equatable {
        /// One group in `every` from `from` on.
        case slow(every: Int, from: Int64)
        /// The camera's files end before group `from`.
        case disable(from: Int64)
        /// The request named no action this node knows.
        case unknown
    }

    public enum Request: Sendable {
        /// `now`: any monotonic clock, µs (the configure lease).
        case configure(takeID: String, cameras: [CameraSettings], now: Int64)
        case arm(takeID: String, grid: FrameGrid, clock: ClockMapping)
        /// `stopGroup` 0: until a StopAt. `localNow`: the node's clock, to check the start is still ahead.
        case start(takeID: String, startGroup: Int64, stopGroup: Int64, localNow: Int64)
        case stop(takeID: String, stopGroup: Int64)
        /// An abort naming another take than the node's is refused, and changes nothing.
        case abort(takeID: String, reason: String)
        case adjust(takeID: String, camera: String, Adjustment)
        case updateClock(takeID: String, ClockMapping)
    }

    public enum Event: Sendable {
        /// The arm's devices are open and streaming: these cameras and microphones record the take.
        case opened(Arming, cameras: [String], microphones: [String])
        /// The arm's devices could not be opened (a camera missing or busy, the staging directory not writable).
        case openFailed(Arming, NodeFailure)
        /// A recorder's files are final (at its stop group, or ended early).
        case recorderFinished(Arming, recorder: String)
        /// A recorder did something on its own the take's events keep (a camera unplugged or its files deleted,
        /// a write failed on a full disk, a microphone lost or left out). `localNow`: the node's clock.
        case recorderEvent(Arming, recorder: String, TakeEvent.Kind, String, localNow: Int64)
        /// The take's files are checksummed and indexed (`Directive.finalize` carried out).
        case finalized(takeID: String)
        /// The node's pressure as judged now.
        case pressure(PressureReading, localNow: Int64)
        /// At start: a take a crashed predecessor was recording was repaired; it is this node's take again, finished.
        case recovered(takeID: String)
        /// Time passed. `localNow`: the node's clock.
        case tick(localNow: Int64)
        /// The node itself is going away (`cause`: "SIGTERM, its service shutting down"): a recording take stops a
        /// couple of groups ahead so its files end on a group it names, and the take's events say why. Once given,
        /// no new take is configured or armed.
        case stopping(cause: String, localNow: Int64)
        /// At start: a take this node's previous process ended when it was stopped (`stopping`) is its take again,
        /// finished, with that take's events (read back from the note the stop left).
        case resumedStopped(takeID: String, detail: String, events: [TakeEvent])
    }

    public enum Directive: Sendable, Equatable {
        /// Refuse the request with this failure (nothing changed).
        case refuse(NodeFailure)
        /// A take was configured for these cameras: remember their controls, open the microphones early and
        /// forget the previous take's recorders.
        case configured(takeID: String, cameras: [CameraSettings])
        /// Open the cameras and microphones of this arm, each writing into the take's directory, then report
        /// `opened` or `openFailed`.
        case openDevices(Arming, cameras: [CameraSettings], grid: FrameGrid, clock: ClockMapping)
        /// Keep the recorders just opened: the take is armed (the Armed reply goes out).
        case keepRecorders(Arming)
        /// Mark the take as being recorded on disk, so a restarted node repairs it.
        case markRecording(takeID: String, t0: Int64, periodMicroseconds: Int64, startGroup: Int64)
        case startRecorders(group: Int64, stop: Int64?)
        case stopRecorders(atGroup: Int64)
        case adjust(camera: String, Adjustment)
        /// The clock mapping the recorders use from their next frame.
        case updateClock(ClockMapping)
        /// Stop every recorder without finishing its groups and let go of the early microphones.
        case abandonRecorders
        /// Nothing was recorded: the take's directory goes.
        case deleteTake(takeID: String)
        /// Every recorder has finished: checksum the take's files once, index them, clear the mark, then report
        /// `finalized`.
        case finalize(takeID: String)
        /// Something the node did that the take's events keep (already added to `events`); also logged.
        case say(TakeEvent)
        /// A line for the node's log only.
        case log(Severity, String)
        /// The request is accepted but changes nothing; the ack says why.
        case ignored(String)
    }

    public enum Severity: Sendable, Equatable { case notice, warning, error }

    public let node: String
    /// The node's cameras, as the configure is checked against them.
    public let cameras: [CameraCapabilities]
    public private(set) var machine = NodeTakeMachine()
    /// The configured take's cameras.
    public private(set) var settings: [CameraSettings] = []
    /// The take's grid and clock once its devices are open (armed or recording).
    public private(set) var grid: FrameGrid?
    public private(set) var clock: ClockMapping?
    /// The group the take stops before, from StartAt and any later StopAt (0: none).
    public private(set) var stopGroup: Int64 = 0
    /// Why the node's last take failed or went (status says it until the next take).
    public private(set) var detail = ""
    /// What the node did on its own during the current take, oldest first.
    public private(set) var events: [TakeEvent] = []
    public private(set) var pressure = PressureReading.nominal
    /// Takes recorded to the end since the node started (the metrics).
    public private(set) var takesRecorded: UInt64 = 0
    /// The current arm and its recorders (nil before the devices are open).
    public private(set) var arming: Arming?
    private var armings = 0
    public private(set) var recordingCameras: [String] = []
    private var recorders: Set<String>?
    /// The grid and clock the current arm opens its devices with, in force once they are open.
    private var opening: (grid: FrameGrid, clock: ClockMapping)?
    private var finished: Set<String> = []
    /// The finalize was given for the current arm: it is given once, however many recorders finish together.
    private var finalizing = false
    private var pressureShutdown = false
    /// Why the node is going away, once `stopping` was given.
    public private(set) var stoppingCause: String?

    /// How long past its start instant an armed take that never started is dropped.
    public static let armedWithoutStartMicroseconds: Int64 = 5_000_000

    public init(node: String, cameras: [CameraCapabilities]) {
        self.node = node
        self.cameras = cameras
    }

    public var state: NodeTakeMachine.State { machine.state }
    public var takeID: String? { machine.takeID }
    /// A take holds the node's cameras (configured, armed or recording).
    public var holdsCameras: Bool { [.configured, .armed, .recording].contains(machine.state) }
    /// Armed or recording: the take's files are not final.
    public var isActive: Bool { machine.state == .armed || machine.state == .recording }

    /// The rig's time now by the take's clock mapping, when the take has one.
    public func rigNow(localNow: Int64) -> Double? { clock?.rig(fromLocal: Double(localNow)) }

    /// Refused when `takeID`'s files are not final yet (its take armed or recording here).
    public func collectable(_ takeID: String) -> NodeFailure? {
        guard machine.takeID == takeID, isActive else { return nil }
        return NodeFailure(.badState, "take \(takeID) is still \(machine.state.rawValue) on node \(node); its files are not final.")
    }

    // MARK: Requests

    public mutating func handle(_ request: Request) -> [Directive] {
        do throws(NodeFailure) {
            switch request {
            case .configure(let takeID, let requested, let now): return try configure(takeID, requested, now: now)
            case .arm(let takeID, let grid, let clock): return try arm(takeID, grid: grid, clock: clock)
            case .start(let takeID, let start, let stop, let localNow): return try self.start(takeID, start, stop, localNow: localNow)
            case .stop(let takeID, let group):
                try machine.stop(takeID: takeID)
                stopGroup = stopGroup == 0 ? group : min(stopGroup, group)
                return [.stopRecorders(atGroup: group)]
            case .abort(let takeID, let reason): return try abort(takeID, reason: reason)
            case .adjust(let takeID, let camera, let adjustment): return try adjust(takeID, camera, adjustment)
            case .updateClock(let takeID, let mapping):
                // Armed with its devices still opening: no clock in force yet.
                guard machine.takeID == takeID, clock != nil || !isActive else {
                    throw NodeFailure(.notFound, "node \(node) has no take \(takeID) to update the clock of.")
                }
                // Finished (recovered, or ended by this node's previous process's stop): no clock to update any more.
                guard isActive else { return [.ignored("take \(takeID) is \(machine.state.rawValue); clock update ignored")] }
                clock = mapping
                return [.updateClock(mapping)]
            }
        } catch {
            return [.refuse(error)]
        }
    }

    private mutating func configure(_ takeID: String, _ requested: [CameraSettings], now: Int64) throws(NodeFailure) -> [Directive] {
        guard RigName.isValid(takeID) else { throw NodeFailure(.badConfig, "take id \"\(takeID)\" is not a valid name.") }
        guard !requested.isEmpty else { throw NodeFailure(.badConfig, "take \(takeID) configures no cameras.") }
        for s in requested {
            if let problem = s.problem(on: node, with: cameras.first { $0.name == s.camera }) { throw NodeFailure(.badConfig, problem) }
        }
        if Set(requested.map(\.camera)).count != requested.count {
            throw NodeFailure(.badConfig, "take \(takeID) configures a camera of node \(node) twice.")
        }
        if let stoppingCause { throw NodeFailure(.badState, "node \(node) is stopping (\(stoppingCause)); it takes no new take.") }
        try machine.configure(takeID: takeID, at: now)
        settings = requested
        forgetRecorders()
        detail = ""
        events = []
        pressureShutdown = false
        return [.configured(takeID: takeID, cameras: requested)]
    }

    private mutating func arm(_ takeID: String, grid: FrameGrid, clock: ClockMapping) throws(NodeFailure) -> [Directive] {
        if pressure.level == .shutdown {
            throw NodeFailure(.io, "node \(node) cannot record take \(takeID): \(pressure.cause).")
        }
        if let stoppingCause { throw NodeFailure(.badState, "node \(node) is stopping (\(stoppingCause)); it arms no take.") }
        try machine.arm(takeID: takeID)
        // The previous arm's grid goes now: until this arm's devices run, no grid is in force (a tick would
        // otherwise judge this take by the old one's start instant and drop it).
        forgetRecorders()
        armings += 1
        let arming = Arming(takeID: takeID, number: armings)
        self.arming = arming
        opening = (grid, clock)
        return [.openDevices(arming, cameras: settings, grid: grid, clock: clock)]
    }

    /// The take's files are collected: a finished take lets the node go back to idle (status says idle, no take).
    public mutating func collected(_ takeID: String) {
        guard machine.takeID == takeID, machine.state == .finished else { return }
        machine.collected(takeID: takeID)
        forgetRecorders()
    }

    private mutating func forgetRecorders() {
        arming = nil
        opening = nil
        grid = nil
        clock = nil
        recorders = nil
        recordingCameras = []
        finished = []
        finalizing = false
    }

    private mutating func start(_ takeID: String, _ startGroup: Int64, _ stop: Int64, localNow: Int64) throws(NodeFailure) -> [Directive] {
        guard stop == 0 || stop > startGroup else {
            throw NodeFailure(.badConfig, "stop group \(stop) must follow start group \(startGroup).")
        }
        if machine.state == .armed, machine.takeID == takeID, let grid, let rigNow = rigNow(localNow: localNow) {
            // The first group must still be ahead by a frame, or its frame may already have been passed over.
            let begins = grid.instant(ofGroup: startGroup)
            if Double(begins) < rigNow + Double(grid.periodMicroseconds) {
                throw NodeFailure(.badState, "start group \(startGroup) of take \(takeID) begins \(Int((Double(begins) - rigNow) / 1000)) ms from now on node \(node), less than one frame period ahead.")
            }
        }
        try machine.start(takeID: takeID)
        stopGroup = stop
        var directives: [Directive] = []
        if let grid {
            directives.append(.markRecording(takeID: takeID, t0: grid.t0, periodMicroseconds: grid.periodMicroseconds, startGroup: startGroup))
        }
        directives.append(.startRecorders(group: startGroup, stop: stop == 0 ? nil : stop))
        // Every recorder ended while armed (cameras unplugged): none is left to say the files are final.
        return directives + finalizeIfDone()
    }

    private mutating func abort(_ takeID: String, reason: String) throws(NodeFailure) -> [Directive] {
        // Only a take that never started recording leaves nothing worth keeping; a recording, finished (not yet
        // collected) or failed take keeps its files for `coord collect`.
        let wasRecording = ![.configured, .armed].contains(machine.state)
        try machine.abort(takeID: takeID)
        // Status says so until the next take: a coordinator whose take this was learns why it is gone.
        detail = "take \(takeID) was aborted (\(Echo.short(reason.isEmpty ? "no reason given" : reason)))"
        forgetRecorders()
        return [.abandonRecorders] + (wasRecording ? [] : [.deleteTake(takeID: takeID)])
    }

    private func adjust(_ takeID: String, _ camera: String, _ adjustment: Adjustment) throws(NodeFailure) -> [Directive] {
        guard machine.takeID == takeID, isActive else {
            throw NodeFailure(.badState, "node \(node) is not recording take \(takeID).")
        }
        guard recordingCameras.contains(camera), let fps = settings.first(where: { $0.camera == camera })?.fps else {
            throw NodeFailure(.notFound, "node \(node) records no camera \(camera) in take \(takeID).")
        }
        switch adjustment {
        case .slow(let every, _):
            guard every >= 1, every <= fps else {
                throw NodeFailure(.badConfig, "camera \(node)/\(camera): record_every \(every) must be between 1 and \(fps).")
            }
        case .disable:
            break
        case .unknown:
            throw NodeFailure(.badConfig, "adjusting camera \(camera): the action is missing or unknown.")
        }
        return [.adjust(camera: camera, adjustment)]
    }

    // MARK: Recorder news and time

    public mutating func handle(_ event: Event) -> [Directive] {
        switch event {
        case .opened(let arming, let cameras, let microphones):
            guard arming == self.arming, machine.takeID == arming.takeID, machine.state == .armed, let opening else {
                return [.refuse(abortedWhileOpening(arming.takeID))]
            }
            grid = opening.grid
            clock = opening.clock
            recorders = Set(cameras + microphones)
            recordingCameras = cameras
            return [.keepRecorders(arming), .markRecording(takeID: arming.takeID, t0: opening.grid.t0,
                                                           periodMicroseconds: opening.grid.periodMicroseconds, startGroup: 0)]
        case .openFailed(let arming, let failure):
            guard arming == self.arming, machine.takeID == arming.takeID, machine.state == .armed else {
                return [.refuse(abortedWhileOpening(arming.takeID))]
            }
            machine.fail()
            detail = failure.message
            return [.refuse(failure)]
        case .recorderFinished(let arming, let recorder):
            guard arming == self.arming else { return [] }
            finished.insert(recorder)
            return finalizeIfDone()
        case .recorderEvent(let arming, let recorder, let kind, let sentence, let localNow):
            guard arming == self.arming else { return [] }
            return [add(kind, camera: recorder, sentence, localNow: localNow)]
        case .finalized(let takeID):
            guard machine.state == .recording, machine.takeID == takeID else { return [] }
            machine.finish()
            takesRecorded += 1
            return []
        case .pressure(let reading, let localNow):
            return pressureChanged(to: reading, localNow: localNow)
        case .recovered(let takeID):
            machine.recovered(takeID: takeID)
            detail = "take \(takeID) was recovered after this node stopped mid-take; its files end where the recording did"
            return []
        case .stopping(let cause, let localNow):
            return stopping(cause: cause, localNow: localNow)
        case .resumedStopped(let takeID, let detail, let events):
            // Over a repair of the same take (its files were not final when the process ended) or an idle node.
            guard machine.state == .idle || machine.takeID == takeID else { return [] }
            machine.recovered(takeID: takeID)
            self.detail = detail
            self.events = events
            return []
        case .tick(let localNow):
            // A take armed but never started (its coordinator vanished or could not reach this node) is dropped
            // once its start instant is well past, so the node is free again.
            guard machine.state == .armed, let takeID = machine.takeID, let grid, let rigNow = rigNow(localNow: localNow),
                  rigNow > Double(grid.t0 + Self.armedWithoutStartMicroseconds) else { return [] }
            return [.log(.warning, "take \(takeID) was armed but never started; its start instant passed 5 s ago, so it is dropped")]
                + handle(.abort(takeID: takeID, reason: "never started"))
        }
    }

    private func abortedWhileOpening(_ takeID: String) -> NodeFailure {
        NodeFailure(.badState, "take \(takeID) was aborted on node \(node) while its cameras were opening.")
    }

    /// The finalize, once, when the take is recording and every recorder of its arm has finished.
    private mutating func finalizeIfDone() -> [Directive] {
        guard machine.state == .recording, let takeID = machine.takeID, let recorders, !finalizing,
              recorders.isSubset(of: finished) else { return [] }
        finalizing = true
        return [.finalize(takeID: takeID)]
    }

    /// Records something the node did on its own; the coordinator copies it into the manifest.
    private mutating func add(_ kind: TakeEvent.Kind, camera: String, _ sentence: String, localNow: Int64) -> Directive {
        let at = rigNow(localNow: localNow).map { Int64($0.rounded()) } ?? localNow
        let event = TakeEvent(kind, at: at, node: node, camera: camera, sentence)
        events.append(event)
        return .say(event)
    }

    /// The node is going away: a recording take's cameras stop two groups ahead (or at the take's own stop, if that
    /// comes first), on a group the event names; an armed take records nothing. Said once.
    private mutating func stopping(cause: String, localNow: Int64) -> [Directive] {
        guard stoppingCause == nil else { return [] }
        stoppingCause = cause
        guard let takeID = machine.takeID else { return [] }
        switch machine.state {
        case .recording:
            guard let grid, let rigNow = rigNow(localNow: localNow) else { return [] }
            // Not the take's stop group (status would offer it to the coordinator as a stop for the whole rig).
            var stop = grid.nearestGroup(to: Int64(rigNow)) + 2
            if stopGroup > 0 { stop = min(stop, stopGroup) }
            let sentence = "node \(node) was stopped (\(cause)): its cameras end take \(takeID) after group \(stop - 1), and the take's later groups are not recorded on this node"
            detail = sentence
            return [.stopRecorders(atGroup: stop), .log(.warning, sentence), add(.nodeStopped, camera: "", sentence, localNow: localNow)]
        case .armed:
            let sentence = "node \(node) was stopped (\(cause)) while take \(takeID) was armed: it records nothing of it"
            detail = sentence
            return [.log(.warning, sentence), add(.nodeStopped, camera: "", sentence, localNow: localNow)]
        default:
            return []
        }
    }

    /// A change of level is said (an event while a take is active); at shutdown level every recorder stops a few
    /// groups ahead, so the files are finalized while the disk still has room.
    private mutating func pressureChanged(to reading: PressureReading, localNow: Int64) -> [Directive] {
        let previous = pressure
        pressure = reading
        var directives: [Directive] = []
        if reading.level != previous.level {
            directives.append(.log(.notice, "pressure \(reading.level.name) (\(reading.cause))"))
            if isActive { directives.append(add(.pressure, camera: "", "\(reading.level.name): \(reading.cause)", localNow: localNow)) }
        }
        guard reading.level == .shutdown, machine.state == .recording, !pressureShutdown, let grid,
              let rigNow = rigNow(localNow: localNow) else { return directives }
        pressureShutdown = true
        let stop = grid.nearestGroup(to: Int64(rigNow)) + 2
        let sentence = "node \(node) stopped its cameras after group \(stop - 1) with their files finalized: \(reading.cause)"
        return directives + [.stopRecorders(atGroup: stop), .log(.error, sentence), add(.pressureShutdown, camera: "", sentence, localNow: localNow)]
    }
}
