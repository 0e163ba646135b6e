@testable import Coordinator
import CoordCore
import NodeAgent
import Foundation
import Testing

/// Rig files read from disk: what loads, what is warned about, and the one sentence for what is refused.
@Suite("Rig files")
struct RigFileTests {
    /// Writes `text` to a fresh `rig.yaml` and loads it.
    func load(_ text: String) throws -> RigFile {
        let dir = try E2E.makeScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = dir.appendingPathComponent("rig.yaml")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return try RigFile.load(url.path)
    }

    /// The usage error loading `text` gives; fails the test if it loads.
    func refusal(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        do {
            let file = try load(text)
            Issue.record("loaded: \(file.spec)", sourceLocation: sourceLocation)
            return ""
        } catch let error as CoordError {
            #expect(error.kind == .usage, sourceLocation: sourceLocation)
            #expect(error.message.contains("rig.yaml"), "names the file: \(error.message)", sourceLocation: sourceLocation)
            #expect(!error.message.contains("\n"), "one sentence: \(error.message)", sourceLocation: sourceLocation)
            return error.message
        }
    }

    @Test func theExampleLoadsWithoutWarnings() throws {
        let path = E2E.packageRoot.appendingPathComponent("deploy/rig.example.yaml").path
        let file = try RigFile.load(path)
        #expect(file.warnings.isEmpty, "\(file.warnings)")
        #expect(file.spec.nodes.count == 3)
        #expect(file.spec.nodes.allSatisfy { $0.endpoint.hasSuffix(":5710") })
        #expect(file.spec.camera("overhead", ofNode: "jetson-top") == RigSpec.Camera(name: "overhead", priority: 0, maxFPS: 15, size: "640x480"))
        #expect(file.spec.camera("hero", ofNode: "jetson-top")?.priority == 10)
        #expect(file.spec.nodes[2].cameraNames == ["cam0"])
        #expect(file.spec.pressure == PressurePolicy(serious: .slow, critical: .disable, slowRecordEvery: 2, repeatSeconds: 10))
        #expect(file.spec.take.fps != nil && file.spec.take.size != nil && file.spec.take.codec != nil)
    }

    @Test func theRigFileDiscoverWritesLoadsAsWritten() throws {
        // Issue 27: `coord discover --write-rig` writes a commented take section; both variants load without warnings.
        let nodes = [DiscoveredNode(name: "box-1", endpoint: "tcp://10.0.0.7:5710", cameras: ["cam0", "cam1"], version: "0.1.0", publicKey: nil)]
        for take in [TakeOffer(size: "1280x720", fps: 25, codec: .h264), nil] {
            let file = try load(DiscoveredNode.rigFile(nodes, coordinatorCert: nil, take: take, notAsked: "no reason"))
            #expect(file.warnings.isEmpty, "\(file.warnings)")
            #expect(file.spec.take.size == (take?.size ?? "640x480") && file.spec.take.fps == (take?.fps ?? 30))
            #expect(file.spec.take.codec == (take?.codec ?? .mjpeg) && file.spec.take.takesDir == "./takes")
        }
    }

