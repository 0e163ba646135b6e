import ArgumentParser
import CoordCore
import ConsoleServer
import Coordinator
import Foundation
import Synchronization
import Logging
import Platform
import TakeReport
import UnixSignals
#if canImport(Glibc)
import Glibc
#endif

/// coord: the coordinator CLI. The executable only calls `Coord.runFromCommandLine()`.
public struct Coord: AsyncParsableCommand {
    public init() {}
    public static let configuration = CommandConfiguration(
        commandName: "coord",
        abstract: "Record one synchronized multi-camera take across many capture nodes.",
        version: CoordVersion.current,
        subcommands: [Demo.self, StartTake.self, StopTake.self, RigStatusCommand.self, Plan.self, Collect.self, Report.self, ConsoleCommand.self,
                      Keys.self, Discover.self, Deliver.self])

    /// Parses and runs; every failure is rendered here, once: one sentence on stderr and CONTRACT §1's exit code
    /// (ArgumentParser's usage errors, 64, become 2).
    public static func runFromCommandLine() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let failure as CoordError {
            FileHandle.standardError.write(Data("coord: \(failure.message)\n".utf8))
            Foundation.exit(failure.exitCode)
        } catch {
            let code = exitCode(for: error)
            // --help, --version and an ExitCode a command chose have said what they had to.
            if error is ExitCode || code == .success { exit(withError: error) }
            let usage = code == .validationFailure
            FileHandle.standardError.write(Data("coord: \(Echo.capWords(in: message(for: error)))\(usage ? " (see coord --help)" : "")\n".utf8))
            Foundation.exit(usage ? 2 : 1)
        }
    }
}

