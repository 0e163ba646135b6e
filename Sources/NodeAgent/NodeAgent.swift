import CoordCore
import CoordWire
import Foundation
import Logging
import Media
import Platform
import Synchronization
import ZeroMQ

/// How a node agent is set up (from flags or its config file).
/// A microphone of the node: a synthetic one (SYNCCLICK v1, its sample clock off by `rateErrorPPM`) or an ALSA
/// capture device (`hw:1,0`, `default`, a plugin name).
public struct MicrophoneEntry: Sendable, Equatable {
    public enum Device: Sendable, Equatable {
        case synthetic(rateErrorPPM: Double)
        case alsa(String)
    }
    public var name: String
    public var device: Device
    /// A synthetic microphone that goes away this long after it starts (tests of a lost microphone).
    public var endsAfterMicroseconds: Int64?
    public init(name: String, device: Device, endsAfterMicroseconds: Int64? = nil) {
        self.name = name; self.device = device; self.endsAfterMicroseconds = endsAfterMicroseconds
    }
}

public struct NodeConfiguration: Sendable {
    public var name: String
    public var endpoint: String
    public var staging: URL
    public var syntheticCameras: [String]
    /// Simulated local clock (demo only): offset and drift from the host's CLOCK_MONOTONIC.
    public var clockOffsetMicroseconds: Int64 = 0
    public var clockDriftPPM: Double = 0
    /// The host instant (CLOCK_MONOTONIC µs) at which the simulated offset holds exactly; nil means at start.
    public var clockReferenceMicroseconds: Int64?
    /// Standard deviation of synthetic buffer-timestamp noise.
    public var timestampJitterMicroseconds: Double = 30
    /// How long each synthetic camera takes to open when the take is armed, as a real USB camera can (ms).
    public var syntheticOpenMilliseconds: Int = 0
    /// Sensor-like noise amplitude every synthetic frame gets outside its stripe (0…64; 0: the clean pattern).
    public var syntheticGrain = 0
    /// Rate error of each synthetic sensor is drawn from ±this.
    public var sensorRateErrorPPM: Double = 20
    public var seed: UInt64 = 1
    /// Exit when this process (the demo's coordinator) is gone.
    public var parentPID: Int32?
    /// Keep files after the coordinator confirmed them (default: delete them to free the disk).
    public var keepAfterCollect = false
    /// Every sysfs and procfs path (thermal zones, CPUs, USB buses, load) is read under this root, so tests
    /// can feed a fake tree; "/" on a real node.
    public var systemRoot = URL(fileURLWithPath: "/")
    /// Where `coord-node calibrate` stored this node's measured capacities; nil: `<staging>/calibration.json`.
    public var calibrationPath: URL?
    /// The buses synthetic cameras declare (`--synthetic-bus`), and which bus each synthetic camera sits on
    /// (`--synthetic NAME@BUS`); a camera not listed sits on no shared bus.
    public var syntheticBuses: [Bus] = []
    public var syntheticCameraBus: [String: String] = [:]
    /// Where preview tiles are published (a ZeroMQ PUB endpoint); nil: beside the control endpoint on a free
    /// port; empty: no preview.
    public var previewEndpoint: String?
    /// V4L2 cameras (`--v4l2 NAME=/dev/videoN`), in flag order.
    public var v4l2Cameras: [V4L2CameraEntry] = []
    /// How V4L2 devices are reached: libv4l2, or a scripted driver (`--v4l2-script`, tests only).
    public var v4l2: V4L2Access = .system
    /// CURVE keys: every socket serves only authorized coordinators (nil: no encryption, loopback only).
    public var security: NodeSecurity?
    /// Serve a network address without keys anyway (`--insecure`).
    public var insecure = false
    /// UDP port `coord discover`'s queries are answered on (0: not at all); only for an endpoint others can reach.
    public var discoveryPort: UInt16 = 5710
    /// Microphones recorded with every take (CONTRACT §9): `--synthetic-mic NAME` and `--audio NAME=DEVICE`.
    public var microphones: [MicrophoneEntry] = []

    /// The preview endpoint to bind: the one given, or the control endpoint's host on a free port (an ipc path
    /// gets `.preview` appended); nil: none.
    public var previewBindEndpoint: String? {
        if let previewEndpoint { return previewEndpoint.isEmpty ? nil : previewEndpoint }
        if endpoint.hasPrefix("ipc://") { return endpoint + ".preview" }
        guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":"), colon > endpoint.index(endpoint.startIndex, offsetBy: 5) else { return nil }
        return endpoint[..<colon] + ":*"
    }

    /// Every microphone's name.
    public var micNames: [String] { microphones.map(\.name) }

    /// Every camera's name: the synthetic ones, then the V4L2 ones.
    public var cameraNames: [String] { syntheticCameras + v4l2Cameras.map(\.name) }

    /// The calibration file this node reads.
    public var calibrationFile: URL { calibrationPath ?? staging.appendingPathComponent("calibration.json") }

    public init(name: String, endpoint: String, staging: URL, syntheticCameras: [String]) {
        self.name = name
        self.endpoint = endpoint
        self.staging = staging
        self.syntheticCameras = syntheticCameras
    }

    /// One sentence naming what is wrong with this configuration, or nil.
    public func problem() -> String? {
        if let p = RigName.problem(with: name, kind: "node") { return p }
        let names = cameraNames
        for camera in names { if let p = RigName.problem(with: camera, kind: "camera") { return p } }
        if Set(names).count != names.count { return "camera names must be unique on node \(name)." }
        for mic in micNames { if let p = RigName.problem(with: mic, kind: "microphone") { return p } }
        if Set(micNames).count != micNames.count { return "microphone names must be unique on node \(name)." }
        if let clash = micNames.first(where: names.contains) {
            return "node \(name) has a camera and a microphone both named \(clash); every file of a node needs its own name."
        }
        if names.isEmpty { return "node \(name) has no cameras: give --synthetic NAME[,NAME…] or --v4l2 NAME=/dev/videoN." }
        if security == nil && !insecure {
            // An empty endpoint binds nothing (calibration, the fuzzer's agent): nothing to refuse.
            for endpoint in [endpoint] + [previewBindEndpoint].compactMap({ $0 }) where !endpoint.isEmpty && !Self.isLoopback(endpoint) {
                return "node \(name) would serve \(endpoint), which other machines can reach, without keys: give --cert NAME.key_secret "
                    + "and --authorized DIR (see the README's \"Keys\"), or --insecure to serve anyone who can reach it."
            }
        }
        return nil
    }

    /// Whether only this machine can reach `endpoint` (ipc, inproc, or TCP on a loopback address).
    public static func isLoopback(_ endpoint: String) -> Bool {
        if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") { return true }
        guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":") else { return false }
        let host = endpoint[endpoint.index(endpoint.startIndex, offsetBy: 6)..<colon].lowercased()
        if host == "localhost" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}

/// The node agent's request handling: one request in, one reply out, on the socket's thread. Recording runs
/// on the recorders' own threads.
// @unchecked: take state is under `lock` (scoped); the pressure monitor lives on `pressureQueue`.
public final class NodeAgent: @unchecked Sendable {
    public static let version = CoordVersion.current
    /// This process among all coord-node processes: a coordinator tells two spellings of one endpoint by it.
    let instanceID = (0..<4).map { _ in String(UInt32.random(in: 0...UInt32.max), radix: 16) }.joined(separator: "-")