    /// Every example the packages ship (deploy/*.example.yaml, scripts/package.sh) loads without warnings, as written
    /// and with its commented-out settings switched on; tests/python/test_packages.py loads the installed copies.
    @Test func everyShippedExampleLoads() throws {
        let deploy = E2E.packageRoot.appendingPathComponent("deploy")
        let examples = try FileManager.default.contentsOfDirectory(atPath: deploy.path).filter { $0.hasSuffix(".example.yaml") }.sorted()
        #expect(examples == ["node.example.yaml", "rig.example.yaml"], "a new example needs a loader here")
        for name in examples {
            let text = try String(contentsOf: deploy.appendingPathComponent(name), encoding: .utf8)
            // "  # max_mb_per_s: 40   # …" → "  max_mb_per_s: 40   # …", as an operator uncomments a setting (the
            // rule test_packages.py's `uncommented` uses).
            let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
                guard let m = line.wholeMatch(of: /(\s*)# ?((?:[a-z_]+:|- |  ).*)/),
                      !["coord", "Every", "A ", "1.", "2.", "3.", "Before"].contains(where: { line.drop { $0 == "#" || $0 == " " }.hasPrefix($0) })
                else { return String(line) }
                return String(m.1) + String(m.2)
            }.joined(separator: "\n")
            for (variant, body) in [("as written", text), ("uncommented", uncommented)] {
                let dir = try E2E.makeScratch()
                defer { try? FileManager.default.removeItem(at: dir) }
                let path = dir.appendingPathComponent(name).path
                try body.write(toFile: path, atomically: true, encoding: .utf8)
                let warnings: [String]
                if name.hasPrefix("rig") { warnings = try RigFile.load(path).warnings } else { warnings = try NodeFile.load(path).warnings }
                #expect(warnings.isEmpty, "\(name) \(variant): \(warnings)")
            }
        }
    }

    @Test func cameraEntriesAndThePressurePolicy() throws {
        let file = try load("""
            version: 1
            nodes:
              - name: pi
                endpoint: tcp://127.0.0.1:5555
                cameras:
                  - cam0
                  - name: cam1
                    priority: -3
                    max_fps: 10
                    lens: 35mm
            pressure:
              serious: none
              critical: slow
              slow_record_every: 3
            """)
        #expect(file.spec.nodes[0].cameras == [RigSpec.Camera(name: "cam0"), RigSpec.Camera(name: "cam1", priority: -3, maxFPS: 10)])
        #expect(file.spec.pressure == PressurePolicy(serious: .none, critical: .slow, slowRecordEvery: 3))
        #expect(file.warnings.count == 1)
        #expect(file.warnings.first?.contains("nodes[0].cameras[1].lens") == true, "\(file.warnings)")
        let badAction = try refusal("version: 1\nnodes:\n  - name: a\n    endpoint: tcp://h:1\npressure:\n  serious: panic\n")
        #expect(badAction.contains("pressure.serious"), "\(badAction)")
        let badCap = try refusal("version: 1\nnodes:\n  - name: a\n    endpoint: tcp://h:1\n    cameras:\n      - name: c\n        max_fps: 0\n")
        #expect(badCap.contains("nodes[0].cameras[0].max_fps") && badCap.contains("line"), "\(badCap)")
        let badEvery = try refusal("version: 1\nnodes:\n  - name: a\n    endpoint: tcp://h:1\npressure:\n  slow_record_every: 1\n")
        #expect(badEvery.contains("slow_record_every"), "\(badEvery)")
    }