func bootstrapLogging(_ verbose: Bool) {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = verbose ? .debug : .error
        return handler
    }
}

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a complete local rig with synthetic cameras: N coord-node processes, one take, one take directory.")

    @Option(help: "Number of coord-node processes.") var nodes: Int = 3
    @Option(help: "Synthetic cameras per node.") var camerasPerNode: Int = 1
    @Option(parsing: .unconditional, help: "Seconds to record.") var seconds: Double = 5
    @Option(help: "Frame rate.") var fps: Int = 30
    @Option(help: "Frame size, WxH.") var size: String = "640x480"
    @Option(help: "Codec: mjpeg, ffv1 or h264.") var codec: String = "mjpeg"
    @Option(help: "Directory that receives the take directory.") var takesDir: String = "./takes"
    @Option(help: "Node clock offsets are drawn from ±this many ms.") var clockOffsetMs: Double = 250
    @Option(help: "Node clock drifts are drawn from ±this many ppm.") var driftPpm: Double = 50
    @Option(help: "Buffer timestamp noise, µs standard deviation.") var timestampJitterUs: Double = 30
    @Option(help: "Seed for the simulation's draws (random if not given).") var seed: UInt64?
    @Flag(help: "Record no sound (by default every node records one synthetic microphone, CONTRACT §9).") var noAudio = false
    @Option(help: "Take name.") var name: String = "demo"
    @Option(help: ArgumentHelp("Write the simulated clocks' truth here, for benchmarks that score the clock estimates.",
                               visibility: .hidden)) var truthFile: String?
    @Option(help: ArgumentHelp("This machine's calibration file (default: $COORD_CALIBRATION, else ~/.cache/coord/calibration.json; measured on first use).",
                               visibility: .hidden)) var calibration: String?
    @Flag(name: .customLong("console"), help: "Keep the local rig up with the live console (the page and its API) until Ctrl-C; takes are started from the page.")
    var withConsole = false
    @Option(help: "With --console: where the console listens, HOST:PORT.") var listen: String = "127.0.0.1:8080"
    @OptionGroup var access: ConsoleAccessOptions
    @OptionGroup var preview: PreviewOptions
    @Flag(help: "CURVE on every link, as on a real rig: each node gets its own certificate and serves only this coordinator's key.")
    var secure = false
    @Flag(help: "Log the coordinator's debug output.") var verbose = false
    @Option(help: "After the take, make these deliverables (coord deliver --to LIST): any of mov, fcpxml, fcp7xml, mhl.")
    var deliver: String?

    func run() async throws {
        bootstrapLogging(verbose)
        let console = Console()
        let deliverItems = try deliver.map(Deliver.items)
        let address = try parseListen(listen)
        let parts = size.lowercased().split(separator: "x")
        guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]), width > 0, height > 0 else {
            throw CoordError(.usage, "--size must be WxH, e.g. 640x480 (got \(size)).")
        }
        guard clockOffsetMs >= 0, driftPpm >= 0, timestampJitterUs >= 0 else {
            throw CoordError(.usage, "--clock-offset-ms, --drift-ppm and --timestamp-jitter-us must not be negative.")
        }
        var request = TakeRequest(name: name, seconds: seconds, fps: fps, width: width, height: height, codec: codec,
                                  takesDirectory: URL(fileURLWithPath: takesDir), camerasPerNode: camerasPerNode)
        request.overBudgetHint = "choose fewer cameras, a smaller --size, a lower --fps or another --codec"
        if let problem = request.problem() {
            throw CoordError(.usage, "\(problem)")
        }
        guard let nodeBinary = DemoRig.findNodeBinary() else {
            throw CoordError(.failure, "cannot find the coord-node executable next to coord, on PATH or in $COORD_NODE.")
        }
        let seed = seed ?? UInt64.random(in: 0...UInt64(UInt32.max))
        var settings = DemoRig.Settings(nodes: nodes, camerasPerNode: camerasPerNode, clockOffsetMilliseconds: clockOffsetMs,
                                        driftPPM: driftPpm, timestampJitterMicroseconds: timestampJitterUs, seed: seed)
        if let calibration { settings.calibrationFile = URL(fileURLWithPath: calibration) }
        settings.secure = secure
        settings.audio = !noAudio
        let rig = DemoRig(settings: settings, nodeBinary: nodeBinary, console: console)
        // The console's address and token first: one that cannot listen says so before any node starts.
        var consoleReady: (settings: ConsoleServer.Settings, prepared: ConsoleServer.Prepared)?
        if withConsole {
            let settings = try access.settings(address)
            consoleReady = (settings, try await preflightConsole(settings))
        }
        console.step("starting \(nodes) coord-node process(es) with \(camerasPerNode) synthetic camera(s)\(noAudio ? "" : " and a synthetic microphone") each (seed \(seed))")
        if let (settings, prepared) = consoleReady {
            do {
                try rig.ensureCalibration()
                let endpoints = try rig.start()
                let spec = rig.spec(endpoints: endpoints)
                try await serveConsole(spec: spec, template: request, settings: settings, prepared: prepared, preview: try preview.settings(), console: console)
            } catch {
                rig.stop()
                throw error
            }
            rig.stop()
            return
        }
        let outcome: TakeOutcome
        do {
            try rig.ensureCalibration()
            let endpoints = try rig.start()
            if let truthFile { try? rig.truthJSON().write(to: URL(fileURLWithPath: truthFile)) }
            outcome = try await recordTake(endpoints: endpoints, keys: rig.spec(endpoints: endpoints).linkKeysByEndpoint,
                                           request: request, console: console) {
                // Exit at once: the nodes finalize their open files on SIGTERM and exit by themselves.
                rig.terminateNow()
                return "the take is abandoned; whatever the nodes recorded stays in \(rig.staging.path)."
            } collectionInterrupted: { directory in
                rig.terminateNow()
                return "the take in \(directory.path) is incomplete; every file the nodes recorded stays in \(rig.staging.path)."
            }
        } catch {
            rig.stop()
            throw error
        }
        let partial = outcome.manifest.status == .partial
        rig.stop(keepStaging: partial)
        if partial { console.step("the nodes' staging area is kept at \(rig.staging.path)") }
        try finishTake(outcome, console: console)
        if let deliverItems { try Deliver.deliver(outcome.directory.path, items: deliverItems, codec: .prores) }
    }
}

