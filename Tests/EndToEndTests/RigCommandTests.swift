@testable import Coordinator
import CoordCore
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `coord start-take --rig` and `coord status --rig` run as the operator runs them: the built `coord`
/// executable as a subprocess, against real `coord-node` processes on loopback.
@Suite("End to end: coord start-take and coord status with a rig file", .serialized, .timeLimit(.minutes(4)))
final class RigCommandTests {
    let scratch: URL
    var takes: URL { scratch.appendingPathComponent("takes", isDirectory: true) }

    /// `coord` from the same build as `coord-node` (`$COORD` overrides).
    static let coordBinary: String = {
        if let override = ProcessInfo.processInfo.environment["COORD"], !override.isEmpty { return override }
        return URL(fileURLWithPath: E2E.nodeBinary).deletingLastPathComponent().appendingPathComponent("coord").path
    }()

    init() throws {
        scratch = try E2E.makeScratch()
    }

    deinit {
        try? FileManager.default.removeItem(at: scratch)
    }

    /// Starts one node per name, runs `body`, and always stops them.
    func withNodes<T: Sendable>(_ names: [String], cameras: [String] = ["cam0"],
                                _ body: ([NodeProcess]) async throws -> T) async throws -> T {
        var nodes: [NodeProcess] = []
        defer { for name in nodes.filter({ !$0.stop() }).map(\.name) { Issue.record("node \(name) had to be killed") } }
        for (index, name) in names.enumerated() {
            let staging = scratch.appendingPathComponent("staging-\(index)-\(name)", isDirectory: true)
            let log = scratch.appendingPathComponent("node-\(index)-\(name).log")
            nodes.append(try await E2E.offPool { try NodeProcess.start(name: name, staging: staging, log: log, cameras: cameras) })
        }
        return try await body(nodes)
    }

    /// Writes a rig file naming `nodes` (name, endpoint) with small, quick take defaults.
    func writeRig(_ nodes: [(String, String)], extra: String = "") throws -> URL {
        var text = "version: 1\nnodes:\n"
        for (name, endpoint) in nodes { text += "  - name: \(name)\n    endpoint: \(endpoint)\n" }
        text += "take:\n  size: 320x240\n  fps: 30\n  name: rigtest\n" + extra
        let url = scratch.appendingPathComponent("rig-\(UInt32.random(in: 0...UInt32.max)).yaml")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    func coord(_ arguments: [String], timeout: TimeInterval = 90) async throws -> ToolRun {
        let binary = Self.coordBinary
        return try await E2E.offPool { try ToolRun.run(binary, arguments, timeout: timeout) }
    }

    func manifest(in directory: URL) throws -> [String: Any] {
        let data = try Data(contentsOf: directory.appendingPathComponent("manifest.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    func logs(_ nodes: [NodeProcess]) -> String {
        nodes.map { "--- \($0.name) stderr:\n\($0.logText.suffix(2000))" }.joined(separator: "\n")
    }

    @Test("start-take --seconds 2 across two nodes leaves one complete take; status lists both nodes")
    func startTakeAndStatus() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.coordBinary), "no coord at \(Self.coordBinary)")
        try await withNodes(["node-a", "node-b"]) { nodes in
            let rig = try writeRig(nodes.map { ($0.name, $0.endpoint) })

            let status = try await coord(["status", "--rig", rig.path], timeout: 30)
            #expect(status.status == 0, "stderr: \(status.stderr)")
            let lines = status.stdout.split(separator: "\n").map(String.init)
            #expect(lines.first?.hasPrefix("node") == true, "\(status.stdout)")
            for node in nodes {
                let row = lines.first { $0.hasPrefix(node.name + " ") }
                #expect(row?.contains(node.endpoint) == true, "\(status.stdout)")
                #expect(row?.contains(" yes ") == true, "\(status.stdout)")
                #expect(row?.contains("idle") == true, "\(status.stdout)")
                #expect(row?.contains("cam0") == true, "\(status.stdout)")
            }

            let run = try await coord(["start-take", "--rig", rig.path, "--seconds", "2", "--takes-dir", takes.path])
            #expect(run.status == 0, "stderr: \(run.stderr)\n\(logs(nodes))")
            let made = E2E.contents(takes)
            #expect(made.count == 1, "\(made)")
            guard let id = made.first else { return }
            #expect(id.contains("-rigtest-"), "the rig's take.name is used: \(id)")
            let m = try manifest(in: takes.appendingPathComponent(id))
            #expect(m["status"] as? String == "complete", "\(m["events"] ?? "")")
            #expect((m["groups"] as? NSNumber)?.intValue == 60)
            let cameras = try #require(m["cameras"] as? [[String: Any]])
            #expect(cameras.compactMap { $0["node"] as? String }.sorted() == ["node-a", "node-b"])
            #expect(cameras.allSatisfy { ($0["width"] as? NSNumber)?.intValue == 320 && ($0["frames"] as? NSNumber)?.intValue == 60 })
            #expect(run.stdout.contains("complete"), "the summary is on stdout: \(run.stdout)")
        }
    }

