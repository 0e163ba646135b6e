import CoordCore
import Foundation
import Platform
import Synchronization
import ZeroMQ
#if canImport(Glibc)
import Glibc
#endif

/// A complete local rig for `coord demo`: N real `coord-node` processes on loopback, each with K synthetic
/// cameras and a simulated local clock. Every process is stopped when the rig stops, on Ctrl-C, or when
/// this process dies (each node watches its parent).
// Sendable: `let`s, and what `start` draws and starts (the simulation, keys, processes) in `state`.
public final class DemoRig: Sendable {
    public struct Settings: Sendable {
        public var nodes: Int
        public var camerasPerNode: Int
        public var clockOffsetMilliseconds: Double
        public var driftPPM: Double
        public var timestampJitterMicroseconds: Double
        public var seed: UInt64
        /// This machine's calibration, shared by every demo node (they share its CPUs and disk); measured by
        /// `coord-node calibrate` the first time. nil: `DemoRig.defaultCalibrationFile(nodeBinary:)`.
        public var calibrationFile: URL?
        /// CURVE on every link, as on a real rig: each node gets its own certificate and serves only the demo's
        /// coordinator key (`coord demo --secure`).
        public var secure = false
        /// One synthetic microphone (`mic0`, SYNCCLICK v1) per node, its sample clock off by a rate drawn from
        /// ±`driftPPM` (CONTRACT §9); `coord demo --no-audio` leaves them out.
        public var audio = true
        /// When and in what steps the synthetic cameras apply a frame duration (`--sensor-delay-frames`, `--sensor-line-us`).
        public var sensorTiming = FrameDurationTiming.immediate
        public init(nodes: Int, camerasPerNode: Int, clockOffsetMilliseconds: Double, driftPPM: Double,
                    timestampJitterMicroseconds: Double, seed: UInt64) {
            self.nodes = nodes; self.camerasPerNode = camerasPerNode; self.clockOffsetMilliseconds = clockOffsetMilliseconds
            self.driftPPM = driftPPM; self.timestampJitterMicroseconds = timestampJitterMicroseconds; self.seed = seed
        }
    }

    /// What the simulation drew for one node (truth the coordinator never sees).
    public struct SimulatedNode: Sendable {
        public var name: String
        public var clockOffsetMicroseconds: Int64
        public var driftPPM: Double
        /// The synthetic microphone's sample-clock rate error, ppm; nil: no microphone.
        public var micRateErrorPPM: Double?
    }

    let settings: Settings
    let nodeBinary: String
    let console: Console
    public let staging: URL
    private struct State {
        var simulated: [SimulatedNode] = []
        var coordinatorKeys: CurveKeys?
        var nodePublicKeys: [String: String] = [:]
        var processes: [(process: Process, exited: DispatchSemaphore)] = []
    }
    private let state = Mutex(State())
    public var simulated: [SimulatedNode] { state.withLock { $0.simulated } }
    /// With `secure`: the coordinator's keys and each node's public key, once started.
    public var coordinatorKeys: CurveKeys? { state.withLock { $0.coordinatorKeys } }
    public var nodePublicKeys: [String: String] { state.withLock { $0.nodePublicKeys } }

    /// The rig the demo runs, as a rig file would describe it (keys included when secure).
    public func spec(endpoints: [String]) -> RigSpec {
        let nodePublicKeys = self.nodePublicKeys
        var spec = RigSpec(nodes: zip(simulated, endpoints).map {
            RigSpec.Node(name: $0.name, endpoint: $1, publicKey: nodePublicKeys[$0.name])
        })
        if let coordinatorKeys = self.coordinatorKeys { spec.security = .init(cert: keysDirectory.appendingPathComponent("coordinator.key_secret").path, keys: coordinatorKeys) }
        return spec
    }

    private var keysDirectory: URL { staging.appendingPathComponent("keys") }

