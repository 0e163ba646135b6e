import ArgumentParser
import CoordCore
import Coordinator
import Foundation
import Logging
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// coord: the coordinator CLI the operator runs on the control machine.
@main
struct Coord: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coord",
        abstract: "Record one synchronized multi-camera take across many capture nodes.",
        subcommands: [Demo.self, Report.self])

    /// Parses and runs, mapping ArgumentParser's usage errors (64) to CONTRACT §1's exit code 2.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure {
                FileHandle.standardError.write(Data("coord: \(message(for: error)) (see coord --help).\n".utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

/// Turns a thrown error into CONTRACT §1's exit code with one sentence on stderr.
func exitStatus(for error: Error) -> ExitCode {
    if let e = error as? CoordError {
        FileHandle.standardError.write(Data("coord: \(e.message)\n".utf8))
        return ExitCode(e.exitCode)
    }
    FileHandle.standardError.write(Data("coord: \(error)\n".utf8))
    return ExitCode(1)
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
    @Option(help: "Seconds to record.") var seconds: Double = 5
    @Option(help: "Frame rate.") var fps: Int = 30
    @Option(help: "Frame size, WxH.") var size: String = "640x480"
    @Option(help: "Codec: mjpeg, ffv1 or h264.") var codec: String = "mjpeg"
    @Option(help: "Directory that receives the take directory.") var takesDir: String = "./takes"
    @Option(help: "Node clock offsets are drawn from ±this many ms.") var clockOffsetMs: Double = 250
    @Option(help: "Node clock drifts are drawn from ±this many ppm.") var driftPpm: Double = 50
    @Option(help: "Buffer timestamp noise, µs standard deviation.") var timestampJitterUs: Double = 30
    @Option(help: "Seed for the simulation's draws (random if not given).") var seed: UInt64?
    @Option(help: "Take name.") var name: String = "demo"
    @Flag(help: "Log the coordinator's debug output.") var verbose = false

    func run() async throws {
        bootstrapLogging(verbose)
        let console = Console()
        let parts = size.lowercased().split(separator: "x")
        guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]), width > 0, height > 0 else {
            FileHandle.standardError.write(Data("coord: --size must be WxH, e.g. 640x480 (got \(size)).\n".utf8))
            throw ExitCode(2)
        }
        guard clockOffsetMs >= 0, driftPpm >= 0, timestampJitterUs >= 0 else {
            FileHandle.standardError.write(Data("coord: --clock-offset-ms, --drift-ppm and --timestamp-jitter-us must not be negative.\n".utf8))
            throw ExitCode(2)
        }
        let request = TakeRequest(name: name, seconds: seconds, fps: fps, width: width, height: height, codec: codec,
                                  takesDirectory: URL(fileURLWithPath: takesDir), camerasPerNode: camerasPerNode)
        if let problem = request.problem() {
            FileHandle.standardError.write(Data("coord: \(problem)\n".utf8))
            throw ExitCode(2)
        }
        guard let nodeBinary = DemoRig.findNodeBinary() else {
            FileHandle.standardError.write(Data("coord: cannot find the coord-node executable next to coord, on PATH or in $COORD_NODE.\n".utf8))
            throw ExitCode(1)
        }
        let seed = seed ?? UInt64.random(in: 0...UInt64(UInt32.max))
        let rig = DemoRig(settings: .init(nodes: nodes, camerasPerNode: camerasPerNode, clockOffsetMilliseconds: clockOffsetMs,
                                          driftPPM: driftPpm, timestampJitterMicroseconds: timestampJitterUs, seed: seed),
                          nodeBinary: nodeBinary, console: console)
        console.step("starting \(nodes) coord-node process(es) with \(camerasPerNode) synthetic camera(s) each (seed \(seed))")
        let outcome: TakeOutcome
        let interrupts: [DispatchSourceSignal]
        do {
            let endpoints = try rig.start()
            let session = TakeSession(endpoints: endpoints, request: request, console: console, logger: Logger(label: "coord"))
            interrupts = handleInterrupts(session: session, rig: rig)
            outcome = try await session.run()
        } catch {
            rig.stop()
            throw exitStatus(for: error)
        }
        interrupts.forEach { $0.cancel() }
        let partial = outcome.manifest.status == .partial
        rig.stop(keepStaging: partial)
        if partial { console.step("the nodes' staging area is kept at \(rig.staging.path)") }
        console.result(TakeSummary.text(directory: outcome.directory.path, manifest: outcome.manifest, report: outcome.report))
        if outcome.manifest.status == .partial {
            let missing = outcome.manifest.events.first { ["incomplete", "node-failed", "camera-error", "collect-failed", "node-unfinished"].contains($0.kind) }
            FileHandle.standardError.write(Data("coord: the take is partial: \(missing.map { "\($0.node)/\($0.camera) \($0.detail)" } ?? "see manifest.json").\n".utf8))
            throw ExitCode(4)
        }
    }
}

/// Ctrl-C or SIGTERM while recording: stop every camera at one instant and collect as usual. Before the
/// recording starts, or a second time: stop the local rig's processes (they finalize open files) and leave.
func handleInterrupts(session: TakeSession, rig: DemoRig) -> [DispatchSourceSignal] {
    let count = InterruptCount()
    return [SIGINT, SIGTERM].map { (number: Int32) -> DispatchSourceSignal in
        _ = Glibc.signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler {
            // Signals arriving together are coalesced into one event; `data` says how many there were.
            if count.add(Int(source.data)) == 1 && session.requestStop() {
                FileHandle.standardError.write(Data("\ncoord: interrupted; stopping every camera at one instant and collecting (interrupt again to abandon the take).\n".utf8))
                return
            }
            // Exit at once: the nodes finalize their open files on SIGTERM and exit by themselves.
            rig.terminateNow()
            FileHandle.standardError.write(Data("\ncoord: interrupted; the take is abandoned; whatever the nodes recorded stays in \(rig.staging.path).\n".utf8))
            Glibc.exit(130)
        }
        source.resume()
        return source
    }
}

final class InterruptCount: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add(_ k: Int) -> Int { lock.lock(); defer { lock.unlock() }; n += max(1, k); return n }
}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a take's sync report.")

    @Argument(help: "The take directory.") var takeDirectory: String
    @Flag(help: "Print sync-report.json.") var json = false
    @Option(help: "Write the HTML report to this file.") var html: String?

    func run() throws {
        let dir = URL(fileURLWithPath: takeDirectory)
        for file in ["manifest.json", "sync-report.json"]
        where !FileManager.default.fileExists(atPath: dir.appendingPathComponent(file).path) {
            FileHandle.standardError.write(Data("coord: \(takeDirectory) has no \(file); it is not a coord take directory.\n".utf8))
            throw ExitCode(2)
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
                try FileManager.default.copyItem(at: dir.appendingPathComponent("sync-report.html"), to: URL(fileURLWithPath: html))
            }
        } catch let error as DecodingError {
            FileHandle.standardError.write(Data("coord: \(takeDirectory) does not hold a readable coord take: \(error).\n".utf8))
            throw ExitCode(2)
        } catch {
            FileHandle.standardError.write(Data("coord: cannot read the take in \(takeDirectory): \(reason(error)).\n".utf8))
            throw ExitCode(2)
        }
    }
}