struct ConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console",
        abstract: "Serve the operator's live console for a rig: frame-matched multiview, node status, takes, until Ctrl-C.",
        discussion: """
            Prints CONSOLE http://HOST:PORT/?token=TOKEN once it listens (127.0.0.1:8080 unless --listen says otherwise): \
            open that address; every request needs the token (the page keeps it in a cookie; scripts send \
            Authorization: Bearer TOKEN). Its JSON API is described at /openapi.json.
            """)

    @Option(help: "The rig file (YAML).") var rig: String
    @Option(help: "Where the console listens, HOST:PORT (a port of 0 picks a free one).") var listen: String = "127.0.0.1:8080"
    @OptionGroup var access: ConsoleAccessOptions
    @Option(help: "Directory that receives take directories (default: the rig's take.takes_dir, else ./takes).") var takesDir: String?
    @OptionGroup var preview: PreviewOptions
    @Flag(help: "Log the coordinator's debug output.") var verbose = false

    func run() async throws {
        bootstrapLogging(verbose)
        let address = try parseListen(listen)
        let settings = try preview.settings()
        let file = try loadRig(rig)
        let request = try takeRequest(file, name: nil, seconds: 10, takesDir: takesDir, fps: nil, size: nil, codec: nil)
        let consoleSettings = try access.settings(address)
        let prepared = try await preflightConsole(consoleSettings)
        try await serveConsole(spec: file.spec, template: request, settings: consoleSettings, prepared: prepared, preview: settings, console: Console())
    }
}

/// The preview tiles the console asks every camera for.
struct PreviewOptions: ParsableArguments {
    @Option(help: "Preview tile width in pixels, even, 64…1920 (0: no preview).") var previewWidth: Int = 480
    @Option(help: "Preview tiles per second per camera, 1…15.") var previewFps: Int = 5

    func settings() throws -> PreviewSettings {
        if previewWidth == 0 { return .off }
        let settings = PreviewSettings(width: previewWidth, fps: previewFps)
        if let problem = settings.problem { throw usageError("--preview-width/--preview-fps: \(problem)") }
        return settings
    }
}

/// HOST:PORT for the console; a usage error naming the flag otherwise.
func parseListen(_ text: String) throws -> (host: String, port: Int) {
    guard let address = HostPort.parse(text) else {
        throw usageError("--listen must be HOST:PORT, e.g. 127.0.0.1:8080 (got \(Echo.short(text))).")
    }
    return address
}

/// Who may use the console (CONTRACT §6b): its token and the host names it answers to.
struct ConsoleAccessOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Keep the console's token in FILE (made 0600 with a new random token if missing), so its address survives a restart; without it every start makes a new token.", valueName: "FILE"))
    var tokenFile: String?
    @Option(help: ArgumentHelp("A host name the console answers to besides its address (repeatable), e.g. the name in the operator's bookmark.", valueName: "NAME"))
    var allowHost: [String] = []
    @Option(help: ArgumentHelp("Seconds a request may take to arrive whole (head, then body) before its connection is closed.", visibility: .hidden))
    var requestTimeout: Double = 10
    @Option(help: ArgumentHelp("Serve HTTPS only, with this PEM certificate (chain); needs --tls-key.", valueName: "FILE"))
    var tlsCert: String?
    @Option(help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "FILE"))
    var tlsKey: String?

    func settings(_ address: (host: String, port: Int)) throws -> ConsoleServer.Settings {
        var settings = ConsoleServer.Settings(host: address.host, port: address.port, token: try token())
        for name in allowHost {
            guard !name.isEmpty, name.count <= 253, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-.:[]".contains($0)) }) else {
                throw usageError("--allow-host takes a host name or address, e.g. coord-laptop.local (got \(Echo.short(name))).")
            }
        }
        settings.allowedHosts = allowHost
        guard requestTimeout > 0, requestTimeout <= 3600 else { throw usageError("--request-timeout must be 0 < S ≤ 3600 seconds.") }
        settings.requestTimeout = .nanoseconds(Int64(requestTimeout * 1e9))
        switch (tlsCert, tlsKey) {
        case (let cert?, let key?): settings.tls = (cert, key)
        case (nil, nil): break
        default: throw usageError("--tls-cert and --tls-key go together: give both PEM files, or neither.")
        }
        return settings
    }

    /// The token: from --token-file (made if missing), else a new one.
    func token() throws -> String {
        guard let tokenFile else { return ConsoleGate.newToken() }
        let url = URL(fileURLWithPath: tokenFile)
        if FileManager.default.fileExists(atPath: url.path) {
            guard let data = FileManager.default.contents(atPath: url.path), let text = String(data: data, encoding: .utf8) else {
                throw CoordError(.usage, "--token-file \(tokenFile) cannot be read.")
            }
            let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if let problem = ConsoleGate.tokenProblem(token) { throw CoordError(.usage, "--token-file \(tokenFile): \(problem).") }
            if let mode = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.posixPermissions] as? Int, mode & 0o077 != 0 {
                FileHandle.standardError.write(Data("warning: --token-file \(tokenFile) can be read by other users (mode \(String(mode & 0o777, radix: 8))): chmod 600 it.\n".utf8))
            }
            return token
        }
        let token = ConsoleGate.newToken()
        // O_EXCL with mode 0600: the token is never readable by others, not even for an instant.
        let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw CoordError(.usage, "--token-file \(tokenFile) cannot be made: \(String(cString: strerror(errno))).") }
        defer { close(fd) }
        let line = Array((token + "\n").utf8)
        guard write(fd, line, line.count) == line.count else {
            throw CoordError(.usage, "--token-file \(tokenFile) cannot be written: \(String(cString: strerror(errno))).")
        }
        return token
    }
}