    let configuration: NodeConfiguration
    let logger: Logger
    private let store: FileStore
    private let simulatedClock: SimulatedClock
    private let cameras: [CameraCapabilities]
    /// What each V4L2 camera's controls accept (read once at start), so controls are checked while it is closed.
    private let v4l2ControlRanges: [String: ControlRanges]
    /// The buses the node's cameras share: declared for synthetic cameras, read from sysfs for V4L2 ones.
    private let buses: [Bus]

    private let lock = NSLock()
    private var machine = NodeTakeMachine()
    private var settings: [CameraSettings] = []
    private var recorders: [CameraRecorder] = []
    /// The take's microphones (CONTRACT §9), recorded beside the cameras; one that fails never fails the take.
    private var mics: [MicrophoneRecorder] = []
    /// Microphones opened at configure, so their timing has settled and their clock fit has seconds of stamps by
    /// group 0 (ALSA's pulse plugin reports a bogus half-second delay for its first second); taken by arm.
    private var warmMics: [String: AudioSource] = [:]
    /// Takes whose files are being checksummed on `indexQueue`.
    private var indexing: Set<String> = []
    /// Life totals for the metrics: takes recorded to the end, bytes of take files served to collection.
    private var takesRecorded: UInt64 = 0
    /// The take whose last recorder has finished and is being indexed: two recorders finishing at once must not
    /// both finish it (the takes counter counted a two-camera take twice).
    private var finishing: String?
    private var bytesServed: UInt64 = 0
    /// When the last chunk was read (host µs); nil once its buffers were returned after a collection.
    private var lastChunkServed: Int64?
    /// Why a take's files could not be checksummed, said once to the next list request (which then tries again).
    private var indexFailures: [String: String] = [:]
    private let indexQueue = DispatchQueue(label: "coord-node.index")
    private var failureDetail = ""
    private var armedGrid: (grid: FrameGrid, clock: ClockMappingBox)?
    /// The group the take stops before, from StartAt and any later StopAt (0: none).
    private var stopGroup: Int64 = 0
    private let probe: HostProbe
    private let monitor: PressureMonitor
    private var lastPressureSample: Int64 = 0
    /// The monitor's last judgement and resources, copied under `lock` (the monitor itself lives on `pressureQueue`).
    private var pressure = PressureReading.nominal
    private var pressureResources = NodeResources()
    /// What the node did on its own during the current take (pressure changes, a shutdown), oldest first.
    private var nodeEvents: [TakeEvent] = []
    private var pressureShutdown = false
    private let pressureQueue = DispatchQueue(label: "coord-node.pressure")
    /// The preview branch (nil: this node publishes none) and the cameras open for preview only while idle.
    let preview: PreviewPublisher?
    private let previewContext = ZMQContext()
    private let badInputLog = Mutex(RepeatLimiter())
    /// Who may connect (nil: no keys) and the preview context's ZAP handler.
    let gatekeeper: Gatekeeper?
    private var previewZAP: ZAPHandler?
    /// The operator's controls per camera (what each camera opens with), and the cameras open now that take them.
    private var controls: [String: CameraControls] = [:]
    private var openCameras: [String: WeakControllable] = [:]
    /// Only read and written under `lock`; the camera itself takes `apply` from any thread.
    private struct WeakControllable {
        weak var camera: (any ControllableCamera)?
        init(_ camera: any ControllableCamera) { self.camera = camera }
    }
    private var previewRun: (cameras: [PreviewCamera], key: PreviewKey, clock: ClockMappingBox, leaseUntil: Int64)?
    private struct PreviewKey: Equatable {
        var settings: [CameraSettings]
        var t0: Int64
        var period: Int64
    }