    @Test("start-take without --seconds records until Ctrl-C, then stops every camera at one instant and collects")
    func startTakeUntilInterrupted() async throws {
        try await withNodes(["node-a", "node-b"]) { nodes in
            let rig = try writeRig(nodes.map { ($0.name, $0.endpoint) }, extra: "  takes_dir: takes\n")
            let (process, out, err, exited) = prepare(Self.coordBinary, ["start-take", "--rig", rig.path])
            let stderr = LineWatch(err.fileHandleForReading)
            let stdout = PipeDrain(out.fileHandleForReading)
            try process.run()
            // Recording, and well past the start: then Ctrl-C once.
            let recording = await stderr.wait(for: "recording 1.", timeout: 60)
            #expect(recording, "never saw recording progress: \(stderr.text)")
            kill(process.processIdentifier, SIGINT)
            let finished = try await E2E.offPool { exited.wait(timeout: .now() + 60) == .success }
            if !finished {
                kill(process.processIdentifier, SIGKILL)
                exited.wait()
                Issue.record("coord did not finish within 60 s of Ctrl-C: \(stderr.text)")
                return
            }
            #expect(process.terminationStatus == 0, "stderr: \(stderr.text)\n\(logs(nodes))")
            #expect(stderr.text.contains("stopping every camera at one instant"), "\(stderr.text)")
            _ = stdout.wait()
            // takes_dir is taken from the rig file's directory.
            let made = E2E.contents(takes)
            #expect(made.count == 1, "\(made)")
            guard let id = made.first else { return }
            let m = try manifest(in: takes.appendingPathComponent(id))
            #expect(m["status"] as? String == "complete", "\(m["events"] ?? "")")
            let groups = (m["groups"] as? NSNumber)?.intValue ?? 0
            #expect(groups >= 30 && groups < 30 * 60, "stopped early, after at least a second: \(groups) groups")
            for camera in (m["cameras"] as? [[String: Any]]) ?? [] {
                #expect((camera["frames"] as? NSNumber)?.intValue == groups, "every camera stopped on the same group")
            }
            let events = (m["events"] as? [[String: Any]]) ?? []
            #expect(events.contains { $0["kind"] as? String == "operator-stop" })
        }
    }