/// Checks the console can listen, before anything starts; exit 2 with the sentence naming the address otherwise.
func preflightConsole(_ settings: ConsoleServer.Settings) async throws -> ConsoleServer.Prepared {
    do {
        return try await ConsoleServer.preflight(settings)
    } catch {
        throw CoordError(.usage, error.sentence)
    }
}

/// Runs the live console over `spec` until Ctrl-C (SIGINT/SIGTERM through ServiceLifecycle).
func serveConsole(spec: RigSpec, template: TakeRequest, settings: ConsoleServer.Settings, prepared: ConsoleServer.Prepared,
                  preview: PreviewSettings, console: Console) async throws {
    let logger = Logger(label: "coord.console")
    let live = LiveRig(spec: spec, template: template, preview: preview, logger: logger)
    if !["127.0.0.1", "localhost", "::1"].contains(settings.host) {
        console.step("warning: the console listens on \(settings.host), beyond this machine: anyone who reaches it with its token can start and stop takes\(settings.tls == nil ? ", and without --tls-cert the token crosses the network in clear text" : "").")
    }
    do {
        try await ConsoleServer.run(rig: live, settings: settings, prepared: prepared, logger: logger) { listening in
            // One line scripts and tests read (CONTRACT §6b); the operator opens it.
            console.result("CONSOLE \(listening.url)")
            console.step("console: open the CONSOLE address above (Ctrl-C to stop)")
        }
    } catch let failure as ConsoleServer.ListenFailure {
        throw CoordError(.usage, failure.sentence)
    }
}

/// The part of a take `demo` and `start-take` share, once the nodes are running: the session, with
/// Ctrl-C handled. `abandon` runs on a second interrupt (or one before recording starts) and returns the
/// sentence printed before exiting 130.
func recordTake(endpoints: [String], names: [String: String] = [:], keys: [String: LinkKeys] = [:], request: TakeRequest, console: Console,
                abandon: @escaping @Sendable () async -> String,
                collectionInterrupted: @escaping @Sendable (URL) -> String) async throws -> TakeOutcome {
    let session = TakeSession(endpoints: endpoints, names: names, keys: keys, request: request, console: console, logger: Logger(label: "coord"))
    let interrupts = await handleInterrupts(session: session, abandon: abandon, collectionInterrupted: collectionInterrupted)
    defer { interrupts.cancel() }
    return try await session.run()
}

