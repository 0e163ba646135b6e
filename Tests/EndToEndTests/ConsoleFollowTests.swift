@testable import Coordinator
import CoordCore
import Foundation
import Logging
import Testing

/// The console's bookkeeping as the rig changes (issue 27): the rig's camera counters over many takes, and the rig
/// file written back with the controls the operator settled on.
@Suite("Console follows the rig")
struct ConsoleFollowTests {
    typealias Camera = NodeMetricsSample.Camera

    @Test func theCountersKeepEveryTakeAndTakeEachTakesFinalFigures() {
        var counts = LiveRig.CameraCounts()
        counts.seen([Camera(camera: "cam0", takeID: "A", frames: 10)])
        counts.seen([Camera(camera: "cam0", takeID: "A", frames: 20, dups: 1)])
        #expect(counts.totals.map(\.frames) == [20])
        counts.seen([])                                   // collected: the node is idle, its counts gone
        #expect(counts.totals.map(\.frames) == [20])
        counts.finished(Camera(camera: "cam0", takeID: "A", frames: 25, dups: 2))  // the manifest: 5 frames unseen
        #expect(counts.totals.map(\.frames) == [25] && counts.totals.map(\.dups) == [2])
        counts.seen([Camera(camera: "cam0", takeID: "B", frames: 5)])
        counts.finished(Camera(camera: "cam0", takeID: "B", frames: 7))
        #expect(counts.totals.map(\.frames) == [32])
        counts.seen([Camera(camera: "cam0", takeID: "C", frames: 1)])  // B ends as C starts
        #expect(counts.totals.map(\.frames) == [33])
        counts.finished(Camera(camera: "cam0", takeID: "Z", frames: 4))   // a take never seen counts whole
        #expect(counts.totals.map(\.frames) == [37])
        counts.seen([Camera(camera: "cam0", takeID: "Z", frames: 4)])     // and is not counted again when seen after
        #expect(counts.totals.map(\.frames) == [37])
    }

