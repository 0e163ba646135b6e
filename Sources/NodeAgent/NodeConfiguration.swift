import CoordCore
import Foundation
import Capture
import Pixels
import Platform

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

/// How a node agent is set up (from flags or its config file).
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
    /// When and in what steps a synthetic sensor applies a requested frame duration (a Pi sensor's: 3 frames, ~20 µs).
    public var syntheticFrameDurationTiming = FrameDurationTiming.immediate
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
    /// Where preview tiles are published (a ZeroMQ PUB endpoint); nil: beside the control endpoint (its port + 1,
    /// or a free port when the control port is `*`); empty: no preview.
    public var previewEndpoint: String?
    /// V4L2 cameras (`--v4l2 NAME=/dev/videoN`), in flag order.
    public var v4l2Cameras: [V4L2CameraEntry] = []
    /// GenICam cameras (`--genicam NAME=DEVICE_ID`), in flag order.
    public var genicamCameras: [GenICamCameraEntry] = []
    /// libcamera cameras (`--libcamera NAME=CAMERA_ID`), in flag order.
    public var libcameraCameras: [LibcameraCameraEntry] = []
    /// The network interfaces GigE Vision cameras are discovered on (`--genicam-interface`); empty: none, nothing
    /// is broadcast and only USB3 Vision cameras are found.
    public var genicamInterfaces: [String] = []
    /// The node file's trigger outputs and the cameras they trigger, by camera name (CONTRACT §17).
    public var triggerOutputs: [TriggerOutput] = []
    public var cameraTriggers: [String: CameraTrigger] = [:]
    /// Opens an output's line: the GPIO chip's, or a scripted line in tests and `coord-node-scripted` (never shipped).
    public var triggerLine: @Sendable (TriggerOutput) throws(GPIOFailure) -> any TriggerLine = NodeConfiguration.gpioLine
    @Sendable public static func gpioLine(_ output: TriggerOutput) throws(GPIOFailure) -> any TriggerLine {
        try GPIOLine(chip: output.chip, line: output.line, consumer: "coord-node \(output.name)", activeLow: output.active == .low)
    }
    /// How V4L2 devices are reached: libv4l2, or a scripted driver (`coord-node-scripted --v4l2-script`, tests only).
    public var v4l2: V4L2Access = .system
    /// CURVE keys: every socket serves only authorized coordinators (nil: no encryption, loopback only).
    public var security: NodeSecurity?
    /// Serve a network address without keys anyway (`--insecure`).
    public var insecure = false
    /// UDP port `coord discover`'s queries are answered on (0: not at all); only for an endpoint others can reach.
    public var discoveryPort: UInt16 = 5710
    /// Microphones recorded with every take (CONTRACT §9): `--synthetic-mic NAME` and `--audio NAME=DEVICE`.
    public var microphones: [MicrophoneEntry] = []
    /// Where Prometheus metrics are served (`--metrics HOST:PORT`); nil: nowhere.
    public var metrics: MetricsAddress?

    /// The preview endpoint to bind: the one given, or the control endpoint's host on the next port (5710 → 5711:
    /// a fixed pair one firewall rule can name; a `*` control port: a free one; an ipc path gets `.preview`
    /// appended); nil: none.
    public var previewBindEndpoint: String? {
        if let previewEndpoint { return previewEndpoint.isEmpty ? nil : previewEndpoint }
        if endpoint.hasPrefix("ipc://") { return endpoint + ".preview" }
        guard let control = Endpoint(endpoint) else { return nil }
        if let port = control.portNumber, port > 0, port < 65535 { return control.with(port: String(port + 1)).description }
        return control.with(port: "*").description
    }

    /// Every microphone's name.
    public var micNames: [String] { microphones.map(\.name) }

    /// Every camera's name: the synthetic ones, then the V4L2 ones, then the GenICam ones, then the libcamera ones.
    public var cameraNames: [String] {
        syntheticCameras + v4l2Cameras.map(\.name) + genicamCameras.map(\.name) + libcameraCameras.map(\.name)
    }

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
        if names.isEmpty { return "node \(name) has no cameras: give --synthetic NAME[,NAME…], --v4l2 NAME=/dev/videoN or --genicam NAME=DEVICE_ID." }
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
        return Endpoint(endpoint)?.isLoopback ?? false
    }
}