    /// Builds the agent; every V4L2 camera's device is opened once to read what it offers. Throws one sentence
    /// naming the camera and its device when one is missing, busy, not a capture node or offers nothing coord can
    /// record (the node must not start without a camera it was told to record).
    public init(configuration: NodeConfiguration, logger: Logger) throws(NodeFailure) {
        self.configuration = configuration
        self.logger = logger
        store = FileStore(root: configuration.staging)
        probe = HostProbe(root: configuration.systemRoot)
        monitor = PressureMonitor(probe: probe, staging: configuration.staging)
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
                codecs: VideoCodec.allCases.map(\.rawValue), bus: configuration.syntheticCameraBus[name] ?? "")
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
            v4l2.append(CameraCapabilities(name: entry.name, source: "v4l2", device: entry.device, formats: found.handshakeFormats,
                                           codecs: VideoCodec.allCases.map(\.rawValue), bus: bus?.id ?? ""))
            logger.info("camera found", metadata: ["camera": "\(entry.name)", "device": "\(entry.device)",
                                                   "card": "\(found.capabilities.card)", "bus": "\(found.busInfo)"])
        }
        cameras = synthetic + v4l2
        v4l2ControlRanges = ranges
        self.buses = buses
        gatekeeper = configuration.security.map { Gatekeeper(security: $0, logger: logger) }
        if let endpoint = configuration.previewBindEndpoint {
            do {
                // The preview is guarded like the control socket: its handler is bound before the PUB socket.
                previewZAP = try gatekeeper?.guardContext(previewContext)
                var revocations: (@Sendable () -> Int)?
                if let keeper = gatekeeper { revocations = { keeper.revocationCount } }
                preview = try PreviewPublisher(node: configuration.name, endpoint: endpoint, context: previewContext,
                                               curve: gatekeeper?.serverCurve, logger: logger, revocations: revocations)
            } catch {
                // The preview is a convenience: a node records without it rather than not at all.
                logger.warning("no preview: \(error)")
                preview = nil
            }
        } else {
            preview = nil
        }
        recoverInterruptedTakes()
    }

    /// Repairs every take a killed predecessor was recording (before this node serves anyone, so nothing lists or
    /// fetches a file half-repaired): each .mkv is finalized with every whole frame, and its frames.csv made to
    /// match the frames really there, rows lost with the crash rebuilt and flagged `recovered`.
    private func recoverInterruptedTakes() {
        for (takeID, marker) in store.interruptedTakes() {
            let directory = store.takeDirectory(takeID).appendingPathComponent(configuration.name, isDirectory: true)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            for name in names.sorted() where name.hasSuffix(".mkv") {
                let camera = String(name.dropLast(4))
                let mkv = directory.appendingPathComponent(name)
                let csv = directory.appendingPathComponent("\(camera).frames.csv")
                do {
                    let outcome = try MatroskaRepair.repair(path: mkv.path)
                    let text = (try? String(contentsOf: csv, encoding: .utf8)) ?? ""
                    let rows = FramesTable.parseWholeRows(text)
                    let fixed = FramesTable.reconcile(rows, frames: outcome.frames, startGroup: marker.startGroup,
                                                      periodMicroseconds: marker.periodMicroseconds, t0: marker.t0)
                    let table = ([FramesTable.header] + fixed.map(FramesTable.line)).joined(separator: "\n") + "\n"
                    try Data(table.utf8).write(to: csv, options: .atomic)
                    let rebuilt = fixed.filter(\.isRecovered).count
                    logger.warning("recovered a take interrupted by a crash", metadata: [
                        "take": "\(takeID)", "camera": "\(camera)", "frames": "\(outcome.frames)", "rows_rebuilt": "\(rebuilt)",
                        "rows_dropped": "\(max(0, rows.count - outcome.frames))", "cut_frame_dropped": "\(outcome.droppedTail)"])
                } catch {
                    logger.error("take \(takeID): camera \(camera) could not be repaired after the crash: \(error)")
                }
            }
            store.clearRecordingMark(takeID)
            // The newest such take is this node's take again, finished: its coordinator, still polling, collects it.
            machine.recovered(takeID: takeID)
            failureDetail = "take \(takeID) was recovered after this node stopped mid-take; its files end where the recording did"
        }
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

    /// Where a request is served: on the socket thread, or on a lane of its own.
    public enum Lane: Sendable {
        /// Opening cameras and probing the host (Arm, Hello): up to seconds.
        case control
        /// Listing and deleting take files (ListFiles, ConfirmCollected, and FetchChunk asked for inline bytes).
        case files
    }

    /// A reply and, for a chunk asked for as a raw frame, its bytes to send after it without a copy.
    public struct Reply: Sendable {
        public var envelope: Envelope
        public var rawFrame: OwnedBytes?
    }

    /// What the socket thread does with one request.
    public enum Handling: Sendable {
        /// The reply, made at once: clock probes, status and acks take microseconds.
        case reply(Envelope)
        /// Work that may take long, done on its lane; the socket thread sends its reply when it is ready, so clock
        /// probes are stamped and answered meanwhile.
        case deferred(Lane, @Sendable () -> Envelope)
        /// A chunk read: served several at a time off the socket thread, its bytes sent as a raw frame.
        case chunk(@Sendable () -> Reply)
    }

    /// Checks one request and says how it is served. `receivedLocal` is the local time the bytes came off the
    /// socket.
    public func receive(_ bytes: [UInt8], receivedLocal: Int64) -> Handling {
        let envelope: Envelope
        do {
            envelope = try Wire.parse(bytes)
        } catch {
            logBadInput("rejected a message", error)
            return .reply(Wire.error(0, error))
        }
        do {
            try Wire.checkVersion(envelope)
            try Wire.checkNames(envelope)
            try Wire.checkFields(envelope)
        } catch {
            logBadInput("request refused", error)
            return .reply(Wire.error(envelope.requestID, error))
        }
        switch envelope.body {
        case .hello, .arm, .startPreview, .setControls:
            return .deferred(.control) { [self] in respond(to: envelope, receivedLocal: receivedLocal) }
        case .fetchChunk(let fetch) where fetch.rawFrame:
            return .chunk { [self] in chunkReply(envelope.requestID, fetch) }
        case .listFiles, .fetchChunk, .confirmCollected:
            return .deferred(.files) { [self] in respond(to: envelope, receivedLocal: receivedLocal) }
        default:
            return .reply(respond(to: envelope, receivedLocal: receivedLocal))
        }
    }

    /// Bad input is logged once a minute per kind of fault, with how many like it were not logged: a stream of
    /// garbage cannot fill the disk or the journal.
    private func logBadInput(_ what: String, _ failure: NodeFailure, request: String = "") {
        let admission = badInputLog.withLock { $0.admit("\(what) \(request) \(failure.code)", now: MonotonicClock.now()) }
        guard case .log(let heldBack) = admission else { return }
        var metadata: Logger.Metadata = ["reason": "\(failure.message)"]
        if heldBack > 0 { metadata["like_it_since_last_line"] = "\(heldBack)" }
        logger.warning("\(what)", metadata: metadata)
    }

    /// Handles one request to its reply on the calling thread, whatever its lane.
    public func handle(_ bytes: [UInt8], receivedLocal: Int64) -> Envelope {
        switch receive(bytes, receivedLocal: receivedLocal) {
        case .reply(let reply): return reply
        case .deferred(_, let work): return work()
        case .chunk(let work):
            // No socket here: the bytes go back inline.
            var reply = work()
            if let raw = reply.rawFrame, case .chunk(var chunk) = reply.envelope.body {
                chunk.data = Data(bytes: raw.base, count: raw.count)
                raw.free()
                reply.envelope.body = .chunk(chunk)
            }
            return reply.envelope
        }
    }

    /// A FetchChunk with `raw_frame`: the envelope says where, the bytes follow as their own frame.
    private func chunkReply(_ id: UInt64, _ fetch: Coord_V1_FetchChunk) -> Reply {
        do throws(NodeFailure) {
            guard fetch.length > 0, fetch.length <= Wire.maxChunkBytes else {
                throw NodeFailure(.badConfig, "chunk length \(fetch.length) must be between 1 and \(Wire.maxChunkBytes) bytes.")
            }
            try requireCollectable(fetch.takeID)
            let (bytes, eof) = try store.readOwned(takeID: fetch.takeID, path: fetch.path, offset: fetch.offset, length: Int(fetch.length))
            lock.holding {
                bytesServed += UInt64(bytes.count)
                lastChunkServed = MonotonicClock.now()
            }
            var r = Coord_V1_Chunk()
            r.path = fetch.path
            r.offset = fetch.offset
            r.eof = eof
            return Reply(envelope: Wire.envelope(id, .chunk(r)), rawFrame: bytes)
        } catch {
            logBadInput("request refused", error, request: "fetchChunk")
            return Reply(envelope: Wire.error(id, error), rawFrame: nil)
        }
    }

    private func respond(to envelope: Envelope, receivedLocal: Int64) -> Envelope {
        do {
            return try reply(to: envelope, receivedLocal: receivedLocal)
        } catch {
            // Limited like bad input (a peer can send a refused request in a loop), per kind of request, so a
            // refusal of one kind is never hidden behind a stream of another.
            let request = envelope.body.map { Mirror(reflecting: $0).children.first?.label ?? "request" } ?? "none"
            logBadInput("request refused", error, request: request)
            return Wire.error(envelope.requestID, error)
        }
    }

    private func reply(to envelope: Envelope, receivedLocal: Int64) throws(NodeFailure) -> Envelope {
        let id = envelope.requestID
        switch envelope.body {
        case .hello(let hello):
            logger.info("hello", metadata: ["coordinator": "\(hello.coordinator.prefix(64))"])
            var r = Coord_V1_HelloReply()
            r.node = configuration.name
            r.agentVersion = NodeAgent.version
            r.cameras = cameras.map(\.wire)
            r.host = ProcessInfo.processInfo.hostName
            r.instanceID = instanceID
            r.previewEndpoint = preview?.endpoint ?? ""
            r.mics = configuration.micNames
            r.timeService = TimeService.describe()
            r.resources = probe.resources(staging: configuration.staging, calibration: calibration(),
                                          buses: buses).wire
            return Wire.envelope(id, .helloReply(r))
        case .clockProbe(let probe):
            var r = Coord_V1_ClockProbeReply()
            r.t1Us = probe.t1Us
            r.t2Us = receivedLocal
            r.t3Us = localNow()
            return Wire.envelope(id, .clockProbeReply(r))
        case .configure(let configure):
            try self.configure(configure)
            return ack(id, "configured \(configure.cameras.count) camera(s)")
        case .arm(let arm):
            return Wire.envelope(id, .armed(try self.arm(arm)))
        case .adjustCamera(let adjust):
            return ack(id, try self.adjust(adjust))
        case .startPreview(let start):
            return ack(id, try self.startPreview(start))
        case .setControls(let set):
            return Wire.envelope(id, .controlsApplied(try self.setControls(set)))
        case .clockUpdate(let update):
            return ack(id, try self.updateClock(update))
        case .startAt(let start):
            try self.start(start)
            return ack(id, "recording")
        case .stopAt(let stop):
            try self.stop(stop)
            return ack(id, "stopping at group \(stop.stopGroup)")
        case .abort(let abort):
            try self.abort(abort)
            return ack(id, "aborted")
        case .statusRequest:
            return Wire.envelope(id, .status(status()))
        case .listFiles(let list):
            return Wire.envelope(id, .fileList(try files(list.takeID)))
        case .fetchChunk(let fetch):
            guard fetch.length > 0, fetch.length <= Wire.maxChunkBytes else {
                throw NodeFailure(.badConfig, "chunk length \(fetch.length) must be between 1 and \(Wire.maxChunkBytes) bytes.")
            }
            try requireCollectable(fetch.takeID)
            let (data, eof) = try store.read(takeID: fetch.takeID, path: fetch.path, offset: fetch.offset, length: Int(fetch.length))
            lock.holding { bytesServed += UInt64(data.count) }
            var r = Coord_V1_Chunk()
            r.path = fetch.path
            r.offset = fetch.offset
            r.data = data
            r.eof = eof
            return Wire.envelope(id, .chunk(r))
        case .confirmCollected(let confirm):
            try requireCollectable(confirm.takeID)
            let confirmed = confirm.files.map(TakeManifest.File.init(wire:))
            // The node's own --keep-after-collect wins; otherwise the rig's collect.after_confirm says.
            if configuration.keepAfterCollect || confirm.keep {
                logger.info("kept collected files", metadata: ["take": "\(confirm.takeID)", "files": "\(confirmed.count)"])
                return ack(id, "kept \(confirmed.count) file(s)")
            }
            let released = try store.release(takeID: confirm.takeID, confirmed: confirmed)
            logger.info("released collected files", metadata: ["take": "\(confirm.takeID)", "files": "\(released.count)"])
            return ack(id, "released \(released.count) file(s)")
        case .helloReply, .armed, .status, .clockProbeReply, .fileList, .chunk, .ack, .error, .previewFrame, .controlsApplied:
            throw NodeFailure(.unknownMessage, "a node does not accept replies as requests.")
        case .none:
            throw NodeFailure(.unknownMessage, "the message carries no request this node knows (protocol version \(Wire.protocolVersion)).")
        }
    }

    private func ack(_ id: UInt64, _ detail: String) -> Envelope {
        var a = Coord_V1_Ack()
        a.detail = detail
        return Wire.envelope(id, .ack(a))
    }

    private func configure(_ message: Coord_V1_Configure) throws(NodeFailure) {
        guard RigName.isValid(message.takeID) else { throw NodeFailure(.badConfig, "take id \"\(message.takeID)\" is not a valid name.") }
        guard !message.cameras.isEmpty else { throw NodeFailure(.badConfig, "take \(message.takeID) configures no cameras.") }
        let requested = message.cameras.map(CameraSettings.init(wire:))
        for s in requested {
            if let problem = s.problem(on: configuration.name, with: cameras.first { $0.name == s.camera }) {
                throw NodeFailure(.badConfig, problem)
            }
        }
        if Set(requested.map(\.camera)).count != requested.count {
            throw NodeFailure(.badConfig, "take \(message.takeID) configures a camera of node \(configuration.name) twice.")
        }
        try lock.holding { () throws(NodeFailure) in
            try machine.configure(takeID: message.takeID, at: MonotonicClock.now())
            settings = requested
            for s in requested where !s.controls.isEmpty { controls[s.camera] = (controls[s.camera] ?? CameraControls()).updated(with: s.controls) }
            recorders = []
            armedGrid = nil
            failureDetail = ""
            nodeEvents = []
            pressureShutdown = false
        }
        warmUpMicrophones()
        logger.info("configured", metadata: ["take": "\(message.takeID)", "cameras": "\(requested.map(\.camera))"])
    }

    private func arm(_ message: Coord_V1_Arm) throws(NodeFailure) -> Coord_V1_Armed {
        guard message.framePeriodUs > 0, message.hasClock else {
            throw NodeFailure(.badConfig, "arm for take \(message.takeID) needs a frame period and a clock mapping.")
        }
        // Group 0's timecode goes into every file's tags; refuse one we would write wrongly rather than drop it.
        let fps = Timecode.fps(framePeriodMicroseconds: Int64(clamping: message.framePeriodUs))
        if !message.timecode.isEmpty, Timecode(message.timecode, fps: fps) == nil {
            throw NodeFailure(.badConfig, "arm for take \(message.takeID) has the timecode \"\(message.timecode.prefix(64))\", which is not HH:MM:SS:FF at \(fps) fps.")
        }
        // The cameras open for the take: an idle preview lets go of them first.
        stopPreview()
        var metadata = ["coord_take": message.takeID, "coord_node": configuration.name]
        if !message.timecode.isEmpty { metadata["timecode"] = message.timecode }
        let takeID = message.takeID
        // The state changes under the lock; the cameras open and start outside it (up to seconds), so status and
        // clock probes are answered meanwhile. An abort that arrives while they open wins.
        let settings = try lock.holding { () throws(NodeFailure) in
            if pressure.level == .shutdown {
                throw NodeFailure(.io, "node \(configuration.name) cannot record take \(takeID): \(pressure.cause).")
            }
            try machine.arm(takeID: takeID)
            // The previous take's grid goes now: until this take's cameras run, no grid is in force (tick would
            // otherwise judge this take by the old one's start instant and drop it).
            armedGrid = nil
            recorders = []
            return self.settings
        }
        /// Ends an arm that failed: the take fails unless an abort already took the node elsewhere.
        func failed(_ failure: NodeFailure, _ made: [CameraRecorder]) -> NodeFailure {
            made.forEach { $0.abandonRecording() }
            let aborted = lock.holding {
                guard machine.takeID == takeID, machine.state == .armed else { return true }
                machine.fail()
                failureDetail = failure.message
                return false
            }
            return aborted ? abortedWhileOpening : failure
        }
        let abortedWhileOpening = NodeFailure(.badState, "take \(takeID) was aborted on node \(configuration.name) while its cameras were opening.")
        let grid = FrameGrid(t0: message.t0Us, periodMicroseconds: Int64(message.framePeriodUs))
        let mapping = ClockMappingBox(ClockMapping(wire: message.clock))
        let directory = store.takeDirectory(takeID).appendingPathComponent(configuration.name, isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw failed(NodeFailure(.io, "node \(configuration.name) cannot create its staging directory \(directory.path): \(reason(error))."), [])
        }
        var made: [CameraRecorder] = []
        for (index, s) in settings.enumerated() {
            do {
                let source = try cameraSource(for: s, index: index)
                let camera = s.camera
                let recorder = try CameraRecorder(
                    settings: s, node: configuration.name, directory: directory, source: source, grid: grid, clock: mapping,
                    metadata: metadata.merging(["coord_camera": s.camera]) { $1 },
                    localNow: { [weak self] in self?.localNow() ?? 0 }, logger: logger,
                    onFinish: { [weak self] in self?.cameraFinished() },
                    onEvent: { [weak self] kind, detail in self?.cameraEvent(camera: camera, kind: kind, detail: detail) },
                    preview: message.hasPreview && message.preview.width > 0 ? preview : nil, takeID: takeID)
                made.append(recorder)
            } catch {
                throw failed(error, made)
            }
        }
        if message.hasPreview, let preview {
            preview.configure(PreviewSettings(width: Int(message.preview.width), fps: Int(message.preview.fps)),
                              framePeriodMicroseconds: Int64(message.framePeriodUs))
        }
        made.forEach { $0.arm() }
        // Every source starts on its recorder's thread (a V4L2 camera waits there for its start instant, at most
        // a frame): the arm succeeds only once all of them stream.
        let startDeadline = DispatchTime.now() + .milliseconds(3000)
        if let failure = made.lazy.compactMap({ $0.waitUntilStarted(deadline: startDeadline) }).first {
            throw failed(NodeFailure(.io, failure.hasSuffix(".") ? failure : failure + "."), made)
        }
        let madeMics = armMicrophones(directory: directory, grid: grid, mapping: mapping, metadata: metadata)
        let kept = lock.holding {
            guard machine.takeID == takeID, machine.state == .armed else { return false }
            recorders = made
            mics = madeMics
            armedGrid = (grid, mapping)
            store.markRecording(takeID, .init(t0: grid.t0, periodMicroseconds: grid.periodMicroseconds, startGroup: 0))
            return true
        }
        guard kept else {
            made.forEach { $0.abandonRecording() }
            madeMics.forEach { $0.abandonRecording() }
            throw abortedWhileOpening
        }
        logger.info("armed", metadata: ["take": "\(takeID)", "t0_us": "\(message.t0Us)"])
        var armed = Coord_V1_Armed()
        armed.takeID = takeID
        armed.cameras = settings.map(\.camera)
        armed.warnings = made.compactMap(\.phaseWarning)
        let open = lock.holding { openCameras }
        armed.controls = settings.compactMap { s in
            guard let camera = open[s.camera]?.camera, let inForce = try? camera.apply(CameraControls()) else { return nil }
            var c = Coord_V1_ControlsApplied()
            c.camera = s.camera
            c.controls = inForce.wire
            return c
        }
        return armed
    }

    /// The source a configured camera records from: a synthetic sensor, or its V4L2 device opened and set up for
    /// the take's size, rate and codec. Throws one sentence naming the camera when the device cannot do it.
    private func cameraSource(for s: CameraSettings, index: Int) throws(NodeFailure) -> CameraSource {
        let source = try openSource(for: s, index: index)
        guard let controllable = source as? any ControllableCamera else { return source }
        let wanted = lock.holding {
            openCameras[s.camera] = WeakControllable(controllable)
            return controls[s.camera]
        }
        if let wanted, !wanted.isEmpty {
            do {
                _ = try controllable.apply(wanted)
            } catch {
                logger.warning("controls not applied", metadata: ["camera": "\(s.camera)", "why": "\(error)"])
            }
        }
        return source
    }

    private func openSource(for s: CameraSettings, index: Int) throws(NodeFailure) -> CameraSource {
        let clock = simulatedClock
        // A frame-rate cap runs the camera itself at fps / record_every (CameraRecorder locks it to every k-th group).
        let period = 1_000_000 / s.capturedFPS
        if let entry = configuration.v4l2Cameras.first(where: { $0.name == s.camera }) {
            guard let codec = VideoCodec(rawValue: s.codec) else {
                throw NodeFailure(.badConfig, "camera \(configuration.name)/\(s.camera): unknown codec \"\(s.codec)\".")
            }
            configuration.v4l2.setStripeOrdinal(UInt8(clamping: s.ordinal), camera: s.camera)
            do {
                let camera = try configuration.v4l2.open(camera: s.camera, path: entry.device, width: s.width, height: s.height,
                                                         periodMicroseconds: period, codec: codec) { host in clock.local(fromHost: host) }
                for note in camera.controlNotes {
                    logger.warning("control not locked", metadata: ["camera": "\(s.camera)", "note": "\(note)"])
                }
                logger.info("camera configured", metadata: [
                    "camera": "\(s.camera)", "device": "\(entry.device)", "format": "\(camera.choice.fourcc)",
                    "passthrough": "\(camera.choice.passthrough)", "exposure_us": "\(Int(camera.exposureMicroseconds))"])
                return camera
            } catch {
                throw NodeFailure(.io, "camera \(configuration.name)/\(s.camera): \(error).")
            }
        }
        if configuration.syntheticOpenMilliseconds > 0 { usleep(UInt32(configuration.syntheticOpenMilliseconds) * 1000) }
        var spec = SyntheticSensor.Spec(
            ordinal: UInt8(s.ordinal), width: s.width, height: s.height, periodMicroseconds: period,
            rateErrorPPM: sensorRateError(index), timestampJitterMicroseconds: configuration.timestampJitterMicroseconds,
            seed: configuration.seed &* 1_000_003 &+ UInt64(index))
        spec.grain = configuration.syntheticGrain
        return SyntheticSensor(spec: spec) { host in clock.local(fromHost: host) }
    }

    /// A camera's own event (it ended: unplugged); the coordinator copies it into the take's events.
    private func cameraEvent(camera: String, kind: TakeEvent.Kind, detail: String) {
        lock.holding { addNodeEvent(camera: camera, kind: kind, detail: detail) }
    }

    private func sensorRateError(_ index: Int) -> Double {
        var random = SeededRandom(seed: configuration.seed &+ 7919 &* UInt64(index + 1))
        return Double.random(in: -configuration.sensorRateErrorPPM...configuration.sensorRateErrorPPM, using: &random)
    }

    private func start(_ message: Coord_V1_StartAt) throws(NodeFailure) {
        if try startRecorders(message) {
            // Every camera ended while armed (unplugged): no recorder is left to say the files are final.
            cameraFinished()
        }
    }

    /// Starts every recorder; true when all of them had already ended.
    private func startRecorders(_ message: Coord_V1_StartAt) throws(NodeFailure) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard message.stopGroup == 0 || message.stopGroup > message.startGroup else {
            throw NodeFailure(.badConfig, "stop group \(message.stopGroup) must follow start group \(message.startGroup).")
        }
        if machine.state == .armed, machine.takeID == message.takeID, let armedGrid {
            // The first group must still be ahead by a frame, or its frame may already have been passed over.
            let now = armedGrid.clock.current.rig(fromLocal: Double(localNow()))
            let begins = armedGrid.grid.instant(ofGroup: message.startGroup)
            if Double(begins) < now + Double(armedGrid.grid.periodMicroseconds) {
                throw NodeFailure(.badState, "start group \(message.startGroup) of take \(message.takeID) begins \(Int((Double(begins) - now) / 1000)) ms from now on node \(configuration.name), less than one frame period ahead.")
            }
        }
        try machine.start(takeID: message.takeID)
        if let armedGrid {
            store.markRecording(message.takeID, .init(t0: armedGrid.grid.t0, periodMicroseconds: armedGrid.grid.periodMicroseconds,
                                                      startGroup: message.startGroup))
        }
        stopGroup = message.stopGroup
        for recorder in recorders {
            recorder.start(group: message.startGroup, stop: message.stopGroup == 0 ? nil : message.stopGroup)
        }
        for mic in mics { mic.start(group: message.startGroup, stop: message.stopGroup == 0 ? nil : message.stopGroup) }
        logger.info("recording", metadata: ["take": "\(message.takeID)", "start_group": "\(message.startGroup)",
                                            "stop_group": "\(message.stopGroup)"])
        return recorders.allSatisfy { $0.snapshot.finished }
    }

    /// A newer estimate of this node's clock for the take in progress; the cameras use it from their next frame.
    private func updateClock(_ message: Coord_V1_ClockUpdate) throws(NodeFailure) -> String {
        guard message.hasClock else { throw NodeFailure(.badConfig, "clock update for take \(message.takeID) carries no mapping.") }
        lock.lock()
        defer { lock.unlock() }
        guard machine.takeID == message.takeID, let armedGrid else {
            throw NodeFailure(.notFound, "node \(configuration.name) has no take \(message.takeID) to update the clock of.")
        }
        guard machine.state == .armed || machine.state == .recording else { return "take \(message.takeID) is \(machine.state.rawValue); clock update ignored" }
        armedGrid.clock.update(ClockMapping(wire: message.clock))
        return "clock updated"
    }

    /// The coordinator's pressure policy slows or disables one camera from a group on.
    private func adjust(_ message: Coord_V1_AdjustCamera) throws(NodeFailure) -> String {
        lock.lock()
        defer { lock.unlock() }
        guard machine.takeID == message.takeID, machine.state == .recording || machine.state == .armed else {
            throw NodeFailure(.badState, "node \(configuration.name) is not recording take \(message.takeID).")
        }
        guard let recorder = recorders.first(where: { $0.settings.camera == message.camera }) else {
            throw NodeFailure(.notFound, "node \(configuration.name) records no camera \(message.camera) in take \(message.takeID).")
        }
        switch message.action {
        case .slow:
            let every = Int(message.recordEvery)
            guard every >= 1, every <= recorder.settings.fps else {
                throw NodeFailure(.badConfig, "camera \(configuration.name)/\(message.camera): record_every \(every) must be between 1 and \(recorder.settings.fps).")
            }
            recorder.slow(recordEvery: every, from: message.fromGroup)
            logger.notice("camera slowed", metadata: ["camera": "\(message.camera)", "record_every": "\(every)",
                                                      "from_group": "\(message.fromGroup)", "reason": "\(message.reason)"])
            return "camera \(message.camera) records one group in \(every) from group \(message.fromGroup)"
        case .disable:
            recorder.disable(from: message.fromGroup)
            logger.notice("camera disabled", metadata: ["camera": "\(message.camera)", "from_group": "\(message.fromGroup)",
                                                        "reason": "\(message.reason)"])
            return "camera \(message.camera) ends before group \(message.fromGroup)"
        case .unspecified, .UNRECOGNIZED:
            throw NodeFailure(.badConfig, "adjusting camera \(message.camera): the action is missing or unknown.")
        }
    }

    private func stop(_ message: Coord_V1_StopAt) throws(NodeFailure) {
        lock.lock()
        defer { lock.unlock() }
        try machine.stop(takeID: message.takeID)
        recorders.forEach { $0.stop(at: message.stopGroup) }
        mics.forEach { $0.stop(at: message.stopGroup) }
        stopGroup = stopGroup == 0 ? message.stopGroup : min(stopGroup, message.stopGroup)
    }

    private func abort(_ message: Coord_V1_Abort) throws(NodeFailure) {
        let (wasRecording, toStop) = try lock.holding { () throws(NodeFailure) in
            // Only a take that never started recording leaves nothing worth keeping; a recording, finished (not
            // yet collected) or failed take keeps its files for `coord collect`.
            let wasRecording = ![.configured, .armed].contains(machine.state)
            try machine.abort(takeID: message.takeID)
            // Status says so until the next take: a coordinator whose take this was learns why it is gone.
            failureDetail = "take \(message.takeID) was aborted (\(Echo.short(message.reason.isEmpty ? "no reason given" : message.reason)))"
            defer { recorders = []; mics = []; armedGrid = nil }
            return (wasRecording, (recorders, mics))
        }
        toStop.0.forEach { $0.abandonRecording() }
        toStop.1.forEach { $0.abandonRecording() }
        coolMicrophones()
        logger.warning("take aborted", metadata: ["take": "\(message.takeID)", "reason": "\(message.reason)"])
        if !wasRecording {
            // Nothing was recorded: the empty files go. A take that had started keeps whatever it captured.
            try? FileManager.default.removeItem(at: store.takeDirectory(message.takeID))
        }
    }

    /// Called on a recorder's thread when its file is final; the last one checksums the take's files once and
    /// stores them in the take's index, so listing never hashes on the request thread.
    private func cameraFinished() {
        let takeID: String? = lock.holding {
            guard machine.state == .recording, let takeID = machine.takeID, finishing != takeID,
                  recorders.allSatisfy({ $0.snapshot.finished }),
                  mics.allSatisfy({ $0.snapshot.finished }) else { return nil }
            finishing = takeID
            return takeID
        }
        guard let takeID else { return }
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
        lock.holding {
            if machine.state == .recording, machine.takeID == takeID {
                machine.finish()
                takesRecorded += 1
            }
            finishing = nil
        }
        logger.info("take finished", metadata: ["take": "\(takeID)", "files": "\(files.count)"])
    }

    /// What `--metrics` exports now (CONTRACT §7).
    public func metricsSample() -> NodeMetricsSample {
        lock.holding {
            var sample = NodeMetricsSample(node: configuration.name)
            sample.recording = machine.state == .recording
            if let takeID = machine.takeID, machine.state == .recording || machine.state == .finished {
                sample.cameras = recorders.map { recorder in
                    let p = recorder.snapshot
                    return .init(camera: recorder.settings.camera, takeID: takeID, frames: UInt64(max(0, p.frames)),
                                 dups: UInt64(max(0, p.dropped)), drops: UInt64(max(0, p.sensorSkips)),
                                 bytesWritten: p.bytesWritten, phaseErrorMicroseconds: p.phaseError)
                }
            }
            sample.clockUncertaintyMicroseconds = armedGrid?.clock.current.uncertaintyMicroseconds
            sample.pressure = pressure.level
            sample.freeDiskBytes = pressureResources.freeDiskBytes
            sample.takesRecorded = takesRecorded
            sample.bytesServed = bytesServed
            return sample
        }
    }

    /// One line for the service manager (systemd's STATUS=): what the node is doing now.
    public var statusLine: String {
        lock.holding {
            let cameras = "\(configuration.cameraNames.count) camera(s)"
            guard machine.state != .idle, let take = machine.takeID else { return "idle, \(cameras)" }
            return "\(machine.state.rawValue) take \(take), \(cameras)"
        }
    }

    public func status() -> Coord_V1_Status {
        lock.lock()
        defer { lock.unlock() }
        var s = Coord_V1_Status()
        s.node = configuration.name
        s.takeID = machine.takeID ?? ""
        s.localNowUs = localNow()
        s.detail = failureDetail
        s.pressure = Coord_V1_PressureLevel(rawValue: pressure.level.rawValue) ?? .nominal
        s.pressureCause = pressure.cause
        s.events = nodeEvents.map(\.wire)
        s.resources = pressureResources.wire
        if let armedGrid, machine.state == .armed || machine.state == .recording {
            s.t0Us = armedGrid.grid.t0
            s.framePeriodUs = UInt64(armedGrid.grid.periodMicroseconds)
            s.rigNowUs = Int64(armedGrid.clock.current.rig(fromLocal: Double(localNow())).rounded())
            s.stopGroup = stopGroup
        }
        switch machine.state {
        case .idle: s.state = .idle
        case .configured: s.state = .configured
        case .armed: s.state = .armed
        case .recording: s.state = .recording
        case .finished: s.state = .finished
        case .failed: s.state = .failed
        }
        s.cameras = recorders.map { recorder in
            let p = recorder.snapshot
            var c = Coord_V1_CameraStatus()
            c.camera = recorder.settings.camera
            c.frames = UInt64(p.frames)
            c.dropped = UInt64(p.dropped)
            c.lastGroup = p.lastGroup
            c.finished = p.finished
            c.error = p.error ?? ""
            c.timestampNoiseUs = p.timestampNoise
            c.centerUncertaintyUs = p.centerUncertainty
            c.phaseRestarts = UInt32(clamping: p.phaseRestarts)
            c.held = UInt64(p.held)
            c.recordEvery = UInt32(clamping: p.recordEvery)
            c.disabled = p.disabled
            c.bytesWritten = p.bytesWritten
            return c
        }
        s.mics = mics.map { mic in
            let p = mic.snapshot
            var m = Coord_V1_MicStatus()
            m.mic = mic.mic
            m.frames = UInt64(p.frames)
            m.sampleRate = UInt32(mic.sampleRate)
            m.channels = 1
            m.startUs = p.startMicroseconds
            m.avOffsetP50Us = p.offsetP50
            m.avOffsetP99Us = p.offsetP99
            m.rateErrorPpm = p.rateErrorPPM
            m.finished = p.finished
            m.error = p.error ?? ""
            m.levelDbfs = p.levelDBFS
            m.bytesWritten = p.bytesWritten
            return m
        }
        return s
    }

    /// Opens every microphone for the take; one that cannot start is left out with an event (sound never fails
    /// a take on its own).
    private func armMicrophones(directory: URL, grid: FrameGrid, mapping: ClockMappingBox,
                                metadata: [String: String]) -> [MicrophoneRecorder] {
        var made: [MicrophoneRecorder] = []
        for (index, entry) in configuration.microphones.enumerated() {
            let mic = entry.name
            do throws(NodeFailure) {
                let source = lock.holding { warmMics.removeValue(forKey: mic) } ?? audioSource(entry, index: index)
                let recorder = try MicrophoneRecorder(
                    mic: mic, node: configuration.name, directory: directory, source: source,
                    grid: grid, clock: mapping, metadata: metadata.merging(["coord_mic": mic]) { $1 }, logger: logger,
                    onFinish: { [weak self] in self?.cameraFinished() },
                    onEvent: { [weak self] kind, detail in self?.cameraEvent(camera: mic, kind: kind, detail: detail) })
                try recorder.arm()
                made.append(recorder)
            } catch {
                logger.warning("microphone left out of the take", metadata: ["mic": "\(mic)", "why": "\(error.message)"])
                lock.holding { addNodeEvent(camera: mic, kind: .microphoneEnded, detail: error.message + " The take goes on without it.") }
            }
        }
        return made
    }

    /// Opens every microphone for the take just configured (a failure is said again, as an event, at arm).
    private func warmUpMicrophones() {
        let old = lock.holding { () -> [AudioSource] in
            defer { warmMics = [:] }
            return Array(warmMics.values)
        }
        old.forEach { $0.stop() }
        for (index, entry) in configuration.microphones.enumerated() {
            let source = audioSource(entry, index: index)
            do {
                try source.start()
                lock.holding { warmMics[entry.name] = source }
            } catch {
                logger.warning("microphone cannot start", metadata: ["mic": "\(entry.name)", "why": "\(error)"])
            }
        }
    }

    /// Lets go of microphones opened for a take that will not record (aborted, or reconfigured).
    private func coolMicrophones() {
        let old = lock.holding { () -> [AudioSource] in
            defer { warmMics = [:] }
            return Array(warmMics.values)
        }
        old.forEach { $0.stop() }
    }

    private func audioSource(_ entry: MicrophoneEntry, index: Int) -> AudioSource {
        switch entry.device {
        case .synthetic(let ppm):
            var spec = SyntheticMicrophone.Spec(rateErrorPPM: ppm, timestampJitterMicroseconds: configuration.timestampJitterMicroseconds,
                                                seed: configuration.seed &* 2_000_003 &+ UInt64(index))
            spec.endsAfterMicroseconds = entry.endsAfterMicroseconds
            let clock = simulatedClock
            return SyntheticMicrophone(spec: spec) { host in clock.local(fromHost: host) }
        case .alsa(let device):
            let clock = simulatedClock
            return ALSAMicrophone(device: device) { host in clock.local(fromHost: host) }
        }
    }

    private func requireCollectable(_ takeID: String) throws(NodeFailure) {
        lock.lock()
        defer { lock.unlock() }
        if machine.takeID == takeID, machine.state == .recording || machine.state == .armed {
            throw NodeFailure(.badState, "take \(takeID) is still \(machine.state.rawValue) on node \(configuration.name); its files are not final.")
        }
    }

    /// The take's files from its index. A take without a valid index (recorded by an older node, or repaired
    /// after a crash) is checksummed on a background queue; until then the list says it is not final.
    private func files(_ takeID: String) throws(NodeFailure) -> Coord_V1_FileList {
        try requireCollectable(takeID)
        var list = Coord_V1_FileList()
        list.takeID = takeID
        if let files = try store.indexedFiles(takeID: takeID) {
            list.files = files.map(\.wire)
            list.final = true
            return list
        }
        if let failure = lock.holding({ indexFailures.removeValue(forKey: takeID) }) {
            throw NodeFailure(.io, "the files of take \(takeID) could not be checksummed: \(failure)")
        }
        let begin = lock.holding { indexing.insert(takeID).inserted }
        if begin {
            logger.info("checksumming the files of take \(takeID)")
            indexQueue.async { [self] in
                do {
                    let index = try store.index(takeID: takeID)
                    logger.info("checksummed take \(takeID)", metadata: ["files": "\(index.files.count)"])
                    if let problem = index.unsaved {
                        logger.warning("take \(takeID): its checksums are kept in memory only until collected: \(problem)")
                    }
                    lock.holding { _ = indexing.remove(takeID) }
                } catch {
                    let message = (error as? NodeFailure)?.message ?? "\(error)"
                    logger.error("take \(takeID): its files could not be checksummed: \(message)")
                    lock.holding {
                        indexFailures[takeID] = message
                        _ = indexing.remove(takeID)
                    }
                }
            }
        }
        return list
    }

    /// Called every few hundred ms by the server: a take armed but never started (its coordinator vanished or
    /// could not reach this node) is dropped once its start instant is well past, so the node is free again.
    public func tick() {
        // Off the socket thread: reading sysfs must not delay the clock probes it answers.
        pressureQueue.async { [weak self] in self?.samplePressure() }
        let overdue: String? = lock.holding {
            guard machine.state == .armed, let takeID = machine.takeID, let armedGrid else { return nil }
            let now = armedGrid.clock.current.rig(fromLocal: Double(localNow()))
            return now > Double(armedGrid.grid.t0) + 5_000_000 ? takeID : nil
        }
        let leaseOver = lock.holding { previewRun.map { MonotonicClock.now() > $0.leaseUntil } ?? false }
        // Chunk buffers are kept for the next chunk while a collection runs, and returned 10 s after it.
        let collectionOver = lock.holding {
            guard let last = lastChunkServed, MonotonicClock.now() - last > 10_000_000 else { return false }
            lastChunkServed = nil
            return true
        }
        if collectionOver { ChunkBuffers.shared.trim() }
        if leaseOver { pressureQueue.async { [weak self] in self?.stopPreview() } }
        guard let takeID = overdue else { return }
        logger.warning("take \(takeID) was armed but never started; its start instant passed 5 s ago, so it is dropped")
        var abort = Coord_V1_Abort()
        abort.takeID = takeID
        abort.reason = "never started"
        try? self.abort(abort)
    }

    /// Every half second, on `pressureQueue` (the monitor is only touched there): judge the node's pressure, note a
    /// change as an event, and at shutdown level stop every camera a few groups ahead so the files are finalized
    /// while the disk still has room.
    private func samplePressure() {
        let now = MonotonicClock.now()
        let counters: PressureMonitor.Counters? = lock.holding {
            guard now - lastPressureSample >= 500_000 else { return nil }
            lastPressureSample = now
            let progress = recorders.map(\.snapshot)
            return PressureMonitor.Counters(bytesWritten: progress.map(\.bytesWritten).reduce(0, +),
                                            frames: progress.map(\.frames).reduce(0, +),
                                            dropped: progress.map(\.dropped).reduce(0, +))
        }
        guard let counters else { return }
        let reading = monitor.sample(now: now, counters: counters, calibration: nil, buses: buses)
        let resources = monitor.resources
        lock.holding {
            let previous = pressure
            pressure = reading
            pressureResources = resources
            let active = machine.state == .armed || machine.state == .recording
            if reading.level != previous.level {
                logger.notice("pressure \(reading.level.name)", metadata: ["cause": "\(reading.cause)"])
                if active { addNodeEvent(camera: "", kind: .pressure, detail: "\(reading.level.name): \(reading.cause)") }
            }
            guard reading.level == .shutdown, machine.state == .recording, !pressureShutdown, let armedGrid else { return }
            pressureShutdown = true
            let rigNow = armedGrid.clock.current.rig(fromLocal: Double(localNow()))
            let stop = armedGrid.grid.nearestGroup(to: Int64(rigNow)) + 2
            recorders.forEach { $0.stop(at: stop) }
            mics.forEach { $0.stop(at: stop) }
            let detail = "node \(configuration.name) stopped its cameras after group \(stop - 1) with their files finalized: \(reading.cause)"
            logger.error("\(detail)")
            addNodeEvent(camera: "", kind: .pressureShutdown, detail: detail)
        }
    }

    /// Records something the node did on its own; the coordinator copies it into the manifest. Lock held.
    private func addNodeEvent(camera: String, kind: TakeEvent.Kind, detail: String) {
        let at = armedGrid.map { Int64($0.clock.current.rig(fromLocal: Double(localNow())).rounded()) } ?? localNow()
        nodeEvents.append(TakeEvent(kind, at: at, node: configuration.name, camera: camera, detail))
    }

    /// Opens the cameras for preview only, or renews a preview already running (its clock mapping and lease).
    /// Refused while a take holds the cameras: that take's Arm carries the preview. Runs on the control lane.
    private func startPreview(_ message: Coord_V1_StartPreview) throws(NodeFailure) -> String {
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
        let key = PreviewKey(settings: requested, t0: message.t0Us, period: Int64(message.framePeriodUs))
        let mapping = ClockMapping(wire: message.clock)
        let leaseUntil = MonotonicClock.now() + Int64(message.leaseMs) * 1000
        enum Plan { case busy(String), renewed, open }
        let plan: Plan = lock.holding {
            switch machine.state {
            case .configured, .armed, .recording:
                return .busy(machine.takeID ?? "")
            case .idle, .finished, .failed:
                break
            }
            if let run = previewRun, run.key == key {
                run.clock.update(mapping)
                previewRun!.leaseUntil = leaseUntil
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
        lock.holding { previewRun = (opened, key, clock, leaseUntil) }
        logger.info("previewing", metadata: ["cameras": "\(requested.map(\.camera))", "width": "\(settings.width)", "fps": "\(settings.fps)"])
        return "previewing \(requested.count) camera(s)"
    }

    /// Sets one camera's controls: on the camera now if it is open (preview or take), and for whenever it opens.
    private func setControls(_ message: Coord_V1_SetControls) throws(NodeFailure) -> Coord_V1_ControlsApplied {
        guard cameras.contains(where: { $0.name == message.camera }) else {
            throw NodeFailure(.notFound, "node \(configuration.name) has no camera named \"\(message.camera)\".")
        }
        let wanted = CameraControls(wire: message.controls)
        let name = "\(configuration.name)/\(message.camera)"
        let open = lock.holding { openCameras[message.camera]?.camera }
        var applied: CameraControls
        if let open, open.isStreaming {
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
        let merged = lock.holding { () -> CameraControls in
            controls[message.camera] = (controls[message.camera] ?? CameraControls()).updated(with: wanted)
            return controls[message.camera]!
        }
        if open == nil || !(open!.isStreaming) { applied = merged }
        logger.info("controls set", metadata: ["camera": "\(message.camera)", "applied": "\(applied)"])
        var reply = Coord_V1_ControlsApplied()
        reply.camera = message.camera
        reply.controls = applied.wire
        return reply
    }

    /// Closes the cameras opened for preview only (if any).
    private func stopPreview() {
        guard let run = lock.holding({ () -> [PreviewCamera]? in
            defer { previewRun = nil }
            return previewRun?.cameras
        }) else { return }
        let deadline = DispatchTime.now() + .seconds(2)
        run.forEach { $0.stop(deadline: deadline) }
        logger.info("preview closed")
    }

    /// Graceful shutdown: every camera still recording stops now and its file is finalized.
    public func shutdown() {
        stopPreview()
        preview?.stop()
        previewZAP?.stop()
        let active = lock.holding { recorders }
        active.forEach { $0.abandonRecording() }
        let sound = lock.holding { mics }
        sound.forEach { $0.abandonRecording() }
        coolMicrophones()
        let deadline = DispatchTime.now() + .seconds(10)
        for mic in sound where !mic.waitUntilFinished(deadline: deadline) {
            logger.error("microphone \(mic.mic) did not finish its file within 10 s of shutdown")
        }
        for recorder in active where !recorder.waitUntilFinished(deadline: deadline) {
            logger.error("camera \(recorder.settings.camera) did not finish its files within 10 s of shutdown")
        }
    }
}
