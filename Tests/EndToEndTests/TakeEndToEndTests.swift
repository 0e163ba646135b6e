@testable import Coordinator
import CoordCore
import CoordWire
import Foundation
import Logging  // TakeSession's logger type (swift-log, built for Coordinator)
import Testing
import ZeroMQ
#if canImport(Glibc)
import Glibc
#endif

/// The Coordinator library driving real `coord-node` processes on loopback. Serialized: takes are timed
/// against the wall clock and the machine is small.
@Suite("End to end: coordinator against real coord-node processes", .serialized, .timeLimit(.minutes(3)))
final class TakeEndToEndTests {
    let scratch: URL
    var takes: URL { scratch.appendingPathComponent("takes", isDirectory: true) }

    init() throws {
        scratch = try E2E.makeScratch()
        try FileManager.default.createDirectory(at: takes, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: scratch)
    }

    // MARK: helpers

    /// Starts one node per name (each with its own staging directory), runs `body`, and always stops them.
    func withNodes<T: Sendable>(_ names: [String], _ body: ([NodeProcess]) async throws -> T) async throws -> T {
        var nodes: [NodeProcess] = []
        do {
            for (index, name) in names.enumerated() {
                let staging = scratch.appendingPathComponent("staging-\(index)-\(name)", isDirectory: true)
                let log = scratch.appendingPathComponent("node-\(index)-\(name).log")
                nodes.append(try await E2E.offPool { try NodeProcess.start(name: name, staging: staging, log: log) })
            }
            let result = try await body(nodes)
            try await stop(nodes)
            return result
        } catch {
            try? await stop(nodes)
            throw error
        }
    }

    private func stop(_ nodes: [NodeProcess]) async throws {
        let all = nodes
        let killed = try await E2E.offPool { all.filter { !$0.stop() }.map(\.name) }
        for name in killed { Issue.record("node \(name) did not exit within 10 s of SIGTERM; it was killed") }
    }

    func request(seconds: Double = 1, fps: Int = 30, width: Int = 320, height: Int = 240) -> TakeRequest {
        TakeRequest(name: "e2e", seconds: seconds, fps: fps, width: width, height: height, codec: .mjpeg, takesDirectory: takes)
    }

    func session(_ endpoints: [String], _ request: TakeRequest) -> TakeSession {
        let console = Console(quiet: true)
        return TakeSession(endpoints: endpoints, request: request, console: console,
                           logger: Logger(label: "e2e") { _ in SwiftLogNoOpLogHandler() })
    }

    /// The node's own report of its state, asked over a fresh link.
    func status(of node: NodeProcess) async throws -> Coord_V1_Status {
        let context = ZMQContext()
        let link = try NodeLink(endpoint: node.endpoint, context: context)
        defer { link.close() }
        let (reply, _) = try await link.request(.statusRequest(Coord_V1_StatusRequest()), timeout: 5, what: "a status request")
        guard case .status(let status) = reply.body else { throw TestFailure("node \(node.name) answered status with \(reply)") }
        return status
    }

    func logs(_ nodes: [NodeProcess]) -> String {
        nodes.map { "--- \($0.name) stderr:\n\($0.logText.suffix(3000))" }.joined(separator: "\n")
    }

    // MARK: 1. a complete take

