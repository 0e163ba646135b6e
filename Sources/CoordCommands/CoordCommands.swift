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
                      Keys.self, Discover.self, Deliver.self, Snap.self])

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
            fail(CommandLineFailure(program: "coord", sentence: failure.message, status: failure.exitCode))
        } catch {
            let code = exitCode(for: error)
            // --help, --version and an ExitCode a command chose have said what they had to.
            if error is ExitCode || code == .success { exit(withError: error) }
            fail(CommandLineFailure(program: "coord", parserMessage: message(for: error), isUsage: code == .validationFailure))
        }
    }
}

/// Says a failure on stderr and exits with its status.
func fail(_ failure: CommandLineFailure) -> Never {
    FileHandle.standardError.write(Data(failure.line.utf8))
    Foundation.exit(failure.status)
}

func bootstrapLogging(_ verbose: Bool) {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = verbose ? .debug : .error
        return handler
    }
}

/// The part of a take `demo` and `start-take` share, once the nodes are running: the session, with
/// Ctrl-C handled. `abandon` runs on a second interrupt (or one before recording starts) and returns the
/// sentence printed before exiting 130.
func recordTake(endpoints: [String], names: [String: String] = [:], keys: [String: LinkKeys] = [:], request: TakeRequest, console: Console,
                abandon: @escaping @Sendable () async -> String,
                collectionInterrupted: @escaping @Sendable (URL) -> String) async throws -> TakeOutcome {
    let session = TakeSession(endpoints: endpoints, names: names, keys: keys, request: request, console: console, logger: Logger(label: "coord"))
    let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
    // The take and the watch on its signals are siblings: the watch ends (and the signals' default handling is
    // back) when the take does.
    return try await withThrowingTaskGroup(of: TakeOutcome?.self) { group in
        group.addTask {
            await handleInterrupts(signals, session: session, abandon: abandon, collectionInterrupted: collectionInterrupted)
            return nil
        }
        group.addTask { try await session.run() }
        while let next = try await group.next() {
            guard let outcome = next else { continue }
            group.cancelAll()
            return outcome
        }
        throw CancellationError()
    }
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
/// come through ServiceLifecycle's `UnixSignalsSequence` (no work in a signal handler); returns when cancelled.
func handleInterrupts(_ signals: UnixSignalsSequence, session: TakeSession, abandon: @escaping @Sendable () async -> String,
                      collectionInterrupted: @escaping @Sendable (URL) -> String) async {
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

/// The codec `--codec` (or the rig file) names; a usage error in one sentence for any other name.
func videoCodec(_ name: String) throws -> VideoCodec {
    guard let codec = VideoCodec(rawValue: name) else { throw usageError("--codec must be \(VideoCodec.spelled) (got \(name)).") }
    return codec
}

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
    @Option(help: "Frame rate, \(frameRateHelp) (default: the rig's take.fps, else 30).") var fps: String?
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
func takeRequest(_ file: RigFile, name: String?, seconds: Double, takesDir: String?, fps: String?, size: String?,
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
    let rate = try fps.map { try frameRate($0) } ?? spec.take.rate ?? FrameRate(30)
    var request = TakeRequest(name: name ?? spec.take.name ?? "take", seconds: seconds,
                              fps: rate.nominal, width: width, height: height,
                              codec: try codec.map(videoCodec) ?? spec.take.codec ?? .mjpeg, takesDirectory: takesDirectory)
    request.setRate(rate)
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
    @Option(help: "Frame rate, \(frameRateHelp) (default: the rig's take.fps, else 30).") var fps: String?
    @Option(help: "Frame size, WxH (default: the rig's take.size, else 640x480).") var size: String?
    @Option(help: "Codec: mjpeg, ffv1 or h264 (default: the rig's take.codec, else mjpeg).") var codec: String?
    @Flag(help: "Plan a shot of stills (coord snap): its span's budget and its bytes against the disks.") var snap = false
    @Option(help: "With --snap: shots in the burst.") var count: Int = 1
    @Option(help: "With --snap: milliseconds between shots.") var every: Int?
    @Option(help: "With --snap: png, tiff or jpeg.") var format: String = "png"

    func run() async throws {
        bootstrapLogging(false)
        let file = try loadRig(rig)
        var request = try takeRequest(file, name: nil, seconds: seconds ?? 1, takesDir: nil, fps: fps, size: size, codec: codec)
        request.untilStopped = seconds == nil
        let outcome: RigPlan.Outcome
        if snap {
            request.untilStopped = false
            let shot = try snapPlan(count: count, every: every, fps: request.fps, size: nil, format: format)
            outcome = try await SnapPlanning.run(file.spec, request: request, plan: shot)
        } else {
            outcome = try await RigPlan.run(file.spec, request: request, fit: fit)
        }
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