    @Test func theRigFileTakesTheControlsAndStillLoads() throws {
        let dir = try E2E.makeScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("rig.yaml").path
        try """
        version: 1
        # the studio's rig
        nodes:
          - name: a
            endpoint: tcp://127.0.0.1:5710
            cameras: [cam0, {name: cam1, size: 320x240}]
          - name: b
            endpoint: tcp://127.0.0.1:5720
        take:
          fps: 25
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let file = try RigFile.load(path)
        let rig = LiveRig(spec: file.spec, template: TakeRequest(name: "t", seconds: 1, fps: 25, width: 320, height: 240, codec: .mjpeg,
                                                                 takesDirectory: dir),
                          rigFile: path, logger: Logger(label: "test"))
        rig.state.withLock { s in
            s.nodes[0].cameras = [CameraSettings(camera: "cam0", ordinal: 0, width: 320, height: 240, fps: 25, codec: .mjpeg),
                                  CameraSettings(camera: "cam1", ordinal: 1, width: 320, height: 240, fps: 25, codec: .mjpeg)]
            s.nodes[0].operatorControls = ["cam0": CameraControls(exposureMicroseconds: 9000, gainDecibels: 1.5, whiteBalanceKelvin: 4000, focus: 0.25)]
            s.nodes[0].controls = ["cam1": CameraControls(exposureMicroseconds: 5000)]  // in force, never set here: not written
            s.nodes[1].cameras = [CameraSettings(camera: "cam0", ordinal: 2, width: 320, height: 240, fps: 25, codec: .mjpeg)]
            s.nodes[1].operatorControls = ["cam0": CameraControls(exposureMicroseconds: 20000)]
        }
        let written = try rig.rigFileWithControls()
        #expect(written.name == "rig.yaml")
        #expect(written.text.contains("# the studio's rig\nnodes:\n"))
        let again = try RigFile.parse(written.text, path: "rig.yaml").spec
        #expect(again.nodes[0].cameras?.map(\.name) == ["cam0", "cam1"])
        #expect(again.nodes[0].cameras?[0].controls == CameraControls(exposureMicroseconds: 9000, gainDecibels: 1.5, whiteBalanceKelvin: 4000, focus: 0.25))
        #expect(again.nodes[0].cameras?[1].controls == nil && again.nodes[0].cameras?[1].size == "320x240")
        #expect(again.nodes[1].cameras?.first?.controls?.exposureMicroseconds == 20000)
        #expect(again.nodes[1].endpoint == "tcp://127.0.0.1:5720" && again.take.fps == 25)
    }

    @Test func aTakeFromTheConsoleOpensEachCameraWithTheControlsTheOperatorLastSet() {
        let file: [String: [RigSpec.Camera]] = [
            "tcp://a:5710": [RigSpec.Camera(name: "cam0", controls: CameraControls(exposureMicroseconds: 8000, gainDecibels: 1)),
                             RigSpec.Camera(name: "cam1", size: "320x240")],
        ]
        let merged = LiveRig.withOperatorControls(file, [("tcp://a:5710", ["cam0": CameraControls(exposureMicroseconds: 12000),
                                                                           "cam1": CameraControls(focus: 0.5)]),
                                                         ("tcp://b:5710", ["cam0": CameraControls(exposureMicroseconds: 1)])])
        #expect(merged["tcp://a:5710"]?[0].controls == CameraControls(exposureMicroseconds: 12000, gainDecibels: 1))
        #expect(merged["tcp://a:5710"]?[1].controls == CameraControls(focus: 0.5) && merged["tcp://a:5710"]?[1].size == "320x240")
        #expect(merged["tcp://b:5710"] == nil)  // a node whose file lists no cameras: they keep what is in force
        // What the console shows as the next take's values agrees with what the take is given.
        for (endpoint, camera, set) in [("tcp://a:5710", "cam0", CameraControls(exposureMicroseconds: 12000)),
                                        ("tcp://a:5710", "cam1", CameraControls(focus: 0.5))] {
            #expect(LiveRig.takeControls(file: file[endpoint], camera: camera, setHere: set)
                    == merged[endpoint]?.first(where: { $0.name == camera })?.controls)
        }
        // Nothing set in this console (one restarted since): the file's values, which the take will put back.
        #expect(LiveRig.takeControls(file: file["tcp://a:5710"], camera: "cam0", setHere: nil)
                == CameraControls(exposureMicroseconds: 8000, gainDecibels: 1))
        #expect(LiveRig.takeControls(file: file["tcp://a:5710"], camera: "cam1", setHere: nil).isEmpty)
        #expect(LiveRig.takeControls(file: nil, camera: "cam0", setHere: CameraControls(focus: 0.5)) == CameraControls(focus: 0.5))
    }

    @Test func savingWritesTheConsolesOwnRigFileKeepsTheOldOneAndRefusesADemo() throws {
        let dir = try E2E.makeScratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("rig.yaml").path
        let original = """
        version: 1
        # the studio's rig: keep this comment
        nodes:
          - name: a
            endpoint: tcp://127.0.0.1:5710
            cameras: [cam0]
        take:
          fps: 25
        """
        try original.write(toFile: path, atomically: true, encoding: .utf8)
        let template = TakeRequest(name: "t", seconds: 1, fps: 25, width: 320, height: 240, codec: .mjpeg, takesDirectory: dir)
        let rig = LiveRig(spec: try RigFile.load(path).spec, template: template, rigFile: path, logger: Logger(label: "test"))
        rig.state.withLock { s in
            s.nodes[0].cameras = [CameraSettings(camera: "cam0", ordinal: 0, width: 320, height: 240, fps: 25, codec: .mjpeg)]
            s.nodes[0].operatorControls = ["cam0": CameraControls(exposureMicroseconds: 12000, whiteBalanceKelvin: 4300)]
        }
        let saved = try rig.saveRigFile()
        #expect(saved == LiveRig.SavedRigFile(path: path, backup: path + ".bak", cameras: 1))
        #expect(try String(contentsOfFile: path + ".bak", encoding: .utf8) == original)
        // The file as the operator wrote it, only the controls written in.
        let first = try String(contentsOfFile: path, encoding: .utf8)
        #expect(first == original.replacingOccurrences(of: "cameras: [cam0]", with: "cameras: [{name: cam0, controls: {exposure_us: 12000, white_balance_k: 4300}}]"))
        #expect(try RigFile.load(path).spec.nodes[0].cameras?.first?.controls == CameraControls(exposureMicroseconds: 12000, whiteBalanceKelvin: 4300))
        // Nothing else left in the directory (no temporary file).
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["rig.yaml", "rig.yaml.bak"])
        // Saved again: the backup is the file as it was just before, and only the one value changed.
        rig.state.withLock { $0.nodes[0].operatorControls["cam0"]?.exposureMicroseconds = 15000 }
        _ = try rig.saveRigFile()
        #expect(try String(contentsOfFile: path + ".bak", encoding: .utf8) == first)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == first.replacingOccurrences(of: "12000", with: "15000"))

        // Edited by hand since: not saved over, one sentence, nothing written.
        let byHand = try String(contentsOfFile: path, encoding: .utf8) + "\n# a note added by hand\n"
        try byHand.write(toFile: path, atomically: true, encoding: .utf8)
        rig.state.withLock { $0.nodes[0].operatorControls["cam0"]?.exposureMicroseconds = 16000 }
        do {
            _ = try rig.saveRigFile()
            Issue.record("saved over a file changed on disk")
        } catch {
            #expect(error.sentence.contains("changed on disk"))
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == byHand)

        // A demo has no rig file: one sentence, nothing written.
        let demo = LiveRig(spec: try RigFile.load(path).spec, template: template, logger: Logger(label: "test"))
        #expect(throws: LiveRig.Refusal.self) { try demo.saveRigFile() }
        do { _ = try demo.saveRigFile() } catch { #expect(error.sentence.contains("no rig file")) }
    }
}
