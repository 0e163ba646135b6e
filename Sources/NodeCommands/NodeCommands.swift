import ArgumentParser
import CoordCore
import Foundation
import Logging
import Capture
import Pixels
import NodeAgent
import Platform
import ServiceLifecycle
import UnixSignals
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

    /// Takes the node file's value for every setting the command line did not give.
    mutating func apply(_ file: NodeFile) {
        name = name ?? file.name
        endpoint = endpoint ?? file.endpoint
        previewEndpoint = previewEndpoint ?? file.previewEndpoint
        staging = staging ?? file.staging
        calibration = calibration ?? file.calibration
        logLevel = logLevel ?? file.logLevel
        // Cameras come from the flags or from the file, never a mix of both.
        if synthetic == nil && v4l2.isEmpty && genicam.isEmpty && syntheticBus.isEmpty {
            synthetic = file.syntheticFlag
            syntheticBus = file.syntheticBusFlags ?? []
            v4l2 = file.v4l2Flags ?? []
            genicam = file.genicamFlags ?? []
        }
        if genicamInterface.isEmpty { genicamInterface = file.genicamInterfaces ?? [] }
        // Microphones likewise: from the flags or from the file.
        if audio.isEmpty && syntheticMic == nil {
            audio = file.audioFlags ?? []
            syntheticMic = file.syntheticMicFlag
        }
        if cert == nil && authorized == nil {
            cert = file.keys?.cert
            authorized = file.keys?.authorized
        }
        metrics = metrics ?? file.metrics
        discoveryPort = discoveryPort ?? file.discoveryPort
        insecure = insecure || (file.insecure ?? false)
        keepAfterCollect = keepAfterCollect || (file.keepAfterCollect ?? false)
    }

    public mutating func run() async throws {
        Memory.returnLargeBuffersToTheSystem()
        // The node file first; every flag given on the command line wins over it.
        var warnings: [String] = []
        if let nodeFile {
            do {
                let loaded = try NodeFile.load(nodeFile)
                warnings = loaded.warnings
                apply(loaded.file)
            } catch {
                FileHandle.standardError.write(Data("coord-node: \(error)\n".utf8))
                throw ExitCode(2)
            }
        }
        let name = self.name ?? ProcessInfo.processInfo.hostName
        let endpoint = self.endpoint ?? "tcp://0.0.0.0:5710"
        let staging = self.staging ?? "/var/lib/coord-node"
        let level = Logger.Level(rawValue: logLevel ?? "info") ?? .info
        let nodeName = name
        let journal = JournalLogHandler.stderrIsTheJournal()
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = journal ? JournalLogHandler(label: label) : StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            handler[metadataKey: "node"] = "\(nodeName)"
            return handler
        }
        let logger = Logger(label: "coord-node")
        for warning in warnings { logger.warning("\(warning)") }
        guard (0...TestPattern.maxGrain).contains(syntheticGrain) else {
            FileHandle.standardError.write(Data("coord-node: --synthetic-grain must be between 0 and \(TestPattern.maxGrain) (got \(syntheticGrain)).\n".utf8))
            throw ExitCode(2)
        }
        let access: V4L2Access
        do {
            access = try CoordNode.v4l2Access(seed)
        } catch {
            FileHandle.standardError.write(Data("coord-node: \(error)\n".utf8))
            throw ExitCode(2)
        }
        if listCameras {
            // Names a device reports (a card, a vendor, a model) cannot split a line or reach the terminal as escapes.
            for line in CameraListing.lines(access: access, probe: HostProbe(root: URL(fileURLWithPath: systemRoot))) { print(Echo.escapingControls(line)) }
            // A scripted V4L2 run is a test of the V4L2 listing alone.
            if !access.isScripted {
                do {
                    for line in CameraListing.genicamLines(interfaces: try GenICamInterfaceName.parse(genicamInterface)) { print(Echo.escapingControls(line)) }
                } catch {
                    FileHandle.standardError.write(Data("coord-node: \(error)\n".utf8))
                    throw ExitCode(2)
                }
            }
            return
        }
        var config: NodeConfiguration
        do {
            let spec = try SyntheticCameraSpec.parse(synthetic: synthetic ?? "", buses: syntheticBus)
            config = NodeConfiguration(name: name, endpoint: endpoint, staging: URL(fileURLWithPath: staging),
                                       syntheticCameras: spec.cameras)
            config.syntheticCameraBus = spec.cameraBus
            config.syntheticBuses = spec.buses
            config.v4l2Cameras = try V4L2CameraEntry.parse(v4l2)
            config.genicamCameras = try GenICamCameraEntry.parse(genicam)
            config.genicamInterfaces = try GenICamInterfaceName.parse(genicamInterface)
            config.microphones = try MicrophoneEntry.parseALSA(audio)
            if let syntheticMic {
                config.microphones.insert(MicrophoneEntry(name: syntheticMic, device: .synthetic(rateErrorPPM: micRateErrorPpm),
                                                          endsAfterMicroseconds: syntheticMicEndsAfterMs.map { $0 * 1000 }), at: 0)
            }
            config.v4l2 = access
        } catch {
            FileHandle.standardError.write(Data("coord-node: \(error)\n".utf8))
            throw ExitCode(2)
        }
        config.systemRoot = URL(fileURLWithPath: systemRoot)
        config.calibrationPath = calibration.map { URL(fileURLWithPath: $0) }
        config.clockOffsetMicroseconds = clockOffsetUs
        config.clockDriftPPM = clockDriftPpm
        config.clockReferenceMicroseconds = clockReferenceUs
        config.timestampJitterMicroseconds = timestampJitterUs
        config.seed = seed
        config.syntheticOpenMilliseconds = max(0, syntheticOpenMs)
        config.syntheticGrain = syntheticGrain
        config.parentPID = parentPid
        config.keepAfterCollect = keepAfterCollect
        config.previewEndpoint = previewEndpoint
        config.insecure = insecure
        config.discoveryPort = discoveryPort ?? 5710
        switch (cert, authorized) {
        case (nil, nil): break
        case (let cert?, let authorized?):
            do { config.security = try NodeSecurity.load(cert: cert, authorized: authorized) } catch {
                FileHandle.standardError.write(Data("coord-node: \(error)\n".utf8))
                throw ExitCode(2)
            }
        case (nil, _?):
            FileHandle.standardError.write(Data("coord-node: --authorized needs --cert (this node's own NAME.key_secret).\n".utf8))
            throw ExitCode(2)
        case (_?, nil):
            FileHandle.standardError.write(Data("coord-node: --cert needs --authorized DIR (the public certificates of the coordinators to serve).\n".utf8))
            throw ExitCode(2)
        }
        var metricsAddress: (host: String, port: Int)?
        if let metrics {
            do { metricsAddress = try MetricsEndpoint.parse(metrics) } catch {
                FileHandle.standardError.write(Data("coord-node: \(error)\n".utf8))
                throw ExitCode(2)
            }
            if let address = metricsAddress, !MetricsEndpoint.isLoopback(address.host) {
                // As the console warns about a LAN address: /metrics has no keys, whatever --cert says.
                FileHandle.standardError.write(Data("coord-node: warning: /metrics listens on \(address.host), beyond this machine: anyone who reaches that network can read it, without keys (--cert does not cover it).\n".utf8))
            }
        }
        if let problem = config.problem() {
            FileHandle.standardError.write(Data("coord-node: \(problem)\n".utf8))
            throw ExitCode(2)
        }
        do {
            try FileManager.default.createDirectory(at: config.staging, withIntermediateDirectories: true)
        } catch {
            FileHandle.standardError.write(Data("coord-node: cannot create staging directory \(config.staging.path): \(error.localizedDescription)\n".utf8))
            throw ExitCode(1)
        }
        // A configured camera that is missing, busy or not a camera stops the node here, with one sentence naming it
        // (exit 1: the flags are right, the machine is not).
        let agent: NodeAgent
        do {
            agent = try NodeAgent(configuration: config, logger: logger)
        } catch {
            FileHandle.standardError.write(Data("coord-node: \(error.message)\n".utf8))
            throw ExitCode(1)
        }
        let server = NodeServer(agent: agent, logger: logger) { bound in
            // The one line on stdout: tells a supervisor (the demo, a test) where the node listens.
            print("READY \(bound)")
            fflush(nil)  // every stream: Swift 6 cannot name the C global stdout
        }
        // A supervised node (the demo's) leaves Ctrl-C to its parent, which stops the take at one instant;
        // the terminal's SIGINT reaches the whole process group.
        if parentPid != nil { signal(SIGINT, SIG_IGN) }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: server, successTerminationBehavior: .gracefullyShutdownGroup)]
        if let metricsAddress {
            let metricsLogger = Logger(label: "coord-node.metrics")
            let app = MetricsEndpoint.application(host: metricsAddress.host, port: metricsAddress.port,
                                                  sample: { agent.metricsSample() }, logger: metricsLogger) { bound in
                metricsLogger.info("serving metrics", metadata: ["url": "http://\(bound)/metrics"])
                // A supervisor (a test, the benchmark) finds a free port here, as it finds READY's endpoint.
                print("METRICS http://\(bound)/metrics")
                fflush(nil)
            }
            // A metrics port that cannot be bound is logged and ends the node (a service that ends fails the group).
            services.append(.init(service: app, successTerminationBehavior: .gracefullyShutdownGroup,
                                  failureTerminationBehavior: .gracefullyShutdownGroup))
        }
        // The signal is seen here, not by the group: the node notes which one stopped it (a take it ends names it
        // in its events) before the graceful shutdown begins.
        let stopSignals: [UnixSignal] = parentPid != nil ? [.sigterm] : [.sigterm, .sigint]
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [], logger: logger))
        do {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    for await signal in await UnixSignalsSequence(trapping: stopSignals) {
                        agent.noteStopping(cause: "\(signal), its service shutting down")
                        await group.triggerGracefulShutdown()
                    }
                }
                try await group.run()
                tasks.cancelAll()
            }
        } catch {
            FileHandle.standardError.write(Data("coord-node: \(error)\n".utf8))
            throw ExitCode(1)
        }
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
