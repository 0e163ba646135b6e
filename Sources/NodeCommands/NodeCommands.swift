import ArgumentParser
import CoordCore
import Foundation
import Logging
import Capture
import NodeAgent
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// coord-node: the node agent daemon that runs on every capture box, and its one-off calibration. The
/// executable only calls `CoordNode.main()`; tests parse and run these commands directly.
public struct CoordNode: AsyncParsableCommand {
    public init() {}
    public static let configuration = CommandConfiguration(
        commandName: "coord-node",
        abstract: "The coord node agent: records this box's cameras on the rig's frame grid and serves the files.",
        // The daemon is the default, so `coord-node --name x --synthetic cam0 …` runs it as it always did.
        version: NodeAgent.version,
        subcommands: [Serve.self, Calibrate.self, NodeKeys.self],
        defaultSubcommand: Serve.self)

    /// How V4L2 devices are reached (given `--seed`): libv4l2, unless the test program coord-node-scripted binds a
    /// scripted driver, so no test double is linked into coord-node.
    @TaskLocal public static var v4l2Access: @Sendable (_ seed: UInt64) throws -> V4L2Access = { _ in .system }
    /// How trigger outputs are driven: their GPIO lines, unless coord-node-scripted binds scripted lines.
    @TaskLocal public static var triggerLine: (@Sendable (TriggerOutput) throws(GPIOFailure) -> any TriggerLine)? = nil

    /// Parses the process's arguments (or `arguments`) and runs the command they name, exiting with its status.
    public static func runFromCommandLine(_ arguments: [String]? = nil) async {
        do {
            var command = try parseAsRoot(arguments)
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            // --help, --version and an ExitCode a command chose have said what they had to.
            if error is ExitCode || code == .success { exit(withError: error) }
            // As coord says it: one line, usage errors status 2.
            let failure = CommandLineFailure(program: "coord-node", parserMessage: message(for: error), isUsage: code == .validationFailure)
            FileHandle.standardError.write(Data(failure.line.utf8))
            Foundation.exit(failure.status)
        }
    }
}

/// The daemon: serves the coordinator until it is told to stop.
public struct Serve: AsyncParsableCommand {
    public init() {}
    public static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the node agent (the default when no subcommand is given).")