/// Prints a finished take's summary on stdout; a partial take exits 4 with a sentence naming what is missing.
func finishTake(_ outcome: TakeOutcome, console: Console) throws {
    if outcome.manifest.collection?.state == .pending {
        console.result("take \(outcome.manifest.takeID): recorded \(outcome.manifest.groups) groups × \(outcome.manifest.cameras.count) camera(s); not collected yet\n  \(outcome.directory.path)")
        return
    }
    console.result(TakeSummary.text(directory: outcome.directory.path, manifest: outcome.manifest, report: outcome.report))
    if outcome.manifest.status == .partial {
        throw CoordError(.partial, "the take is partial: \(outcome.manifest.partialCause).")
    }
}

/// Ctrl-C or SIGTERM while recording: stop every camera at one instant and collect as usual. Before the
/// recording starts, or a second time: `abandon` deals with the nodes, and coord leaves (exit 130). The signals
/// come through ServiceLifecycle's `UnixSignalsSequence` (no work in a signal handler); cancel the task after the
/// take to restore the default handling.
func handleInterrupts(session: TakeSession, abandon: @escaping @Sendable () async -> String,
                      collectionInterrupted: @escaping @Sendable (URL) -> String) async -> Task<Void, Never> {
    let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
    return Task {
        var count = 0
        for await _ in signals {
            count += 1
            if count == 1 && session.requestStop() {
                FileHandle.standardError.write(Data("\ncoord: interrupted; stopping every camera at one instant and collecting (interrupt again to abandon the take).\n".utf8))
                continue
            }
            // Recording is over: nothing is abandoned. Every node keeps what it has not seen verified, and the
            // partial copies here are resumed by the next collection.
            if let directory = session.collectingTake() {
                FileHandle.standardError.write(Data("\ncoord: interrupted while collecting; \(collectionInterrupted(directory))\n".utf8))
                Glibc.exit(130)
            }
            let outcome = await abandon()
            FileHandle.standardError.write(Data("\ncoord: interrupted; \(outcome)\n".utf8))
            Glibc.exit(130)
        }
    }
}

/// `work`'s result, or nil when it takes longer than `seconds` (it is cancelled then).
func withTimeout<T: Sendable>(seconds: Double, _ work: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await work() }
        group.addTask {
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// Loads a rig file for a command: warnings on stderr, a usage error (exit 2) in one sentence.
func loadRig(_ path: String) throws -> RigFile {
    let file = try RigFile.load(path)
    for warning in file.warnings { FileHandle.standardError.write(Data("coord: warning: \(warning)\n".utf8)) }
    return file
}

/// A usage or configuration error (exit 2) with its one sentence.
func usageError(_ sentence: String) -> CoordError { CoordError(.usage, sentence) }

struct StartTake: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start-take",
        abstract: "Record one take across the rig described by a rig file.",
        discussion: "Without --seconds it records until Ctrl-C, then stops every camera at one instant and collects.")

    /// How long a take without --seconds may run before it stops by itself.
    static let untilInterrupted: Double = 24 * 3600

    @Option(help: "The rig file (YAML).") var rig: String
    @Option(help: "Take name (default: the rig's take.name, else \"take\").") var name: String?
    @Option(parsing: .unconditional, help: "Seconds to record (default: until Ctrl-C, at most 24 h).") var seconds: Double?
    @Option(help: "Directory that receives the take directory (default: the rig's take.takes_dir, else ./takes).") var takesDir: String?
    @Option(help: "Frame rate (default: the rig's take.fps, else 30).") var fps: Int?
    @Option(help: "Frame size, WxH (default: the rig's take.size, else 640x480).") var size: String?
    @Option(help: "Codec: mjpeg, ffv1 or h264 (default: the rig's take.codec, else mjpeg).") var codec: String?
    @Flag(help: "When the rig is over budget, apply what `coord plan --fit` proposes (lower formats, cap frame rates, disable the lowest-priority cameras) instead of refusing.")
    var fit = false
    @Flag(help: "Leave the files on the nodes after recording; fetch them later with `coord collect`.") var collectLater = false
    @Flag(help: "Log the coordinator's debug output.") var verbose = false

    func run() async throws {
        bootstrapLogging(verbose)
        let console = Console()
        let file = try loadRig(rig)
        let spec = file.spec
        var request = try takeRequest(file, name: name, seconds: seconds ?? Self.untilInterrupted, takesDir: takesDir, fps: fps,
                                      size: size, codec: codec)
        request.untilStopped = seconds == nil
        request.fit = fit
        request.collectLater = collectLater
        console.step("rig \(rig): \(spec.nodes.count) node(s): \(spec.nodes.map(\.name).joined(separator: ", "))")
        if seconds == nil { console.step("recording until Ctrl-C (at most 24 h), then every camera stops at one instant") }
        let outcome: TakeOutcome
        do {
            outcome = try await recordTake(endpoints: spec.nodes.map(\.endpoint),
                                           names: Dictionary(spec.nodes.map { ($0.endpoint, $0.name) }) { first, _ in first },
                                           keys: spec.linkKeysByEndpoint, request: request, console: console) {
                // Nothing may keep recording once coord is gone: every node drops the take (keeping what it captured).
                let unreached = await withTimeout(seconds: 3) { await RigStatus.abandon(spec, reason: "the operator abandoned the take") }
                let missed = unreached ?? spec.nodes.map(\.name)
                return missed.isEmpty
                    ? "the take is abandoned; every node dropped it and keeps whatever it recorded in its staging area."
                    : "the take is abandoned, but \(missed.joined(separator: ", ")) could not be told and may still be recording."
            } collectionInterrupted: { [rig] directory in
                "the files stay on the nodes. Finish with: coord collect --rig \(rig) \(directory.path)"
            }
        }
        try finishTake(outcome, console: console)
        try Deliver.afterCollection(outcome, spec.take.deliver)
    }
}