    /// Writes the coordinator's pair and one per node (made by libzmq) under the staging area.
    private func makeKeys() throws -> URL {
        let authorized = keysDirectory.appendingPathComponent("authorized")
        do {
            try FileManager.default.createDirectory(at: authorized, withIntermediateDirectories: true)
            let coordinator = try CurveCertificate.writeNew(name: "coordinator", directory: keysDirectory.path)
            try FileManager.default.copyItem(atPath: coordinator.publicPath, toPath: authorized.appendingPathComponent("coordinator.key").path)
            let keys = CurveKeys(publicKey: coordinator.pair.publicKey, secretKey: coordinator.pair.secretKey)
            state.withLock { $0.coordinatorKeys = keys }
            for index in 1...settings.nodes {
                let node = try CurveCertificate.writeNew(name: "node-\(index)", directory: keysDirectory.path)
                let key = node.pair.publicKey
                state.withLock { $0.nodePublicKeys["node-\(index)"] = key }
            }
        } catch {
            throw CoordError(.failure, "cannot make the demo's keys in \(keysDirectory.path): \(error)")
        }
        return authorized
    }
    /// The host instant at which every simulated clock's offset holds exactly (they drift from there).
    public let clockReference = MonotonicClock.now()

    public init(settings: Settings, nodeBinary: String, console: Console) {
        self.settings = settings
        self.nodeBinary = nodeBinary
        self.console = console
        staging = FileManager.default.temporaryDirectory.appendingPathComponent("coord-demo-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
    }

    /// `$COORD_CALIBRATION`, else `calibration-<hash>.json` in `$XDG_CACHE_HOME/coord` (or `~/.cache/coord`), one
    /// per coord-node binary: a debug build encodes far slower than a release build, so each has its own.
    public static func defaultCalibrationFile(nodeBinary: String) -> URL {
        let env = ProcessInfo.processInfo.environment
        if let path = env["COORD_CALIBRATION"], !path.isEmpty { return URL(fileURLWithPath: path) }
        let cache = env["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache")
        // FNV-1a of the binary's resolved path: stable across runs, unlike Swift's hashValue.
        let path = URL(fileURLWithPath: nodeBinary).resolvingSymlinksInPath().path
        var hash: UInt32 = 2_166_136_261
        for byte in path.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return cache.appendingPathComponent("coord/calibration-\(String(hash, radix: 16)).json")
    }

    /// The calibration file the demo's nodes use.
    public var calibrationFile: URL { settings.calibrationFile ?? Self.defaultCalibrationFile(nodeBinary: nodeBinary) }

    /// Measures this machine once (`coord-node calibrate`, a few seconds) unless its calibration is stored.
    public func ensureCalibration() throws {
        let file = calibrationFile
        guard !FileManager.default.fileExists(atPath: file.path) else { return }
        console.step("calibrating this machine once (disk write and encoding, about 10 s); stored in \(file.path)")
        let scratch = staging.appendingPathComponent("calibrate")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: nodeBinary)
        process.arguments = ["calibrate", "--calibration", file.path, "--staging", scratch.path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        process.standardInput = FileHandle.nullDevice
        do {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try process.run()
        } catch {
            throw CoordError(.failure, "cannot calibrate this machine with \(nodeBinary): \(reason(error)).")
        }
        var lastLine = ""
        var buffer = Data()
        while true {
            let data = out.fileHandleForReading.availableData
            if data.isEmpty { break }
            buffer.append(data)
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                if !line.isEmpty { console.step("  \(line)"); lastLine = line }
            }
        }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: scratch)
        guard process.terminationStatus == 0 else {
            throw CoordError(.failure, "calibrating this machine failed: \(lastLine.isEmpty ? "coord-node calibrate exited \(process.terminationStatus)" : lastLine)")
        }
    }

    /// Where `coord-node` is: $COORD_NODE, next to this executable, or on PATH.
    public static func findNodeBinary() -> String? {
        if let env = ProcessInfo.processInfo.environment["COORD_NODE"], FileManager.default.isExecutableFile(atPath: env) { return env }
        if let me = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            let sibling = me.deletingLastPathComponent().appendingPathComponent("coord-node").path
            if FileManager.default.isExecutableFile(atPath: sibling) { return sibling }
        }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let candidate = "\(dir)/coord-node"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Starts every node and returns their endpoints once each has said READY.
    public func start() throws -> [String] {
        guard (1...128).contains(settings.nodes) else { throw CoordError(.usage, "--nodes must be between 1 and 128 (got \(settings.nodes)).") }
        guard (1...16).contains(settings.camerasPerNode) else {
            throw CoordError(.usage, "--cameras-per-node must be between 1 and 16 (got \(settings.camerasPerNode)).")
        }
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        let authorized = settings.secure ? try makeKeys() : nil
        var random = SeededRandom(seed: settings.seed)
        // The microphones' draws come from their own sequence, so a seed gives the same clocks with sound or without.
        var micRandom = SeededRandom(seed: settings.seed ^ 0x6D69_6372_6F70_686F)
        var readiness: [(String, ReadyLine)] = []
        let ports = Self.loopbackPorts(settings.nodes)
        for index in 1...settings.nodes {
            let name = "node-\(index)"
            let offset = Int64((Double.random(in: -1...1, using: &random) * settings.clockOffsetMilliseconds * 1000).rounded())
            let drift = Double.random(in: -1...1, using: &random) * settings.driftPPM
            let micRate = settings.audio ? Double.random(in: -1...1, using: &micRandom) * settings.driftPPM : nil
            let node = SimulatedNode(name: name, clockOffsetMicroseconds: offset, driftPPM: drift, micRateErrorPPM: micRate)
            state.withLock { $0.simulated.append(node) }
            let process = Process()
            let exited = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in exited.signal() }
            process.executableURL = URL(fileURLWithPath: nodeBinary)
            process.arguments = [
                "--name", name, "--endpoint", "tcp://127.0.0.1:\(ports.map { String($0[index - 1]) } ?? "*")",
                "--staging", staging.appendingPathComponent(name).path,
                // Each demo node's cameras share one simulated USB 3 bus, as on a capture box with USB cameras.
                "--synthetic", (0..<settings.camerasPerNode).map { "cam\($0)@usb1" }.joined(separator: ","),
                "--synthetic-bus", "usb1=5000",
                "--calibration", calibrationFile.path,
                // `--flag=value` so a negative value is not read as a flag.
                "--clock-offset-us=\(offset)", "--clock-drift-ppm=\(drift)",
                "--clock-reference-us=\(clockReference)",
                "--timestamp-jitter-us=\(settings.timestampJitterMicroseconds)",
                "--seed", "\(settings.seed &+ UInt64(index) &* 7_919)",
                "--parent-pid", "\(getpid())",
            ] + (authorized.map { ["--cert", keysDirectory.appendingPathComponent("\(name).key_secret").path, "--authorized", $0.path] } ?? [])
            if settings.sensorTiming != .immediate {
                process.arguments! += ["--sensor-delay-frames", "\(settings.sensorTiming.delayFrames)",
                                       "--sensor-line-us", "\(settings.sensorTiming.lineMicroseconds)"]
            }
            if let micRate {
                process.arguments! += ["--synthetic-mic", "mic0", "--mic-rate-error-ppm=\(micRate)"]
            }
            let out = Pipe()
            process.standardOutput = out
            let logURL = staging.appendingPathComponent("\(name).log")
            FileManager.default.createFile(atPath: logURL.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: logURL)
            process.standardInput = FileHandle.nullDevice
            do {
                try process.run()
            } catch {
                stop()
                throw CoordError(.failure, "cannot start \(nodeBinary) for \(name): \(reason(error)).")
            }
            state.withLock { $0.processes.append((process, exited)) }
            readiness.append((name, ReadyLine(out.fileHandleForReading)))
        }
        var endpoints: [String] = []
        let deadline = Date().addingTimeInterval(15)
        for (name, ready) in readiness {
            guard let endpoint = ready.wait(until: deadline) else {
                let log = (try? String(contentsOf: staging.appendingPathComponent("\(name).log"), encoding: .utf8)) ?? ""
                stop()
                let lines = log.split(separator: "\n").map(String.init)
                let telling = lines.first { $0.contains("rror") } ?? lines.last ?? "no output"
                let what = ready.exited ? "exited before it was ready" : "did not become ready within 15 s"
                throw CoordError(.failure, "node \(name) \(what) (its log says: \(telling.trimmingCharacters(in: .whitespaces))).")
            }
            endpoints.append(endpoint)
        }
        return endpoints
    }

    /// A free loopback port for each node, so a node restarted with the same arguments comes back where the rig
    /// (and a console following it) looks for it, with the port after it free too: a node publishes its preview
    /// there, and with it taken (by anything: another node's control port, a test's socket) it records without
    /// one and the console never completes a set. Bound all at once (so no two overlap), then let go before the
    /// nodes bind them; nil (each node picks its own) if they cannot be had.
    static func loopbackPorts(_ count: Int) -> [Int]? {
        let context = ZMQContext()
        var sockets: [ZMQSocket] = []
        defer { sockets.forEach { $0.close() } }
        var ports: [Int] = []
        var tries = 0
        while ports.count < count {
            tries += 1
            guard tries <= 64 * count, let socket = try? context.makeSocket(.router), let bound = try? socket.bind("tcp://127.0.0.1:*"),
                  let port = bound.split(separator: ":").last.flatMap({ Int($0) }) else { return nil }
            sockets.append(socket)
            guard port < 65535, let beside = try? context.makeSocket(.router) else { continue }
            sockets.append(beside)
            // Taken: this port stays held (never picked again) and another is tried.
            guard (try? beside.bind("tcp://127.0.0.1:\(port + 1)")) != nil else { continue }
            ports.append(port)
        }
        return ports
    }

    /// The simulation's truth as JSON, for benchmarks that score the clock estimates (`coord demo --truth-file`).
    public func truthJSON() -> Data {
        let nodes = simulated.map { node -> [String: Any] in
            var n: [String: Any] = ["name": node.name, "clock_offset_us": node.clockOffsetMicroseconds, "drift_ppm": node.driftPPM]
            if let rate = node.micRateErrorPPM { n["mics"] = [["mic": "mic0", "rate_error_ppm": rate]] }
            return n
        }
        let object: [String: Any] = ["clock_reference_us": clockReference, "nodes": nodes]
        return (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])) ?? Data()
    }

    /// Stops every node (SIGTERM, then SIGKILL after 5 s) and removes their staging area unless asked to
    /// keep it (a partial take: whatever the nodes still hold stays for the operator).
    public func stop(keepStaging: Bool = false) {
        let all = state.withLock { s in
            defer { s.processes = [] }
            return s.processes
        }
        for p in all where p.process.isRunning { kill(p.process.processIdentifier, SIGTERM) }
        let deadline = DispatchTime.now() + .seconds(5)
        for p in all where p.exited.wait(timeout: deadline) == .timedOut {
            kill(p.process.processIdentifier, SIGKILL)
            p.process.waitUntilExit()
        }
        if !keepStaging { try? FileManager.default.removeItem(at: staging) }
    }

    /// Sends SIGTERM to every node without waiting (signal-handler path).
    public func terminateNow() {
        let all = state.withLock { $0.processes }
        for p in all where p.process.isRunning { kill(p.process.processIdentifier, SIGTERM) }
    }
}

/// Reads a node's stdout on a thread until its `READY <endpoint>` line.
final class ReadyLine: Sendable {
    private struct Seen {
        var endpoint: String?
        var closed = false
    }
    private let seen = Mutex(Seen())
    /// Signalled once the line is read or the output has closed (whichever is first), then kept signalled.
    private let settled = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        let thread = Thread { [self] in
            var buffer = Data()
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                buffer.append(data)
                if let text = String(data: buffer, encoding: .utf8), let line = text.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }) {
                    let endpoint = String(line.dropFirst(6)).trimmingCharacters(in: .whitespaces)
                    let first = seen.withLock { s in
                        defer { s.endpoint = endpoint }
                        return s.endpoint == nil && !s.closed
                    }
                    if first { settled.signal() }
                }
            }
            let first = seen.withLock { s in
                defer { s.closed = true }
                return s.endpoint == nil && !s.closed
            }
            if first { settled.signal() }
        }
        thread.start()
    }

    var exited: Bool { seen.withLock { $0.closed && $0.endpoint == nil } }

    func wait(until deadline: Date) -> String? {
        if settled.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow)) == .success {
            settled.signal()  // for the next caller
        }
        return seen.withLock { $0.endpoint }
    }
}