    @Option(name: .customLong("config"), help: "The node file (YAML; see /usr/share/doc/coord-node/examples/node.example.yaml): these settings; a flag given here overrides the file.")
    var nodeFile: String?
    @Option(help: "Node name ([A-Za-z0-9._-]{1,64}) (default: the host name).") var name: String?
    @Option(help: "ZeroMQ endpoint to listen on; a * port picks a free one (default: tcp://0.0.0.0:5710).") var endpoint: String?
    @Option(help: "ZeroMQ PUB endpoint for the console's preview tiles (default: the control endpoint's host on its port + 1, e.g. 5711 beside 5710; a free port when that is *; empty: no preview).")
    var previewEndpoint: String?
    @Option(help: "Staging directory for recordings until the coordinator collects them (default: /var/lib/coord-node).") var staging: String?
    @Option(help: "Synthetic cameras to offer, comma-separated NAME or NAME@BUS (BUS declared by --synthetic-bus).") var synthetic: String?
    @Option(help: "A bus synthetic cameras can share, ID=MBITS (e.g. usb1=5000); repeatable.") var syntheticBus: [String] = []
    @Option(help: "A V4L2 camera to record, NAME=/dev/videoN (see --list-cameras); repeatable.") var v4l2: [String] = []
    @Option(help: "A GenICam camera (GigE Vision, USB3 Vision) to record, NAME=DEVICE_ID (see --list-cameras); repeatable.")
    var genicam: [String] = []
    @Option(help: "A camera driven through libcamera, NAME=CAMERA_ID (the id as --list-cameras shows it; a Raspberry Pi camera); repeatable.")
    var libcamera: [String] = []
    @Option(help: ArgumentHelp("A network interface GigE Vision cameras are on (e.g. eth1); repeatable. GigE Vision discovery is sent there and nowhere else; with none named it is not sent at all (USB3 Vision cameras are still found).", valueName: "iface"))
    var genicamInterface: [String] = []
    @Option(help: "A microphone to record with every take, NAME=DEVICE (an ALSA capture device: hw:1,0, default); repeatable.")
    var audio: [String] = []
    @Option(help: "A synthetic microphone (SYNCCLICK v1: a 1 ms 4 kHz click at every whole second) to record with every take.")
    var syntheticMic: String?
    @Option(help: "The synthetic microphone's sample-clock rate error, ppm.") var micRateErrorPpm: Double = 0
    // Tests only: the synthetic microphone goes away this many ms after it starts.
    @Option(help: .hidden) var syntheticMicEndsAfterMs: Int64?
    @Flag(help: "Print the V4L2 and GenICam devices this machine has (driver, card, bus, formats) or why each was skipped, and exit.")
    var listCameras = false
    @Option(help: "Read sysfs and procfs (thermal zones, CPUs, USB buses) under this directory.") var systemRoot: String = "/"
    @Option(help: "Calibration file written by `coord-node calibrate` (default: <staging>/calibration.json).") var calibration: String?
    @Option(help: "Simulated local clock offset from CLOCK_MONOTONIC, µs (demo).") var clockOffsetUs: Int64 = 0
    @Option(help: "Simulated local clock drift, ppm (demo).") var clockDriftPpm: Double = 0
    @Option(help: "Host CLOCK_MONOTONIC instant (µs) at which the simulated offset holds; default: at start (demo).") var clockReferenceUs: Int64?
    @Option(help: "Synthetic buffer timestamp noise, µs standard deviation.") var timestampJitterUs: Double = 30
    @Option(help: "Seed for the synthetic cameras.") var seed: UInt64 = 1
    @Option(help: "Milliseconds each synthetic camera takes to open when armed, as a slow USB camera does.") var syntheticOpenMs: Int = 0
    @Option(help: "Sensor-like noise amplitude (0-64) added to every synthetic frame outside its stripe, so files are as large as camera footage's; 0: the clean test pattern.")
    var syntheticGrain: Int = 0
    @Option(help: "Synthetic cameras apply a requested frame duration this many frames later, as a Raspberry Pi sensor under libcamera does.")
    var sensorDelayFrames: Int = 0
    @Option(help: "Synthetic cameras run frame durations in whole lines of this many µs (0: any duration).")
    var sensorLineUs: Double = 0
    @Option(help: "Exit when the process with this pid is gone.") var parentPid: Int32?
    @Flag(help: "Keep files after the coordinator has confirmed collecting them.") var keepAfterCollect = false
    @Option(help: "Log level: trace, debug, info, notice, warning, error (default: info).") var logLevel: String?
    @Option(help: "This node's CURVE certificate (NAME.key_secret, from `coord keys new`): every socket is encrypted and serves only --authorized coordinators.")
    var cert: String?
    @Option(help: "Directory of the public certificates (*.key) of the coordinators this node serves; read again when it changes.")
    var authorized: String?
    @Flag(help: "Serve a network address without keys (anyone who can reach it can record, fetch and delete).")
    var insecure = false
    @Option(help: "Serve Prometheus metrics at http://HOST:PORT/metrics (a port of 0 picks a free one).")
    var metrics: String?
    @Option(help: "UDP port to answer coord discover on, when the endpoint is reachable from other machines (0: never; default 5710).")
    var discoveryPort: UInt16?

    /// The settings as the command line gave them.
    var flags: NodeFlags {
        var f = NodeFlags()
        f.name = name; f.endpoint = endpoint; f.previewEndpoint = previewEndpoint; f.staging = staging
        f.synthetic = synthetic; f.syntheticBus = syntheticBus; f.v4l2 = v4l2; f.genicam = genicam
        f.genicamInterface = genicamInterface; f.audio = audio; f.syntheticMic = syntheticMic
        f.micRateErrorPPM = micRateErrorPpm; f.syntheticMicEndsAfterMilliseconds = syntheticMicEndsAfterMs
        f.systemRoot = systemRoot; f.calibration = calibration; f.clockOffsetMicroseconds = clockOffsetUs
        f.clockDriftPPM = clockDriftPpm; f.clockReferenceMicroseconds = clockReferenceUs
        f.timestampJitterMicroseconds = timestampJitterUs; f.seed = seed; f.syntheticOpenMilliseconds = syntheticOpenMs
        f.syntheticGrain = syntheticGrain; f.parentPID = parentPid; f.keepAfterCollect = keepAfterCollect
        f.logLevel = logLevel; f.cert = cert; f.authorized = authorized; f.insecure = insecure; f.metrics = metrics
        f.discoveryPort = discoveryPort
        f.sensorDelayFrames = sensorDelayFrames; f.sensorLineMicroseconds = sensorLineUs
        f.libcamera = libcamera
        return f
    }