/// The take a rig file and the command line ask for; a usage error (exit 2) in one sentence.
func takeRequest(_ file: RigFile, name: String?, seconds: Double, takesDir: String?, fps: Int?, size: String?,
                 codec: String?) throws -> TakeRequest {
    let spec = file.spec
    let sizeText = size ?? spec.take.size ?? "640x480"
    guard let (width, height) = RigSpec.parseSize(sizeText) else {
        throw usageError("--size must be WxH, e.g. 640x480 (got \(sizeText)).")
    }
    let takesDirectory: URL
    if let takesDir {
        takesDirectory = URL(fileURLWithPath: takesDir)
    } else if let fromRig = spec.take.takesDir {
        takesDirectory = URL(fileURLWithPath: fromRig, relativeTo: file.directory).standardizedFileURL
    } else {
        takesDirectory = URL(fileURLWithPath: "./takes")
    }
    var request = TakeRequest(name: name ?? spec.take.name ?? "take", seconds: seconds,
                              fps: fps ?? spec.take.fps ?? 30, width: width, height: height,
                              codec: codec ?? spec.take.codec ?? "mjpeg", takesDirectory: takesDirectory)
    for node in spec.nodes { if let cameras = node.cameras { request.camerasByEndpoint[node.endpoint] = cameras } }
    request.pressurePolicy = spec.pressure
    request.collectPolicy = spec.collect
    request.audioRequired = spec.take.audio == "required"
    if let problem = request.problem() { throw usageError(problem) }
    return request
}

