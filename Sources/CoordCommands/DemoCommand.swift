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


struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a complete local rig with synthetic cameras: N coord-node processes, one take, one take directory.")

    @Option(help: "Number of coord-node processes.") var nodes: Int = 3
    @Option(help: "Synthetic cameras per node.") var camerasPerNode: Int = 1
    @Option(parsing: .unconditional, help: "Seconds to record.") var seconds: Double = 5
    @Option(name: .customLong("fps"), help: "Frame rate, \(frameRateHelp).") var frameRate: String = "30"
    /// --fps's whole rate (30 at 29.97).
    var fps: Int { ((try? CoordCommands.frameRate(frameRate)) ?? FrameRate(30)).nominal }
    @Option(help: "Frame size, WxH.") var size: String = "640x480"
    @Option(help: "Codec: mjpeg, ffv1 or h264.") var codec: String = "mjpeg"
    @Option(help: "Directory that receives the take directory.") var takesDir: String = "./takes"
    @Option(help: "Node clock offsets are drawn from ±this many ms.") var clockOffsetMs: Double = 250
    @Option(help: "Node clock drifts are drawn from ±this many ppm.") var driftPpm: Double = 50
    @Option(help: "Buffer timestamp noise, µs standard deviation.") var timestampJitterUs: Double = 30
    @Option(help: "The synthetic cameras apply a frame-duration change this many frames after it is asked (a Raspberry Pi sensor under libcamera: about 3).")
    var sensorDelayFrames: Int = 0
    @Option(help: "The synthetic cameras run frame durations in whole lines of this many µs (a Pi sensor's line time; 0: any duration).")
    var sensorLineUs: Double = 0
    @Option(help: "Seed for the simulation's draws (random if not given).") var seed: UInt64?
    @Flag(help: "Record no sound (by default every node records one synthetic microphone).") var noAudio = false
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
    @Flag(help: "Take one synchronized still from every camera (coord snap) instead of recording a take.") var snap = false
    @Option(help: "With --snap: shots in the burst.") var count: Int = 1
    @Option(help: "With --snap: milliseconds between shots, a whole number of frame periods.") var every: Int?
    @Option(help: "With --snap: the still format, png, tiff or jpeg.") var format: String = "png"
    @Option(help: "Each camera's own size, WxH,WxH,…: the rig's cameras in order (node by node) take them in turn.")
    var cameraSizes: String?

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
        if let problem = FrameDurationTiming.problem(delayFrames: sensorDelayFrames, lineMicroseconds: sensorLineUs) {
            throw CoordError(.usage, problem)
        }
        let rate = try CoordCommands.frameRate(frameRate)
        var request = TakeRequest(name: name, seconds: seconds, fps: rate.nominal, width: width, height: height, codec: try videoCodec(codec),
                                  takesDirectory: URL(fileURLWithPath: takesDir), camerasPerNode: camerasPerNode)
        request.setRate(rate)
        request.overBudgetHint = "choose fewer cameras, a smaller --size, a lower --fps or another --codec"
        if let problem = request.problem() {
            throw CoordError(.usage, "\(problem)")
        }
        let shot: SnapPlan? = snap ? try snapPlan(count: count, every: every, fps: fps, size: nil, format: format) : nil
        if let shot { request = SnapSession.takeRequest(request, plan: shot) }
        let sizes = try cameraSizes.map(Self.sizes) ?? []
        guard let nodeBinary = DemoRig.findNodeBinary() else {
            throw CoordError(.failure, "cannot find the coord-node executable next to coord, on PATH or in $COORD_NODE.")
        }
        let seed = seed ?? UInt64.random(in: 0...UInt64(UInt32.max))
        var settings = DemoRig.Settings(nodes: nodes, camerasPerNode: camerasPerNode, clockOffsetMilliseconds: clockOffsetMs,
                                        driftPPM: driftPpm, timestampJitterMicroseconds: timestampJitterUs, seed: seed)
        if let calibration { settings.calibrationFile = URL(fileURLWithPath: calibration) }
        settings.secure = secure
        settings.sensorTiming = FrameDurationTiming(delayFrames: sensorDelayFrames, lineMicroseconds: sensorLineUs)
        settings.audio = !noAudio && !snap
        let rig = DemoRig(settings: settings, nodeBinary: nodeBinary, console: console)
        // The console's address and token first: one that cannot listen says so before any node starts.
        var consoleReady: (settings: ConsoleServer.Settings, prepared: ConsoleServer.Prepared)?
        if withConsole {
            let settings = try access.settings(address)
            consoleReady = (settings, try await preflightConsole(settings))
        }
        console.step("starting \(nodes) coord-node process(es) with \(camerasPerNode) synthetic camera(s)\(noAudio || snap ? "" : " and a synthetic microphone") each (seed \(seed))")
        if let (settings, prepared) = consoleReady {
            do {
                try rig.ensureCalibration()
                let endpoints = try rig.start()
                let spec = rig.spec(endpoints: endpoints)
                try await serveConsole(spec: spec, template: request, settings: settings, prepared: prepared, preview: try preview.settings(),
                                       console: console) { take in
                    // The demo's nodes end with it: what they recorded stays in their staging area.
                    rig.terminateNow()
                    guard let take else { return "no take was running; the local rig stops." }
                    return "take \(take.takeID ?? "") is abandoned; whatever the nodes recorded stays in \(rig.staging.path)."
                }
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
            if !sizes.isEmpty { request.camerasByEndpoint = Self.cameras(endpoints: endpoints, perNode: camerasPerNode, sizes: sizes) }
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
        if let shot { return try finishSnap(outcome, plan: shot, console: console) }
        try finishTake(outcome, console: console)
        if let deliverItems { try Deliver.deliver(outcome.directory.path, items: deliverItems, codec: .standard) }
    }

    /// `--camera-sizes`: each entry a WxH; a usage error naming the entry otherwise.
    static func sizes(_ text: String) throws -> [String] {
        let entries = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for entry in entries where RigSpec.parseSize(entry) == nil {
            throw CoordError(.usage, "--camera-sizes must be WxH,WxH,… e.g. 640x480,1280x720 (got \"\(entry)\").")
        }
        return entries
    }

    /// The demo's cameras (cam0… on every node), each with the next of `sizes` in turn.
    static func cameras(endpoints: [String], perNode: Int, sizes: [String]) -> [String: [RigSpec.Camera]] {
        var out: [String: [RigSpec.Camera]] = [:]
        for (n, endpoint) in endpoints.enumerated() {
            out[endpoint] = (0..<perNode).map { RigSpec.Camera(name: "cam\($0)", size: sizes[(n * perNode + $0) % sizes.count]) }
        }
        return out
    }
}