    /// Parses (the node file, then the flags over it), resolves, builds and runs; every refusal leaves by one exit.
    public mutating func run() async throws {
        Memory.returnLargeBuffersToTheSystem()
        do {
            try await serve()
        } catch {
            FileHandle.standardError.write(Data("coord-node: \(error.sentence)\n".utf8))
            throw ExitCode(error.status)
        }
    }

    private func serve() async throws(NodeStartFailure) {
        var loaded: (file: NodeFile, warnings: [String])?
        if let nodeFile {
            do { loaded = try NodeFile.load(nodeFile) } catch { throw NodeStartFailure("\(error)") }
        }
        let given = flags.overlaid(on: loaded?.file)
        let logger = NodeLogging.bootstrap(node: given.nodeName, level: given.logLevel)
        for warning in loaded?.warnings ?? [] { logger.warning("\(warning)") }
        try given.checkRanges()
        let access: V4L2Access
        do { access = try CoordNode.v4l2Access(seed) } catch { throw NodeStartFailure("\(error)") }
        if listCameras {
            try Self.listCameras(access: access, flags: given)
            return
        }
        var configuration = try NodeConfiguration.resolve(flags: flags, file: loaded?.file, v4l2: access)
        if let line = CoordNode.triggerLine { configuration.triggerLine = line }
        if let address = configuration.metrics, !MetricsEndpoint.isLoopback(address.host) {
            // As the console warns about a LAN address: /metrics has no keys, whatever --cert says.
            FileHandle.standardError.write(Data("coord-node: warning: /metrics listens on \(address.host), beyond this machine: anyone who reaches that network can read it, without keys (--cert does not cover it).\n".utf8))
        }
        let node = try buildNode(configuration, logger: logger)
        // A supervised node (the demo's) leaves Ctrl-C to its parent, which stops the take at one instant;
        // the terminal's SIGINT reaches the whole process group.
        if parentPid != nil { signal(SIGINT, SIG_IGN) }
        try await node.run(logger: logger)
    }

    /// `--list-cameras`: the V4L2 and GenICam devices of this machine, one line each.
    private static func listCameras(access: V4L2Access, flags: NodeFlags) throws(NodeStartFailure) {
        // Names a device reports (a card, a vendor, a model) cannot split a line or reach the terminal as escapes.
        for line in CameraListing.lines(access: access, probe: HostProbe(root: URL(fileURLWithPath: flags.systemRoot))) { print(Echo.escapingControls(line)) }
        // A scripted V4L2 run is a test of the V4L2 listing alone.
        guard !access.isScripted else { return }
        let interfaces: [String]
        do { interfaces = try GenICamInterfaceName.parse(flags.genicamInterface) } catch { throw NodeStartFailure("\(error)") }
        for line in CameraListing.genicamLines(interfaces: interfaces) { print(Echo.escapingControls(line)) }
        for line in CameraListing.libcameraLines() { print(Echo.escapingControls(line)) }
    }
}

/// Measures this node's disk, encoders and heating once and stores the figures for the daemon's handshake.
public struct Calibrate: ParsableCommand {
    public init() {}
    public static let configuration = CommandConfiguration(
        abstract: "Measure the staging disk's write rate and every codec's encode rate, and save them for the daemon.")

    @Option(help: "Staging directory the daemon records into (measured, and holds the calibration file).") var staging: String = "/var/lib/coord-node"
    @Option(help: "Where to save the calibration (default: <staging>/calibration.json).") var calibration: String?
    @Option(help: "Seconds to measure the disk, and then each codec.") var seconds: Double = 2
    @Option(help: "Read sysfs and procfs (thermal zones, CPUs) under this directory.") var systemRoot: String = "/"

    public func run() throws {
        guard seconds.isFinite, seconds > 0 else {
            FileHandle.standardError.write(Data("coord-node: --seconds must be a positive number, not \(seconds).\n".utf8))
            throw ExitCode(2)
        }
        // The daemon's own rule for where the file lives, so it reads what this wrote.
        var config = NodeConfiguration(name: "calibrate", endpoint: "", staging: URL(fileURLWithPath: staging), syntheticCameras: [])
        config.calibrationPath = calibration.map { URL(fileURLWithPath: $0) }
        let file = config.calibrationFile
        do {
            _ = try Calibrator.calibrate(staging: config.staging, file: file, probe: HostProbe(root: URL(fileURLWithPath: systemRoot)),
                                         seconds: seconds) { line in
                print(line)
                fflush(nil)  // every stream: Swift 6 cannot name the C global stdout
            }
            print("calibration saved to \(file.path)")
        } catch {
            FileHandle.standardError.write(Data("coord-node: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}