struct Plan: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a rig's cost budgets before anything records: hardware cost per node and resource, and the longest take.",
        discussion: """
            Asks every node for its cameras, buses, calibrated encoder and disk, free disk and thermal zones, and prints \
            the budget table. Exits 0 when the rig fits, 3 when it is over budget (hardware cost 1.0 or more, or a \
            --seconds longer than the nodes can sustain). With --fit it proposes changes by camera priority (lower \
            formats, then frame-rate caps, then disabling the lowest-priority cameras) until the cost is below 1.0; \
            it changes nothing: `coord start-take --fit` applies them, or write them into the rig file.
            """)

    @Option(help: "The rig file (YAML).") var rig: String
    @Flag(help: "Propose changes that bring an over-budget rig under a cost of 1.0.") var fit = false
    @Option(parsing: .unconditional, help: "Check that a take this long fits the nodes' disks and thermal headroom.") var seconds: Double?
    @Option(help: "Frame rate (default: the rig's take.fps, else 30).") var fps: Int?
    @Option(help: "Frame size, WxH (default: the rig's take.size, else 640x480).") var size: String?
    @Option(help: "Codec: mjpeg, ffv1 or h264 (default: the rig's take.codec, else mjpeg).") var codec: String?

    func run() async throws {
        bootstrapLogging(false)
        let file = try loadRig(rig)
        var request = try takeRequest(file, name: nil, seconds: seconds ?? 1, takesDir: nil, fps: fps, size: size, codec: codec)
        request.untilStopped = seconds == nil
        let outcome = try await RigPlan.run(file.spec, request: request, fit: fit)
        print(outcome.text)
        if let refusal = outcome.refusal {
            throw CoordError(.overBudget, "\(refusal)")
        }
    }
}

struct RigStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Ask every node of a rig what it is doing.",
        discussion: "Exits 0 when every node answered, 1 when one did not.")

    @OptionGroup var query: RigQueryOptions

    func run() async throws {
        bootstrapLogging(false)
        let file = try query.load()
        let reports = await RigStatus.query(file.spec, timeout: query.timeout)
        print(RigStatus.table(reports))
        if let problem = RigStatus.problem(reports) {
            throw CoordError(.failure, "\(problem)")
        }
    }
}

/// `--rig` and `--timeout` of the commands that ask every node something and wait a bounded time.
struct RigQueryOptions: ParsableArguments {
    @Option(help: "The rig file (YAML).") var rig: String
    @Option(help: "Seconds to wait for each node's answer.") var timeout: Double = 3

    /// The rig file, after checking the timeout; exit 2 with one sentence otherwise.
    func load() throws -> RigFile {
        guard timeout > 0 else { throw usageError("--timeout must be positive (got \(timeout)).") }
        return try loadRig(rig)
    }
}

struct StopTake: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop-take",
        abstract: "Stop the take a rig is recording: every camera stops on one group, about 2 s from now.",
        discussion: """
        Works from any machine that reaches the nodes. The coord start-take that started the take sees the stop, \
        relays it to any node this command could not reach, and collects as usual. Exits 0 when every node of \
        the take acknowledged the stop (or nothing was recording), 1 otherwise, naming the node.
        """)

    @OptionGroup var query: RigQueryOptions

    func run() async throws {
        bootstrapLogging(false)
        let file = try query.load()
        let outcomes = try await RigStop.stop(file.spec, timeout: query.timeout)
        if outcomes.isEmpty {
            print("no node of the rig is recording; nothing to stop.")
            return
        }
        var failed = false
        for o in outcomes {
            if o.alreadyStopping {
                print("take \(o.takeID) already stops after group \(o.stopGroup - 1).")
            } else {
                print(String(format: "take %@: every camera stops after group %lld, in %.1f s.", o.takeID, o.stopGroup - 1, o.secondsAhead))
            }
            if !o.unreached.isEmpty {
                failed = true
                FileHandle.standardError.write(Data("coord: the stop did not reach \(o.unreached.joined(separator: "; ")); coord start-take relays it to the nodes it reaches.\n".utf8))
            }
        }
        if failed { throw ExitCode(1) }
    }
}