    @Test func aGoodFile() throws {
        let file = try load("""
            # comment
            version: 1
            nodes:
              - name: pi
                endpoint: tcp://127.0.0.1:5555
              - name: jetson
                endpoint: "tcp://127.0.0.2:5555"
                cameras: [cam0, cam1]
            take:
              fps: 25
              size: 1280x720
              codec: ffv1
              name: scene
              takes_dir: out/takes
            """)
        #expect(file.warnings.isEmpty)
        #expect(file.spec == RigSpec(
            version: 1,
            nodes: [.init(name: "pi", endpoint: "tcp://127.0.0.1:5555"),
                    .init(name: "jetson", endpoint: "tcp://127.0.0.2:5555", cameras: ["cam0", "cam1"])],
            take: .init(fps: 25, size: "1280x720", codec: .ffv1, name: "scene", takesDir: "out/takes")))
    }

    @Test func onlyNodesIsRequired() throws {
        let file = try load("nodes:\n  - {name: a, endpoint: tcp://h:1}\n")
        #expect(file.spec.version == 1)
        #expect(file.spec.take == RigSpec.TakeDefaults())
        #expect(file.warnings.isEmpty)
    }

    @Test func aCamerasControlsAreReadAndAnUnknownControlIsWarnedAbout() throws {
        let file = try load("""
            nodes:
              - name: a
                endpoint: tcp://h:1
                cameras:
                  - name: cam0
                    controls: {exposure_us: 8000, gain_db: 6, white_balance_k: 4500, focus: 0.25, iso: 100}
                  - cam1
            """)
        let cameras = try #require(file.spec.nodes[0].cameras)
        #expect(cameras[0].controls == CameraControls(exposureMicroseconds: 8000, gainDecibels: 6, whiteBalanceKelvin: 4500, focus: 0.25))
        #expect(cameras[1].controls == nil)
        #expect(file.warnings.count == 1 && file.warnings[0].contains("nodes[0].cameras[0].controls.iso"), "\(file.warnings)")
    }

    @Test("a base-60 number (YAML 1.1), which traps inside Yams when it overflows, is refused naming its line")
    func sexagesimalNumbersAreRefused() throws {
        // Found by coord-fuzz: 60¹¹ overflows Int in Yams' sexagesimal reader, and coord died reading the file.
        for text in ["version: 1:0:0:0:0:0:0:0:0:0:0:0\nnodes: []\n",
                     "nodes:\n  - {name: a, endpoint: tcp://h:1}\ntake:\n  fps: 1:0:0:0:0:0:0:0:0:0:0:0\n"] {
            #expect {
                _ = try load(text)
            } throws: { error in
                "\(error)".contains("base-60") && "\(error)".contains("line")
            }
        }
        // Text that merely contains a colon is fine.
        #expect(try load("nodes:\n  - {name: a, endpoint: tcp://10.0.0.1:5710}\n").spec.nodes[0].endpoint == "tcp://10.0.0.1:5710")
        // So is an address YAML 1.1 does not read as a number (node files' `metrics: 0.0.0.0:9710` was refused).
        #expect(try load("nodes:\n  - {name: a, endpoint: tcp://h:1}\nlisten: 0.0.0.0:9710\n").spec.nodes[0].name == "a")
    }

    /// Nine levels of nine aliases each: some 350 bytes that Yams would expand into 9⁹ values (minutes of CPU).
    static let aliasBomb: String = {
        var text = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
        for (previous, name) in zip(names, names.dropFirst()) {
            text += "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 9).joined(separator: ",") + "]\n"
        }
        return text + "nodes: *i\n"
    }()

    @Test("an alias bomb is refused at once, in one sentence naming the line, before Yams expands anything")
    func anAliasBombIsRefusedQuickly() throws {
        let started = ContinuousClock.now
        let message = try refusal(Self.aliasBomb)
        #expect(ContinuousClock.now - started < .seconds(2), "took \(ContinuousClock.now - started)")
        #expect(message.contains("aliases") && message.contains("line "), "\(message)")
        // Deep nesting meets libyaml's own limit, in one sentence too.
        let deep = try refusal("nodes: " + String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000) + "\n")
        #expect(deep.contains("nesting"), "\(deep)")
        // A few aliases, as a hand-written file might use, still load.
        let file = try load("""
            defaults: &cams [cam0, cam1]
            nodes:
              - {name: a, endpoint: "tcp://h:1", cameras: *cams}
              - {name: b, endpoint: "tcp://h:2", cameras: *cams}
            """)
        #expect(file.spec.nodes.map(\.cameraNames) == [["cam0", "cam1"], ["cam0", "cam1"]])
    }

    @Test func unknownKeysAreWarnedAboutNotRefused() throws {
        let file = try load("""
            version: 1
            budgets: {hardware: 0.9}
            nodes:
              - name: a
                endpoint: tcp://h:1
              - name: b
                endpoint: tcp://h:2
                ip: 10.0.0.2
            take:
              fps: 30
              priority: high
            """)
        #expect(file.spec.nodes.map(\.name) == ["a", "b"])
        #expect(file.spec.take.fps == 30)
        #expect(file.warnings.count == 3, "\(file.warnings)")
        #expect(file.warnings.contains { $0.contains("rig.yaml: unknown key budgets ignored") && $0.contains("line 2") })
        #expect(file.warnings.contains { $0.contains("rig.yaml: unknown key nodes[1].ip ignored") && $0.contains("line 8") })
        #expect(file.warnings.contains { $0.contains("rig.yaml: unknown key take.priority ignored") && $0.contains("line 11") })
    }

    @Test func aMissingFile() throws {
        let dir = try E2E.makeScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("rig.yaml").path
        #expect(throws: CoordError.self) { try RigFile.load(path) }
        do { _ = try RigFile.load(path) } catch let e as CoordError {
            #expect(e.kind == .usage)
            #expect(e.message == "\(path): no such rig file.")
        }
    }

    @Test func badYAMLNamesTheLine() throws {
        let message = try refusal("nodes:\n  - name: a\n    endpoint: [tcp://h:1\n")
        #expect(message.contains("line 4") || message.contains("line 3"), "\(message)")
        #expect(message.contains("not valid YAML"), "\(message)")
    }

    @Test func anEmptyFile() throws {
        #expect(try refusal("").contains("empty"))
        #expect(try refusal("# only a comment\n").contains("empty"))
    }

    @Test func notAMapping() throws {
        #expect(try refusal("- a\n- b\n").contains("must be a mapping"))
    }

    @Test func missingNodes() throws {
        let message = try refusal("version: 1\ntake:\n  fps: 30\n")
        #expect(message.contains("nodes is missing"), "\(message)")
    }

    @Test func emptyNodes() throws {
        let message = try refusal("nodes: []\n")
        #expect(message.contains("nodes is empty") && message.contains("line 1"), "\(message)")
    }

    @Test func wrongVersion() throws {
        let message = try refusal("version: 2\nnodes:\n  - name: a\n    endpoint: tcp://h:1\n")
        #expect(message.contains("version 2 is not supported") && message.contains("line 1"), "\(message)")
        // A newer version is refused before its keys are judged: no warning noise.
        let other = try refusal("version: 3\nwhatever: [1]\n")
        #expect(other.contains("version 3"), "\(other)")
        #expect(try refusal("version: one\nnodes: []\n").contains("version must be a whole number"))
    }

    @Test(arguments: [
        ("nodes: tcp://h:1\n", "nodes must be a list", "line 1"),
        ("nodes:\n  - tcp://h:1\n", "nodes[0] must be a mapping", "line 2"),
        ("nodes:\n  - name: a\n    endpoint: tcp://h:1\n    cameras: cam0\n", "nodes[0].cameras must be a list", "line 4"),
        ("nodes:\n  - name: a\n    endpoint: [1, 2]\n", "nodes[0].endpoint must be", "line 3"),
        ("nodes:\n  - name: a\n    endpoint: tcp://h:1\ntake:\n  fps: fast\n", "take.fps must be a whole number", "line 5"),
        ("nodes:\n  - name: a\n    endpoint: tcp://h:1\ntake: 30\n", "take must be a mapping", "line 4"),
        ("nodes:\n  - name: a\n", "nodes[0] has no endpoint", "line 2"),
        ("nodes:\n  - endpoint: tcp://h:1\n", "nodes[0] has no name", "line 2"),
    ])
    func wrongTypesNameTheKey(yaml: String, says: String, line: String) throws {
        let message = try refusal(yaml)
        #expect(message.contains(says), "\(message)")
        #expect(message.contains(line), "\(message)")
    }

    @Test func specProblemsNameTheLine() throws {
        let message = try refusal("""
            nodes:
              - name: a
                endpoint: tcp://h:1
              - name: b
                endpoint: tcp://h:1
            """)
        #expect(message.contains("line 5") && message.contains("nodes[1].endpoint"), "\(message)")
        let fps = try refusal("nodes:\n  - {name: a, endpoint: tcp://h:1}\ntake:\n  fps: 500\n")
        #expect(fps.contains("line 4") && fps.contains("take.fps"), "\(fps)")
    }

    @Test func repeatedKeysAreRefused() throws {
        let message = try refusal("nodes:\n  - {name: a, endpoint: tcp://h:1}\nnodes: []\n")
        #expect(message.contains("nodes"), "\(message)")
    }
}