    @Test("status exits 1 naming the node nobody answers for, within seconds")
    func statusWithAnUnreachableNode() async throws {
        try await withNodes(["node-a"]) { nodes in
            let port = try E2E.freeLoopbackPort()
            let rig = try writeRig([(nodes[0].name, nodes[0].endpoint), ("ghost", "tcp://127.0.0.1:\(port)")], extra: "  colour: red\n")
            let began = Date()
            let status = try await coord(["status", "--rig", rig.path], timeout: 30)
            let took = Date().timeIntervalSince(began)
            #expect(status.status == 1, "stdout: \(status.stdout)\nstderr: \(status.stderr)")
            #expect(took < 15, "took \(took) s")
            let lastLine = status.stderr.split(separator: "\n").last.map(String.init) ?? ""
            #expect(lastLine.contains("ghost") && lastLine.contains("unreachable") && !lastLine.contains("node-a"), "\(status.stderr)")
            #expect(status.stderr.contains("unknown key take.colour ignored"), "\(status.stderr)")
            let lines = status.stdout.split(separator: "\n").map(String.init)
            #expect(lines.contains { $0.hasPrefix("node-a ") && $0.contains(" yes ") }, "\(status.stdout)")
            #expect(lines.contains { $0.hasPrefix("ghost ") && $0.contains(" no ") }, "\(status.stdout)")
            #expect(lines.contains { $0.contains("ghost is unreachable") }, "\(status.stdout)")

            // start-take refuses before anything is recorded, naming the node by its rig-file name.
            let take = try await coord(["start-take", "--rig", rig.path, "--seconds", "1", "--takes-dir", takes.path], timeout: 60)
            #expect(take.status == 1, "stderr: \(take.stderr)")
            let sentence = take.stderr.split(separator: "\n").last.map(String.init) ?? ""
            #expect(sentence.contains("node ghost at tcp://127.0.0.1:\(port)"), "\(take.stderr)")
            #expect(E2E.regularFiles(under: takes).isEmpty, "\(E2E.regularFiles(under: takes))")
            let after = try await coord(["status", "--rig", rig.path], timeout: 30)
            #expect(after.stdout.split(separator: "\n").contains { $0.hasPrefix("node-a ") && $0.contains(" idle ") },
                    "node-a was left holding a take: \(after.stdout)")
        }
    }

    @Test("usage and rig-file errors exit 2 with one sentence")
    func usageErrors() async throws {
        let missing = try await coord(["start-take", "--rig", scratch.appendingPathComponent("nope.yaml").path], timeout: 30)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("nope.yaml: no such rig file."), "\(missing.stderr)")
        #expect(missing.stderr.split(separator: "\n").count == 1, "\(missing.stderr)")

        let badRig = scratch.appendingPathComponent("bad.yaml")
        try "nodes:\n  - name: a\n    endpoint: tcp://127.0.0.1:9\ntake:\n  fps: 1000\n".write(to: badRig, atomically: true, encoding: .utf8)
        for command in ["start-take", "status"] {
            let run = try await coord([command, "--rig", badRig.path], timeout: 30)
            #expect(run.status == 2, "\(command): \(run.stderr)")
            #expect(run.stderr.contains("bad.yaml line 5: take.fps"), "\(command): \(run.stderr)")
        }

        let rig = try writeRig([("a", "tcp://127.0.0.1:9")])
        let codec = try await coord(["start-take", "--rig", rig.path, "--codec", "prores"], timeout: 30)
        #expect(codec.status == 2 && codec.stderr.contains("--codec"), "\(codec.stderr)")
        let size = try await coord(["start-take", "--rig", rig.path, "--size", "big"], timeout: 30)
        #expect(size.status == 2 && size.stderr.contains("--size"), "\(size.stderr)")
        let noRig = try await coord(["start-take"], timeout: 30)
        #expect(noRig.status == 2, "\(noRig.stderr)")
    }

    @Test("--seconds out of range is one sentence and exit 2 before any take directory exists; -1 is a value, not a flag")
    func secondsOutOfRange() async throws {
        let rig = try writeRig([("a", "tcp://127.0.0.1:9")])
        let demoTakes = scratch.appendingPathComponent("seconds-takes")
        for value in ["inf", "1e300", "0.001", "-1", "nan", "0", "86401"] {
            for command in [["start-take", "--rig", rig.path], ["demo", "--nodes", "1"]] {
                let run = try await coord(command + ["--seconds", value, "--takes-dir", demoTakes.path], timeout: 30)
                #expect(run.status == 2, "\(command[0]) --seconds \(value): \(run.stderr)")
                #expect(run.stderr.contains("--seconds must be between one frame"), "\(command[0]) --seconds \(value): \(run.stderr)")
                #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: demoTakes.path), "a refused take left \(E2E.contents(demoTakes))")
    }

    @Test("a takes directory that cannot be made is a configuration error (exit 2) naming it, before any node is asked")
    func unwritableTakesDirectory() async throws {
        let file = scratch.appendingPathComponent("not-a-directory")
        try "x".write(to: file, atomically: true, encoding: .utf8)
        let rig = try writeRig([("a", "tcp://127.0.0.1:9")])
        let run = try await coord(["start-take", "--rig", rig.path, "--seconds", "1", "--takes-dir", file.appendingPathComponent("takes").path], timeout: 30)
        #expect(run.status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("takes directory \(file.appendingPathComponent("takes").path)"), "\(run.stderr)")
        #expect(!run.stderr.contains("handshake"), "the nodes were asked first: \(run.stderr)")
    }

    @Test("a 5 MB value in a rig file is echoed as a short prefix, whatever field holds it")
    func hugeRigValuesAreCut() async throws {
        let big = String(repeating: "x", count: 5_000_000)
        let files = [
            "version: 1\nnodes:\n  - name: \(big)\n    endpoint: tcp://127.0.0.1:9\n",
            "version: 1\nnodes:\n  - name: a\n    endpoint: tcp://\(big):9\n",
            "version: 1\nnodes:\n  - name: a\n    endpoint: \(big)\n",
            "version: 1\nnodes:\n  - name: a\n    endpoint: tcp://127.0.0.1:9\ntake:\n  size: \(big)\n",
            "version: 1\nnodes:\n  - name: a\n    endpoint: tcp://127.0.0.1:9\n    cameras:\n      - name: \(big)\n",
        ]
        for (i, text) in files.enumerated() {
            let rig = scratch.appendingPathComponent("big-\(i).yaml")
            try text.write(to: rig, atomically: true, encoding: .utf8)
            let run = try await coord(["start-take", "--rig", rig.path, "--seconds", "1"], timeout: 60)
            #expect(run.status != 0)
            #expect(run.stderr.utf8.count < 2000, "case \(i): \(run.stderr.utf8.count) bytes on stderr")
            #expect(run.stderr.contains("bytes)"), "case \(i): \(run.stderr.prefix(300))")
        }
    }

    @Test("a rig file's nodes[].cameras chooses which cameras record; a camera the node lacks is named")
    func cameraSelection() async throws {
        try await withNodes(["node-a", "node-b"], cameras: ["cam0", "cam1"]) { nodes in
            var text = "version: 1\nnodes:\n"
            text += "  - name: node-a\n    endpoint: \(nodes[0].endpoint)\n    cameras: [cam1]\n"
            text += "  - name: node-b\n    endpoint: \(nodes[1].endpoint)\n"
            text += "take:\n  size: 320x240\n  name: rigtest\n"
            let rig = scratch.appendingPathComponent("rig-select.yaml")
            try text.write(to: rig, atomically: true, encoding: .utf8)
            let run = try await coord(["start-take", "--rig", rig.path, "--seconds", "1", "--takes-dir", takes.path])
            #expect(run.status == 0, "stderr: \(run.stderr)\n\(logs(nodes))")
            guard let id = E2E.contents(takes).first else { Issue.record("no take directory"); return }
            let m = try manifest(in: takes.appendingPathComponent(id))
            let recorded = ((m["cameras"] as? [[String: Any]]) ?? []).map { "\($0["node"] ?? "")/\($0["camera"] ?? "")" }.sorted()
            #expect(recorded == ["node-a/cam1", "node-b/cam0", "node-b/cam1"], "\(recorded)")

            let wrong = scratch.appendingPathComponent("rig-wrong.yaml")
            try text.replacingOccurrences(of: "[cam1]", with: "[cam7]").write(to: wrong, atomically: true, encoding: .utf8)
            let refused = try await coord(["start-take", "--rig", wrong.path, "--seconds", "1", "--takes-dir", takes.path])
            #expect(refused.status == 2, "\(refused.stderr)")
            let last = refused.stderr.split(separator: "\n").last.map(String.init) ?? ""
            #expect(last.contains("node-a") && last.contains("cam7") && last.contains("cam0, cam1"), "\(last)")
            #expect(E2E.contents(takes).count == 1, "a refused take leaves no directory")
        }
    }
}

/// Collects a pipe's text on a thread and lets a test wait for a line holding some text.
final class LineWatch: Sendable {
    private let data = Mutex(Data())

    init(_ handle: FileHandle) {
        Thread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                data.withLock { $0.append(chunk) }
            }
        }.start()
    }

    var text: String {
        String(decoding: data.withLock { $0 }, as: UTF8.self)
    }

    func wait(for needle: String, timeout: TimeInterval) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if text.contains(needle) { return true }
            try? await Task.sleep(nanoseconds: 100_000_000)
        }
        return text.contains(needle)
    }
}
