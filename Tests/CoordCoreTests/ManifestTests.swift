import Foundation
import Testing
@testable import CoordCore

@Suite struct TakeManifestTests {
    let manifest = TakeManifest(
        takeID: "20260312-141500-scene1-0a1b2c", name: "scene1", status: .partial, t0Microseconds: 123_456_789_000,
        framePeriodMicroseconds: 33_333, groups: 150, startWallclock: "2026-03-12T14:15:00.123456Z",
        cameras: [
            .init(node: "node-a", camera: "cam0", ordinal: 0, width: 640, height: 480, fps: 30, codec: "mjpeg", frames: 150, dropped: 2,
                  clock: .init(offsetMicroseconds: -250_012.5, driftPPM: 49.7, uncertaintyMicroseconds: 31.25),
                  files: [.init(path: "node-a/cam0.mkv", bytes: 9_876_543_210, sha256: String(repeating: "ab", count: 32)),
                          .init(path: "node-a/cam0.frames.csv", bytes: 4_321, sha256: String(repeating: "0f", count: 32))]),
            .init(node: "node-b", camera: "cam0", ordinal: 1, width: 640, height: 480, fps: 30, codec: "mjpeg", frames: 0, dropped: 0,
                  clock: .init(offsetMicroseconds: 0, driftPPM: 0, uncertaintyMicroseconds: 0), files: []),
        ],
        events: [.init(tMicroseconds: 123_456_800_000, node: "node-b", camera: "cam0", kind: "camera-lost", detail: "no frames for 2 s")])

    private func jsonObject() throws -> [String: Any] {
        let data = try JSONEncoder().encode(manifest)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func topLevelKeysAreExactlyTheContracts() throws {
        let o = try jsonObject()
        #expect(Set(o.keys) == ["format", "take_id", "name", "status", "t0_us", "frame_period_us", "groups", "start_wallclock",
                                "cameras", "events"])
        #expect(o["format"] as? String == "coord.take/1")
        #expect(o["take_id"] as? String == "20260312-141500-scene1-0a1b2c")
        #expect(o["status"] as? String == "partial")
        #expect(o["t0_us"] as? Int == 123_456_789_000)
        #expect(o["frame_period_us"] as? Int == 33_333)
        #expect(o["groups"] as? Int == 150)
        #expect(o["start_wallclock"] as? String == "2026-03-12T14:15:00.123456Z")
    }

    @Test func cameraClockFileAndEventKeysAreExactlyTheContracts() throws {
        let o = try jsonObject()
        let cameras = try #require(o["cameras"] as? [[String: Any]])
        #expect(cameras.count == 2)
        for camera in cameras {
            #expect(Set(camera.keys) == ["node", "camera", "ordinal", "width", "height", "fps", "codec", "frames", "dropped", "clock", "files"])
            let clock = try #require(camera["clock"] as? [String: Any])
            #expect(Set(clock.keys) == ["offset_us", "drift_ppm", "uncertainty_us"])
        }
        let clock = try #require(cameras[0]["clock"] as? [String: Any])
        #expect(clock["offset_us"] as? Double == -250_012.5)
        let files = try #require(cameras[0]["files"] as? [[String: Any]])
        #expect(files.count == 2)
        for file in files { #expect(Set(file.keys) == ["path", "bytes", "sha256"]) }
        #expect(files[0]["path"] as? String == "node-a/cam0.mkv")
        #expect((files[0]["bytes"] as? NSNumber)?.uint64Value == 9_876_543_210)
        let events = try #require(o["events"] as? [[String: Any]])
        #expect(events.count == 1)
        #expect(Set(events[0].keys) == ["t_us", "node", "camera", "kind", "detail"])
        #expect(events[0]["t_us"] as? Int == 123_456_800_000)
    }

    @Test func statusIsCompleteOrPartial() throws {
        var m = manifest
        m.status = .complete
        let o = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(m)) as? [String: Any])
        #expect(o["status"] as? String == "complete")
    }

    @Test func roundTripsAndToleratesUnknownKeysAtEveryLevel() throws {
        let data = try JSONEncoder().encode(manifest)
        #expect(try JSONDecoder().decode(TakeManifest.self, from: data) == manifest)

        var o = try jsonObject()
        o["added_later"] = ["any": "thing"]
        var cameras = try #require(o["cameras"] as? [[String: Any]])
        cameras[0]["sensor_temperature"] = 41.5
        var clock = try #require(cameras[0]["clock"] as? [String: Any])
        clock["method"] = "ntp"
        cameras[0]["clock"] = clock
        var files = try #require(cameras[0]["files"] as? [[String: Any]])
        files[0]["mtime"] = 17
        cameras[0]["files"] = files
        o["cameras"] = cameras
        var events = try #require(o["events"] as? [[String: Any]])
        events[0]["severity"] = "warning"
        o["events"] = events
        let extended = try JSONSerialization.data(withJSONObject: o)
        #expect(try JSONDecoder().decode(TakeManifest.self, from: extended) == manifest)
    }
}