/// Why a node cannot start, as one sentence, and the exit status that says whose fault it is: 2 the flags or
/// the node file, 1 the machine (a camera missing, the staging disk).
public struct NodeStartFailure: Error, Equatable, CustomStringConvertible {
    public var sentence: String
    public var status: Int32
    public init(_ sentence: String, status: Int32 = 2) { self.sentence = sentence; self.status = status }
    public var description: String { sentence }
}

/// Where `--metrics` serves `/metrics`.
public struct MetricsAddress: Sendable, Equatable {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) { self.host = host; self.port = port }
}

/// The daemon's command-line settings, as given: nil (or empty) where the command line said nothing, so the node
/// file's value can stand.
public struct NodeFlags: Sendable, Equatable {
    public var name: String?
    public var endpoint: String?
    public var previewEndpoint: String?
    public var staging: String?
    public var synthetic: String?
    public var syntheticBus: [String] = []
    public var v4l2: [String] = []
    public var genicam: [String] = []
    public var genicamInterface: [String] = []
    public var libcamera: [String] = []
    public var audio: [String] = []
    public var syntheticMic: String?
    public var micRateErrorPPM: Double = 0
    public var syntheticMicEndsAfterMilliseconds: Int64?
    public var systemRoot = "/"
    public var calibration: String?
    public var clockOffsetMicroseconds: Int64 = 0
    public var clockDriftPPM: Double = 0
    public var clockReferenceMicroseconds: Int64?
    public var timestampJitterMicroseconds: Double = 30
    public var seed: UInt64 = 1
    public var syntheticOpenMilliseconds = 0
    public var syntheticGrain = 0
    public var sensorDelayFrames = 0
    public var sensorLineMicroseconds = 0.0
    public var parentPID: Int32?
    public var keepAfterCollect = false
    public var logLevel: String?
    public var cert: String?
    public var authorized: String?
    public var insecure = false
    public var metrics: String?
    public var discoveryPort: UInt16?

    public init() {}

    /// These flags with the node file's value for every setting the command line did not give.
    public func overlaid(on file: NodeFile?) -> NodeFlags {
        guard let file else { return self }
        var f = self
        f.name = name ?? file.name
        f.endpoint = endpoint ?? file.endpoint
        f.previewEndpoint = previewEndpoint ?? file.previewEndpoint
        f.staging = staging ?? file.staging
        f.calibration = calibration ?? file.calibration
        f.logLevel = logLevel ?? file.logLevel
        // Cameras come from the flags or from the file, never a mix of both.
        if synthetic == nil && v4l2.isEmpty && genicam.isEmpty && libcamera.isEmpty && syntheticBus.isEmpty {
            f.synthetic = file.syntheticFlag
            f.syntheticBus = file.syntheticBusFlags ?? []
            f.v4l2 = file.v4l2Flags ?? []
            f.genicam = file.genicamFlags ?? []
            f.libcamera = file.libcameraFlags ?? []
        }
        if genicamInterface.isEmpty { f.genicamInterface = file.genicamInterfaces ?? [] }
        // Microphones likewise: from the flags or from the file.
        if audio.isEmpty && syntheticMic == nil {
            f.audio = file.audioFlags ?? []
            f.syntheticMic = file.syntheticMicFlag
        }
        if cert == nil && authorized == nil {
            f.cert = file.keys?.cert
            f.authorized = file.keys?.authorized
        }
        f.metrics = metrics ?? file.metrics
        f.discoveryPort = discoveryPort ?? file.discoveryPort
        f.insecure = insecure || (file.insecure ?? false)
        f.keepAfterCollect = keepAfterCollect || (file.keepAfterCollect ?? false)
        return f
    }

    /// The node's name: the one given, else the host's.
    public var nodeName: String { name ?? ProcessInfo.processInfo.hostName }

    /// Numbers no node can run with, before anything is opened.
    public func checkRanges() throws(NodeStartFailure) {
        guard (0...TestPattern.maxGrain).contains(syntheticGrain) else {
            throw NodeStartFailure("--synthetic-grain must be between 0 and \(TestPattern.maxGrain) (got \(syntheticGrain)).")
        }
    }
}