    @Test("a 1 s take on two nodes is complete, checksummed, reported, and released from staging")
    func completeTake() async throws {
        try await withNodes(["node-a", "node-b"]) { nodes in
            let seconds = 1.0, fps = 30
            let outcome: TakeOutcome
            do {
                outcome = try await session(nodes.map(\.endpoint), request(seconds: seconds, fps: fps)).run()
            } catch {
                Issue.record("the take failed: \(error)\n\(logs(nodes))")
                return
            }
            let manifest = outcome.manifest
            let groups = Int64(seconds * Double(fps))
            #expect(manifest.status == .complete, "events: \(manifest.events)")
            #expect(manifest.groups == groups)
            #expect(manifest.framePeriodMicroseconds == 33_333)
            #expect(outcome.report.groups == groups)

            // The one new take directory, with the contract's files.
            #expect(E2E.contents(takes) == [outcome.directory.lastPathComponent])
            #expect(outcome.directory.lastPathComponent == manifest.takeID)
            let top = Set(E2E.contents(outcome.directory))
            #expect(top.isSuperset(of: ["manifest.json", "sync-report.json", "sync-report.html", "node-a", "node-b"]), "\(top)")

            // Every camera: all groups, both files, bytes and SHA-256 as the manifest says.
            #expect(manifest.cameras.map { "\($0.node)/\($0.camera)" }.sorted() == ["node-a/cam0", "node-b/cam0"])
            for camera in manifest.cameras {
                #expect(camera.frames == groups, "\(camera.node)/\(camera.camera)")
                #expect(camera.width == 320 && camera.height == 240 && camera.fps == fps && camera.codec == "mjpeg")
                #expect(camera.files.map(\.path).sorted() == ["\(camera.node)/cam0.frames.csv", "\(camera.node)/cam0.mkv"])
                for file in camera.files {
                    let url = outcome.directory.appendingPathComponent(file.path)
                    let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.uint64Value
                    #expect(size == file.bytes, "\(file.path)")
                    #expect(file.bytes > 0, "\(file.path)")
                    #expect(try E2E.sha256sum(url) == file.sha256, "\(file.path)")
                }
                // The frames table on disk: a header and one row per group.
                let csv = try String(contentsOf: outcome.directory.appendingPathComponent("\(camera.node)/cam0.frames.csv"), encoding: .utf8)
                let lines = csv.split(whereSeparator: \.isNewline)
                #expect(lines.first == "frame,group,center_us,flags")
                #expect(lines.count == Int(groups) + 1, "\(camera.node)/cam0.frames.csv")
            }
            // No partial downloads left behind.
            #expect(E2E.regularFiles(under: outcome.directory).filter { $0.hasSuffix(".part") }.isEmpty)

            // manifest.json on disk is the outcome's manifest, in the contract's format.
            let onDisk = try JSONDecoder().decode(TakeManifest.self, from: Data(contentsOf: outcome.directory.appendingPathComponent("manifest.json")))
            #expect(onDisk == manifest)
            #expect(onDisk.format == "coord.take/1")
            let reportJSON = try JSONSerialization.jsonObject(with: Data(contentsOf: outcome.directory.appendingPathComponent("sync-report.json"))) as? [String: Any]
            #expect((reportJSON?["groups"] as? NSNumber)?.int64Value == groups)
            let html = try String(contentsOf: outcome.directory.appendingPathComponent("sync-report.html"), encoding: .utf8)
            #expect(html.contains(manifest.takeID))

            // Confirmed files were released: nothing of the take is left in either node's staging area.
            for node in nodes {
                #expect(E2E.regularFiles(under: node.staging).isEmpty, "node \(node.name) still holds \(E2E.regularFiles(under: node.staging))")
                #expect(!FileManager.default.fileExists(atPath: node.staging.appendingPathComponent(manifest.takeID).path),
                        "node \(node.name) kept its take directory")
                let s = try await status(of: node)
                #expect(s.state == .finished || s.state == .idle, "node \(node.name) is \(s.state)")
            }
        }
    }

    // MARK: 2. a node that is not there

    @Test("an endpoint where no node listens fails the handshake, naming it, within the timeout")
    func unreachableEndpoint() async throws {
        let dead = "tcp://127.0.0.1:\(try E2E.freeLoopbackPort())"
        try await withNodes(["node-a"]) { nodes in
            let began = ContinuousClock.now
            let error = await #expect(throws: CoordError.self) {
                _ = try await session([nodes[0].endpoint, dead], request()).run()
            }
            let elapsed = ContinuousClock.now - began
            #expect(elapsed < .seconds(15), "run() took \(elapsed)")
            #expect(error?.message.contains(dead) == true, "message: \(error?.message ?? "-")")
            #expect(error?.message.contains("handshake") == true, "message: \(error?.message ?? "-")")
            #expect(E2E.contents(takes).isEmpty, "a take directory was created: \(E2E.contents(takes))")
            // The real node was only greeted: it is still idle.
            let state = try await status(of: nodes[0]).state
            #expect(state == .idle)
        }
    }

    // MARK: 3. arming is all or nothing

    @Test("a node that cannot create its staging directory fails arming; the rig returns to idle and can record again")
    func armFailureIsAllOrNothing() async throws {
        try await withNodes(["node-a", "node-b"]) { nodes in
            let healthy = nodes[0], broken = nodes[1]
            // node-b's staging root becomes a regular file: mkdir <staging>/<take>/node-b fails at arm.
            try FileManager.default.removeItem(at: broken.staging)
            #expect(FileManager.default.createFile(atPath: broken.staging.path, contents: Data("not a directory\n".utf8)))

            let error = await #expect(throws: CoordError.self) {
                _ = try await session(nodes.map(\.endpoint), request()).run()
            }
            #expect(error?.message.contains("node-b") == true, "message: \(error?.message ?? "-")")
            // The cause is the real one from the system, not Foundation's generic wording.
            #expect(error?.message.contains("Not a directory") == true, "message: \(error?.message ?? "-")")
            #expect(error?.message.contains("node-a") == false, "blames the healthy node: \(error?.message ?? "-")")
            #expect(E2E.contents(takes).isEmpty, "a take directory was left: \(E2E.contents(takes))")

            // Both nodes were aborted back to idle, and the healthy one left no staging behind.
            for node in nodes {
                let s = try await status(of: node)
                #expect(s.state == .idle, "node \(node.name) is \(s.state) (\(s.detail))")
                #expect(s.takeID.isEmpty, "node \(node.name) still holds take \(s.takeID)")
            }
            #expect(E2E.regularFiles(under: healthy.staging).isEmpty, "\(E2E.regularFiles(under: healthy.staging))")
            #expect(E2E.contents(healthy.staging).isEmpty, "\(E2E.contents(healthy.staging))")

            // Once node-b's disk is fixed, the same rig records a complete take.
            try FileManager.default.removeItem(at: broken.staging)
            do {
                let outcome = try await session(nodes.map(\.endpoint), request()).run()
                #expect(outcome.manifest.status == .complete, "events: \(outcome.manifest.events)")
                #expect(outcome.manifest.cameras.count == 2)
                #expect(E2E.contents(takes) == [outcome.directory.lastPathComponent])
            } catch {
                Issue.record("the take after recovery failed: \(error)\n\(logs(nodes))")
            }
        }
    }

    // MARK: 4. duplicate names

    @Test("two nodes with the same name are refused as a usage error naming the name")
    func duplicateNodeNames() async throws {
        try await withNodes(["same", "same"]) { nodes in
            let error = await #expect(throws: CoordError.self) {
                _ = try await session(nodes.map(\.endpoint), request()).run()
            }
            #expect(error?.kind == .usage)
            #expect(error?.message.contains("same") == true, "message: \(error?.message ?? "-")")
            #expect(E2E.contents(takes).isEmpty)
            for node in nodes {
                let state = try await status(of: node).state
                #expect(state == .idle, "node \(node.name)")
            }
        }
    }

    @Test("one node reached through two spellings of its endpoint is named as listed twice, not as two nodes")
    func oneNodeListedTwice() async throws {
        try await withNodes(["n1"]) { nodes in
            let endpoint = nodes[0].endpoint
            let other = endpoint.replacingOccurrences(of: "127.0.0.1", with: "localhost")
            #expect(other != endpoint)
            let error = await #expect(throws: CoordError.self) {
                _ = try await session([endpoint, other], request()).run()
            }
            #expect(error?.kind == .usage)
            #expect(error?.message.contains("lists node n1 twice") == true && error?.message.contains(other) == true,
                    "message: \(error?.message ?? "-")")
            #expect(E2E.contents(takes).isEmpty)
        }
    }

    // MARK: 5. settings the camera cannot do

    struct Unsupported: Sendable, CustomTestStringConvertible {
        var fps: Int, width: Int, height: Int
        /// Words the refusal must contain besides the node and camera.
        var mentions: String
        var testDescription: String { "\(width)x\(height) at \(fps) fps" }
    }

    @Test("settings the camera does not offer are refused before anything is created, naming node and camera",
          arguments: [
              Unsupported(fps: 120, width: 320, height: 240, mentions: "120 fps"),  // faster than the sensor's 60
              Unsupported(fps: 30, width: 800, height: 600, mentions: "800x600"),   // a size it does not list
              Unsupported(fps: 30, width: 100, height: 100, mentions: "100x100"),   // smaller than the stripe
          ])
    func unsupportedSettings(_ case_: Unsupported) async throws {
        try await withNodes(["node-a"]) { nodes in
            let node = nodes[0]
            let error = await #expect(throws: CoordError.self) {
                _ = try await session([node.endpoint], request(fps: case_.fps, width: case_.width, height: case_.height)).run()
            }
            #expect(error?.kind == .usage)
            #expect(error?.message.contains("node-a/cam0") == true, "message: \(error?.message ?? "-")")
            #expect(error?.message.contains(case_.mentions) == true, "message: \(error?.message ?? "-")")
            #expect(E2E.contents(takes).isEmpty, "a take directory was created: \(E2E.contents(takes))")
            let before = try await status(of: node).state
            #expect(before == .idle)

            // The node itself refuses the same configuration if a coordinator sends it anyway.
            let context = ZMQContext()
            let link = try NodeLink(endpoint: node.endpoint, context: context)
            defer { link.close() }
            var configure = Coord_V1_Configure()
            configure.takeID = "20250101-000000-e2e-abcdef"
            configure.cameras = [CameraSettings(camera: "cam0", ordinal: 0, width: case_.width, height: case_.height,
                                                fps: case_.fps, codec: .mjpeg).wire]
            let refusal = await #expect(throws: CoordError.self) {
                _ = try await link.request(.configure(configure), timeout: 5, what: "the configuration")
            }
            #expect(refusal?.message.contains("node-a/cam0") == true, "message: \(refusal?.message ?? "-")")
            let after = try await status(of: node).state
            #expect(after == .idle)
        }
    }

    @Test("a frame rate outside 1…240 is a usage error naming --fps, before any node is contacted")
    func frameRateOutOfRange() async throws {
        // No node at this endpoint: the request must be refused before the handshake would time out.
        let dead = "tcp://127.0.0.1:\(try E2E.freeLoopbackPort())"
        let began = ContinuousClock.now
        let error = await #expect(throws: CoordError.self) {
            _ = try await session([dead], request(fps: 1000)).run()
        }
        #expect(ContinuousClock.now - began < .seconds(2))
        #expect(error?.kind == .usage)
        #expect(error?.message.contains("--fps") == true, "message: \(error?.message ?? "-")")
        #expect(error?.message.contains("1000") == true, "message: \(error?.message ?? "-")")
        #expect(E2E.contents(takes).isEmpty)
    }

    // MARK: 6. coord-node's own refusals

    @Test("coord-node refuses an invalid node name: exit 2 and one stderr line naming it",
          arguments: ["bad/name", "..", "has space", String(repeating: "x", count: 65)])
    func nodeRefusesInvalidName(_ name: String) throws {
        let staging = scratch.appendingPathComponent("staging-bad")
        let run = try ToolRun.run(E2E.nodeBinary, ["--name", name, "--endpoint", "tcp://127.0.0.1:*", "--staging", staging.path,
                                                    "--synthetic", "cam0", "--parent-pid", "\(getpid())"], timeout: 20)
        #expect(run.status == 2, "stderr: \(run.stderr)")
        let lines = run.stderr.split(whereSeparator: \.isNewline)
        #expect(lines.count == 1, "stderr: \(run.stderr)")
        #expect(lines.first?.contains(name) == true, "stderr: \(run.stderr)")
        #expect(!run.stdout.contains("READY"), "stdout: \(run.stdout)")
    }

    @Test("coord-node with no cameras exits 2 with one sentence saying so")
    func nodeRefusesNoCameras() throws {
        let staging = scratch.appendingPathComponent("staging-none")
        let run = try ToolRun.run(E2E.nodeBinary, ["--name", "node-x", "--endpoint", "tcp://127.0.0.1:*", "--staging", staging.path,
                                                    "--parent-pid", "\(getpid())"], timeout: 20)
        #expect(run.status == 2, "stderr: \(run.stderr)")
        let lines = run.stderr.split(whereSeparator: \.isNewline)
        #expect(lines.count == 1, "stderr: \(run.stderr)")
        #expect(lines.first?.contains("node-x") == true, "stderr: \(run.stderr)")
        #expect(lines.first?.lowercased().contains("camera") == true, "stderr: \(run.stderr)")
        #expect(lines.first?.hasSuffix(".") == true, "not a sentence: \(run.stderr)")
        #expect(!run.stdout.contains("READY"), "stdout: \(run.stdout)")
    }
}