struct Collect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch whatever a take still lacks from the rig's nodes, verify it and rewrite the take's manifest and report.",
        discussion: """
        Safe to run again at any time: files already here with a matching checksum are left alone and partial \
        copies are resumed. Exits 0 when every file is here and verified, 4 when something is still missing \
        or damaged (the manifest names it).
        """)

    @Option(help: "The rig file (YAML) naming the take's nodes.") var rig: String
    @Argument(help: "The take directory (or a take id under the rig's takes directory).") var take: String
    @Flag(help: "Log the coordinator's debug output.") var verbose = false

    func run() async throws {
        bootstrapLogging(verbose)
        let console = Console()
        let file = try loadRig(rig)
        var directory = URL(fileURLWithPath: take)
        if !FileManager.default.fileExists(atPath: directory.path), !take.contains("/") {
            let base = file.spec.take.takesDir.map { URL(fileURLWithPath: $0, relativeTo: file.directory).standardizedFileURL }
                ?? URL(fileURLWithPath: "./takes")
            directory = base.appendingPathComponent(take, isDirectory: true)
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw usageError("take \(take) does not exist (no directory \(directory.path)).")
        }
        let manifest: TakeManifest
        let report: SyncReport
        (manifest, report) = try await TakeCollection.resume(file.spec, directory: directory, console: console)
        try finishTake(TakeOutcome(directory: directory, manifest: manifest, report: report), console: console)
        try Deliver.afterCollection(TakeOutcome(directory: directory, manifest: manifest, report: report), file.spec.take.deliver)
    }
}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a take's sync report.")

    @Argument(help: "The take directory.") var takeDirectory: String
    @Flag(help: "Print sync-report.json.") var json = false
    @Option(help: "Write the HTML report to this file.") var html: String?

    func run() throws {
        let dir = URL(fileURLWithPath: takeDirectory)
        let manifestURL = dir.appendingPathComponent("manifest.json")
        if FileManager.default.fileExists(atPath: manifestURL.path),
           !FileManager.default.fileExists(atPath: dir.appendingPathComponent("sync-report.json").path),
           let data = try? Data(contentsOf: manifestURL), let manifest = try? JSONDecoder().decode(TakeManifest.self, from: data),
           manifest.collection?.state == .pending {
            // Recorded, never collected: the report is made from the collected frames.
            throw CoordError(.failure, "take \(manifest.takeID) has not been collected yet, so it has no report; run coord collect --rig RIG.yaml \(takeDirectory).")
        }
        for file in ["manifest.json", "sync-report.json"]
        where !FileManager.default.fileExists(atPath: dir.appendingPathComponent(file).path) {
            throw CoordError(.usage, "\(takeDirectory) has no \(file); it is not a coord take directory.")
        }
        do {
            let manifestData = try Data(contentsOf: dir.appendingPathComponent("manifest.json"))
            let reportData = try Data(contentsOf: dir.appendingPathComponent("sync-report.json"))
            let manifest = try JSONDecoder().decode(TakeManifest.self, from: manifestData)
            let report = try JSONDecoder().decode(SyncReport.self, from: reportData)
            if json {
                FileHandle.standardOutput.write(reportData)
                print()
            } else {
                print(TakeSummary.text(directory: dir.path, manifest: manifest, report: report))
            }
            if let html {
                // Rendered afresh from the take's files, so an older take gets the current page.
                let page = SyncReportPage.html(takeDirectory: dir, manifest: manifest, report: report)
                do {
                    try Data(page.utf8).write(to: URL(fileURLWithPath: html), options: .atomic)
                } catch {
                    throw CoordError(.failure, "cannot write the HTML report to \(html): \(reason(error)).")
                }
            }
        } catch let error as CoordError {
            throw error
        } catch let error as DecodingError {
            throw CoordError(.usage, "\(takeDirectory) does not hold a readable coord take: \(decodingSentence(error)).")
        } catch {
            throw CoordError(.usage, "cannot read the take in \(takeDirectory): \(reason(error)).")
        }
    }
}

/// A JSON decoding failure as the end of a sentence: which key, and what is wrong with it.
func decodingSentence(_ error: DecodingError) -> String {
    func path(_ keys: [CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().trimmingCharacters(in: CharacterSet(charactersIn: "."))
    }
    switch error {
    case .keyNotFound(let key, let context): return "the key \(path(context.codingPath + [key])) is missing"
    case .typeMismatch(_, let context), .valueNotFound(_, let context):
        return "the value of \(path(context.codingPath)) has the wrong type"
    case .dataCorrupted(let context):
        return context.codingPath.isEmpty ? "it is not valid JSON" : "the value of \(path(context.codingPath)) is not valid"
    @unknown default: return "\(error)"
    }
}