extension NodeConfiguration {
    /// The configuration the flags and the node file (already parsed) describe, the flags winning; or the first
    /// problem as one sentence (status 2). Reads only the key files `--cert`/`--authorized` name. `v4l2`: how V4L2
    /// devices are reached.
    public static func resolve(flags given: NodeFlags, file: NodeFile?, v4l2: V4L2Access = .system) throws(NodeStartFailure) -> NodeConfiguration {
        let flags = given.overlaid(on: file)
        try flags.checkRanges()
        var config: NodeConfiguration
        do {
            let spec = try SyntheticCameraSpec.parse(synthetic: flags.synthetic ?? "", buses: flags.syntheticBus)
            config = NodeConfiguration(name: flags.nodeName, endpoint: flags.endpoint ?? "tcp://0.0.0.0:5710",
                                       staging: URL(fileURLWithPath: flags.staging ?? "/var/lib/coord-node"),
                                       syntheticCameras: spec.cameras)
            config.syntheticCameraBus = spec.cameraBus
            config.syntheticBuses = spec.buses
            config.v4l2Cameras = try V4L2CameraEntry.parse(flags.v4l2)
            config.genicamCameras = try GenICamCameraEntry.parse(flags.genicam)
            config.libcameraCameras = try LibcameraCameraEntry.parse(flags.libcamera)
            config.genicamInterfaces = try GenICamInterfaceName.parse(flags.genicamInterface)
            config.microphones = try MicrophoneEntry.parseALSA(flags.audio)
        } catch {
            throw NodeStartFailure("\(error)")
        }
        if let mic = flags.syntheticMic {
            config.microphones.insert(MicrophoneEntry(name: mic, device: .synthetic(rateErrorPPM: flags.micRateErrorPPM),
                                                      endsAfterMicroseconds: flags.syntheticMicEndsAfterMilliseconds.map { $0 * 1000 }), at: 0)
        }
        config.v4l2 = v4l2
        config.triggerOutputs = file?.triggerOutputs ?? []
        config.cameraTriggers = file?.cameraTriggers ?? [:]
        config.systemRoot = URL(fileURLWithPath: flags.systemRoot)
        config.calibrationPath = flags.calibration.map { URL(fileURLWithPath: $0) }
        config.clockOffsetMicroseconds = flags.clockOffsetMicroseconds
        config.clockDriftPPM = flags.clockDriftPPM
        config.clockReferenceMicroseconds = flags.clockReferenceMicroseconds
        config.timestampJitterMicroseconds = flags.timestampJitterMicroseconds
        config.seed = flags.seed
        config.syntheticOpenMilliseconds = max(0, flags.syntheticOpenMilliseconds)
        config.syntheticGrain = flags.syntheticGrain
        if let problem = FrameDurationTiming.problem(delayFrames: flags.sensorDelayFrames, lineMicroseconds: flags.sensorLineMicroseconds) {
            throw NodeStartFailure(problem)
        }
        config.syntheticFrameDurationTiming = FrameDurationTiming(delayFrames: flags.sensorDelayFrames,
                                                                  lineMicroseconds: flags.sensorLineMicroseconds)
        config.parentPID = flags.parentPID
        config.keepAfterCollect = flags.keepAfterCollect
        config.previewEndpoint = flags.previewEndpoint
        config.insecure = flags.insecure
        config.discoveryPort = flags.discoveryPort ?? 5710
        switch (flags.cert, flags.authorized) {
        case (nil, nil): break
        case (let cert?, let authorized?):
            do { config.security = try NodeSecurity.load(cert: cert, authorized: authorized) } catch { throw NodeStartFailure("\(error)") }
        case (nil, _?):
            throw NodeStartFailure("--authorized needs --cert (this node's own NAME.key_secret).")
        case (_?, nil):
            throw NodeStartFailure("--cert needs --authorized DIR (the public certificates of the coordinators to serve).")
        }
        if let metrics = flags.metrics {
            guard let address = HostPort.parse(metrics) else {
                throw NodeStartFailure("--metrics must be HOST:PORT, e.g. 127.0.0.1:9710 (got \"\(Echo.short(metrics))\").")
            }
            config.metrics = MetricsAddress(host: address.host, port: address.port)
        }
        if let problem = config.problem() { throw NodeStartFailure(problem) }
        return config
    }
}
